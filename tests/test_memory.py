import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from skyjoin._core import memory
from skyjoin._core.memory import (MAP_MIN_BYTES, alloc_host, available_host_bytes,
                                  huge_pages_pay, release_retained, retained_bytes)


@pytest.fixture
def clean_pool():
    gc.collect()
    release_retained()
    yield
    gc.collect()
    release_retained()


def test_alloc_host_small_and_large_are_plain_writable_arrays():
    for n in (0, 5, MAP_MIN_BYTES // 4 + 3):
        a = alloc_host(n, np.int32)
        assert a.shape == (n,) and a.dtype == np.int32 and a.flags.writeable
        a[:] = np.arange(n, dtype=np.int32)
        assert n == 0 or (a[0] == 0 and a[-1] == n - 1)


def test_freed_mapping_is_reused_for_a_request_it_holds(clean_pool):
    n = MAP_MIN_BYTES // 4 + 1000
    a = alloc_host(n, np.int32)
    a[:] = 7
    addr = a.ctypes.data
    del a
    gc.collect()
    assert retained_bytes() >= n * 4
    b = alloc_host(n - 500, np.int32)            # fits: the same pages
    assert b.ctypes.data == addr and b.base.nbytes == n * 4 and retained_bytes() == 0
    b[:] = np.arange(n - 500, dtype=np.int32)
    assert b[0] == 0 and b[-1] == n - 501


def test_a_view_keeps_the_mapping_out_of_reuse(clean_pool):
    n = MAP_MIN_BYTES // 4 + 1000
    a = alloc_host(n, np.int32)
    a[:] = np.arange(n, dtype=np.int32)
    view = a[10:20].reshape(2, 5)[::-1]
    del a
    gc.collect()
    assert retained_bytes() == 0                 # the view still uses it
    b = alloc_host(n, np.int32)
    b[:] = -1
    np.testing.assert_array_equal(view, np.arange(10, 20, dtype=np.int32).reshape(2, 5)[::-1])
    del view, b


def test_a_mapping_much_larger_than_the_request_is_released(clean_pool):
    big = alloc_host(4 * MAP_MIN_BYTES // 8, np.int64)
    del big
    gc.collect()
    assert retained_bytes() == 4 * MAP_MIN_BYTES
    small = alloc_host(MAP_MIN_BYTES // 8, np.int64)     # a quarter: not reused
    assert retained_bytes() == 0 and small.base.nbytes == MAP_MIN_BYTES


def test_kept_mapping_counts_as_available_and_is_released(clean_pool, monkeypatch):
    monkeypatch.setattr(memory, "_system_available_bytes", lambda: 10 ** 12)
    a = alloc_host(MAP_MIN_BYTES // 4, np.int32)
    del a
    gc.collect()
    kept = retained_bytes()
    assert kept == MAP_MIN_BYTES
    assert available_host_bytes() == 10 ** 12 + kept
    assert release_retained() == kept and retained_bytes() == 0
    assert available_host_bytes() == 10 ** 12


def test_nothing_kept_when_memory_is_short(clean_pool, monkeypatch):
    monkeypatch.setattr(memory, "_system_available_bytes", lambda: 3 * MAP_MIN_BYTES)
    a = alloc_host(MAP_MIN_BYTES // 4, np.int32)
    del a
    gc.collect()
    assert retained_bytes() == 0


def test_page_policy_reads_the_virtio_balloon_features(tmp_path, monkeypatch):
    """Huge pages unless a bound virtio balloon offers free page reporting
    (feature bit 5)."""
    def device(name, dev_id, features, bound=True):
        d = tmp_path / name
        d.mkdir()
        (d / "device").write_text(dev_id + "\n")
        (d / "features").write_text(features + "\n")
        if bound:
            (d / "driver").mkdir()
    device("virtio0", "0x0002", "0" * 5 + "1" + "0" * 10)          # a block device
    device("virtio1", "0x0005", "0110010100" + "0" * 6, bound=False)
    real_glob = memory.glob.glob
    monkeypatch.setattr(memory.glob, "glob", lambda pat: sorted(real_glob(str(tmp_path / "*"))))
    assert memory._host_takes_free_memory() is False
    device("virtio2", "0x0005", "0110000000" + "0" * 6)             # no reporting
    assert memory._host_takes_free_memory() is False
    device("virtio3", "0x0005", "0110010100" + "0" * 6)
    assert memory._host_takes_free_memory() is True
    assert isinstance(huge_pages_pay(), bool)


def test_reuse_false_maps_new_pages(clean_pool):
    n = MAP_MIN_BYTES // 4
    a = alloc_host(n, np.int32)
    addr = a.ctypes.data
    del a
    gc.collect()
    kept = retained_bytes()
    b = alloc_host(n, np.int32, reuse=False)
    assert b.ctypes.data != addr and retained_bytes() == kept == n * 4


@pytest.mark.parametrize("value, expected", [("1", True), ("0", False)])
def test_environment_overrides_the_page_rule(value, expected):
    code = "from skyjoin._core.memory import huge_pages_pay; print(huge_pages_pay())"
    env = {**os.environ, "SKYJOIN_HUGE_PAGES": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str(expected)

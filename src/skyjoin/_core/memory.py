"""Large host arrays whose first touch is cheap, and the reuse of their pages.

A result array of hundreds of MB (a neighbour table's column indices) is
written once, right after it is allocated, and the first write to each page
is a fault that the kernel answers with a zeroed page.  Two things set the
price of those faults:

* the page size: a transparent huge page (2 MB, granted to a mapping that
  asks with ``MADV_HUGEPAGE`` where the system setting is "madvise" or
  "always") takes one fault where 4 KB pages take 512;
* where the page comes from.  A virtual machine whose balloon reports free
  memory to its host (virtio-balloon free page reporting) hands every free
  block of 2 MB or more back to the host shortly after it is freed.  A huge
  page is always such a block, so its first touch waits for the host to
  back it again; a 4 KB page is taken from the small free blocks first,
  which are never reported.  On such a guest, huge pages are the slow
  choice as soon as the memory was freed more than a moment before: in a
  new process, or after another library has allocated and freed memory.

``huge_pages_pay`` makes that choice, once per process: huge pages unless
the host takes free memory back.  NumPy itself asks for huge pages for every
array of 4 MiB or more, so ``alloc_host`` maps such arrays itself.

Reuse: the mapping of a large ``alloc_host`` array, once no array uses it,
is kept (one mapping, the last freed, while it is at most a quarter of the
memory still available) and serves the next request it can hold (at most
twice the request's size; the unused tail is handed back).  Its pages are
already faulted in, so a pipeline that drops a result and asks for another
of similar size pays no first touch.  ``available_host_bytes`` counts the
kept mapping as available, a request that cannot use it releases it before
mapping anew (the peak is that of no reuse), and ``release_retained`` hands
it back at once.
"""

from __future__ import annotations

import errno
import glob
import mmap
import os
import threading
import weakref

import numpy as np

from .config import HUGE_PAGES

__all__ = ["alloc_host", "available_host_bytes", "huge_pages_pay", "release_retained",
           "retained_bytes"]

#: from this size on, alloc_host maps the array itself (NumPy asks for huge
#: pages for its own arrays from 4 MiB on)
MAP_MIN_BYTES = 4 << 20
#: a freed mapping is kept while it is at most this share of the available memory
RETAIN_MAX_SHARE = 0.25
#: virtio device id of the memory balloon, and its free page reporting feature bit
_VIRTIO_BALLOON_ID = 0x0005
_VIRTIO_BALLOON_F_REPORTING = 5

_PAGE = mmap.PAGESIZE
_LOCK = threading.Lock()
_RETAINED: list[mmap.mmap] = []      # at most one mapping, no array on it
_POLICY: list[bool] = []             # huge_pages_pay's answer, once known


def huge_pages_pay() -> bool:
    """Whether large arrays should ask for transparent huge pages.

    True unless this system is a virtual machine whose memory balloon
    reports free pages to its host (a virtio balloon device offering
    ``VIRTIO_BALLOON_F_REPORTING``, read from ``/sys/bus/virtio/devices``):
    there the first touch of a huge page waits for the host to back memory
    it took back, while 4 KB pages come from memory that stays with the
    guest (module docstring).  The environment variable
    ``SKYJOIN_HUGE_PAGES`` ("1" or "0") overrides the rule.  Decided once
    per process (a few small file reads).

    Examples
    --------
    >>> isinstance(huge_pages_pay(), bool)
    True
    """
    if not _POLICY:
        if HUGE_PAGES in ("1", "0", "true", "false", "yes", "no"):
            _POLICY.append(HUGE_PAGES in ("1", "true", "yes"))
        else:
            _POLICY.append(not _host_takes_free_memory())
    return _POLICY[0]


def _host_takes_free_memory() -> bool:
    """Whether a virtio balloon with free page reporting is bound to a driver."""
    for dev in glob.glob("/sys/bus/virtio/devices/*"):
        try:
            with open(os.path.join(dev, "device"), encoding="ascii") as fh:
                if int(fh.read().strip(), 16) != _VIRTIO_BALLOON_ID:
                    continue
            with open(os.path.join(dev, "features"), encoding="ascii") as fh:
                bits = fh.read().strip()
        except (OSError, ValueError):
            continue
        if (len(bits) > _VIRTIO_BALLOON_F_REPORTING and bits[_VIRTIO_BALLOON_F_REPORTING] == "1"
                and os.path.exists(os.path.join(dev, "driver"))):
            return True
    return False


def alloc_host(n: int, dtype=np.int32, reuse: bool = True) -> np.ndarray:
    """An uninitialised 1-D host array of n items.

    Below ``MAP_MIN_BYTES`` a NumPy array.  Larger: the kept mapping of an
    earlier array when it can hold this one (its pages already faulted in;
    not with ``reuse=False``, which measures a first touch), else a new
    anonymous mapping on huge pages or on 4 KB pages as ``huge_pages_pay``
    says; either way the mapping is kept for reuse once no array uses it
    (module docstring).  Cost: O(1) system calls, the pages are faulted in
    when first written.

    Raises MemoryError, giving the size and the ways to stream a join
    result instead, when the memory cannot be had.

    Examples
    --------
    >>> a = alloc_host(10, np.int64)
    >>> a.shape, a.dtype, a.flags.writeable
    ((10,), dtype('int64'), True)
    """
    n = int(n)
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    try:
        if nbytes < MAP_MIN_BYTES:
            return np.empty(n, dtype=dtype)
        buf = _take_retained(nbytes) if reuse else None
        if buf is None:
            buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            _advise_pages(buf)
    except (MemoryError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno != errno.ENOMEM:
            raise
        raise MemoryError(
            f"cannot allocate {nbytes:,} bytes ({n:,} items of {dtype}) in host memory; "
            "for a join result, stream it with skyjoin.self_join_chunks (or the "
            "command line's --out pairs.parquet) or ask output='counts'") from exc
    out = np.frombuffer(buf, dtype=dtype, count=n)
    # every view of ``out`` keeps ``out`` alive: once it goes, nothing uses buf
    weakref.finalize(out, _retain, buf).atexit = False
    return out


def _advise_pages(buf: mmap.mmap) -> None:
    """Ask for the page size ``huge_pages_pay`` chooses (where the system has
    the advice; a refusal leaves the system's default)."""
    advice = getattr(mmap, "MADV_HUGEPAGE" if huge_pages_pay() else "MADV_NOHUGEPAGE", None)
    if advice is not None:
        try:
            buf.madvise(advice)
        except OSError:
            pass


def _take_retained(nbytes: int) -> mmap.mmap | None:
    """The kept mapping if it can hold nbytes and is at most twice that
    (its tail beyond nbytes handed back); else it is released and None."""
    for buf in _pop_retained():
        if nbytes <= len(buf) <= 2 * nbytes:
            start = -(-nbytes // _PAGE) * _PAGE
            if start < len(buf) and hasattr(mmap, "MADV_DONTNEED"):
                buf.madvise(mmap.MADV_DONTNEED, start, len(buf) - start)
            return buf
    return None   # the others are unmapped with their last reference, here


def _pop_retained() -> list[mmap.mmap]:
    """The kept mappings, no longer kept (unmapped with their last reference)."""
    with _LOCK:
        kept = _RETAINED[:]
        _RETAINED.clear()
    return kept


def _retain(buf: mmap.mmap) -> None:
    """Keep buf (no array uses it any more) in place of the mapping kept
    before, while it is at most ``RETAIN_MAX_SHARE`` of the available memory."""
    avail = _system_available_bytes()
    keep = avail is not None and len(buf) <= RETAIN_MAX_SHARE * avail
    with _LOCK:
        _RETAINED[:] = [buf] if keep else []


def release_retained() -> int:
    """Hand the kept mapping (if any) back to the system now; its size in bytes.

    Examples
    --------
    >>> release_retained() >= 0
    True
    """
    return sum(len(b) for b in _pop_retained())


def retained_bytes() -> int:
    """Bytes of the mapping kept for reuse (0 when none).

    Examples
    --------
    >>> retained_bytes() >= 0
    True
    """
    with _LOCK:
        return sum(len(b) for b in _RETAINED)


def available_host_bytes() -> int | None:
    """Bytes of host memory the system can still give without swapping, or None.

    Linux: ``MemAvailable`` of ``/proc/meminfo`` (free memory plus the page
    cache and other memory the kernel can reclaim).  Elsewhere the free
    physical pages (``os.sysconf("SC_AVPHYS_PAGES")``), which ignore the
    reclaimable cache; None where neither is known.  Either way plus the
    mapping ``alloc_host`` keeps for reuse (given up on demand).  Cost: one
    read of a small file.

    Examples
    --------
    >>> b = available_host_bytes()
    >>> b is None or b >= 0
    True
    """
    free = _system_available_bytes()
    return None if free is None else free + retained_bytes()


def _system_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None

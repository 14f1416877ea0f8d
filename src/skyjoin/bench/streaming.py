"""Out-of-core join figures: the in-memory join beside the streamed paths.

``python -m skyjoin.bench.streaming [--case Unif2D1M-0.5] [--device cpu|gpu]``

In one process, on the same data, in interleaved rounds (each path keeps
its fastest run, after an untimed warm-up on a slice of the data):

* ``in-memory``: ``self_join`` to a host table;
* ``chunks``: ``self_join_chunks``, every chunk taken and dropped;
* ``npz``: ``self_join`` then ``write_neighbor_table(x.npz)`` (what
  ``skyjoin join --out x.npz`` does);
* ``parquet`` / ``npy`` / ``csv``: ``self_join_chunks`` streamed through
  ``open_pair_writer`` (what ``skyjoin join --out x.parquet`` does), one
  line per Parquet codec asked for ("default": the writer's own).

Each line gives seconds, pairs per second, the ratio to the in-memory join,
the file's size and the peak resident memory above the process's before
the run (Linux: ``VmHWM`` reset through ``/proc/self/clear_refs``).  Beside
them, the write bandwidth of the output folder, measured by a plain
sequential write of ``--disk-mib`` MiB in 64 MiB blocks, with and without
``fsync`` (the first is the disk, the second mostly the page cache, which
is where the files above go until the system writes them back), and the
folder's file system.  Files are removed after each run.  Nothing here
asserts a timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import tempfile
import time
from typing import Callable

import numpy as np

import skyjoin as sj

from ..datasets import NAMED_CASES, named_case
from ..io import open_pair_writer, write_neighbor_table
from ..simjoin.api import DEFAULT_CHUNK_PAIRS

__all__ = ["disk_bandwidth", "peak_rss_reset", "peak_rss_bytes", "paths", "run", "main"]

_BLOCK = 64 << 20


def disk_bandwidth(folder: str, n_bytes: int, fsync: bool = True) -> float:
    """Bytes per second of one sequential write of ``n_bytes`` (64 MiB
    blocks of random bytes) to a new file in ``folder``, ``fsync`` included
    when asked; the file is removed."""
    block = np.random.default_rng(0).integers(0, 256, _BLOCK, dtype=np.uint8).tobytes()
    path = os.path.join(folder, ".skyjoin-disk-probe")
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = n_bytes
        while left > 0:
            left -= os.write(fd, block[:min(left, len(block))])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    os.remove(path)
    return n_bytes / dt


def file_system(folder: str) -> str:
    """The type and device of the file system that holds ``folder`` (Linux), or "?"."""
    best, kind = "", "?"
    real = os.path.realpath(folder)
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                dev, mnt, fs = line.split()[:3]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                    best, kind = mnt, f"{fs} on {dev} (mounted at {mnt})"
    except OSError:
        pass
    return kind


def peak_rss_reset() -> bool:
    """Reset the process's peak resident size (Linux ``clear_refs``); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    """Peak resident bytes since the last reset (``VmHWM``), 0 where unknown."""
    try:
        return _status_bytes("VmHWM")
    except OSError:
        return 0


def _rss_bytes() -> int:
    try:
        return _status_bytes("VmRSS")
    except OSError:
        return 0


def paths(X: np.ndarray, eps: float, device: str, folder: str, formats: list[str],
          codecs: list[str], chunk_pairs: int) -> dict[str, Callable[[], dict]]:
    """The paths to time, by name: each runs once and returns its figures
    (pairs, and the file's bytes for a write)."""
    n = X.shape[0]

    def in_memory():
        return {"pairs": sj.self_join(X, eps, device=device).n_pairs}

    def chunks():
        total = 0
        for c in sj.self_join_chunks(X, eps, device=device, max_pairs=chunk_pairs):
            total += len(c)
        return {"pairs": total}

    def npz():
        path = os.path.join(folder, "table.npz")
        nt = sj.self_join(X, eps, device=device)
        write_neighbor_table(path, nt)
        del nt
        return {"pairs": None, "bytes": _size_and_remove(path)}

    def stream(ext, **options):
        def run_one():
            path = os.path.join(folder, f"pairs{ext}")
            s = sj.self_join_chunks(X, eps, device=device, max_pairs=chunk_pairs)
            with open_pair_writer(path, shape=(n, n), sorted=True, **options) as w:
                s.count()
                w.write_chunks(s)
            return {"pairs": w.n_pairs, "bytes": _size_and_remove(path)}
        return run_one

    out: dict[str, Callable[[], dict]] = {"in-memory": in_memory, "chunks": chunks}
    for fmt in formats:
        if fmt == "npz":
            out["npz"] = npz
        elif fmt == "parquet":
            for codec in codecs:
                out[f"parquet {codec}"] = stream(
                    ".parquet", compression=None if codec == "default" else codec)
        else:
            out[fmt] = stream("." + fmt)
    return out


def _size_and_remove(path: str) -> int:
    size = os.path.getsize(path)
    os.remove(path)
    return size


def run(X: np.ndarray, eps: float, *, device: str = "cpu", folder: str | None = None,
        formats: tuple[str, ...] = ("npz", "parquet", "npy"),
        codecs: tuple[str, ...] = ("default",),
        repeat: int = 3, chunk_pairs: int = DEFAULT_CHUNK_PAIRS, disk_mib: int = 1024,
        warmup_points: int = 50_000) -> dict:
    """Time every path of :func:`paths` on (X, eps), ``repeat`` interleaved
    rounds after a warm-up on the first ``warmup_points`` points; the
    figures as a dict (see the module notes)."""
    work = tempfile.mkdtemp(prefix=".skyjoin-bench-", dir=folder or os.getcwd())
    try:
        todo = paths(X, eps, device, work, list(formats), list(codecs), chunk_pairs)
        warm = paths(X[:warmup_points], eps, device, work, list(formats), list(codecs),
                     chunk_pairs)
        for fn in warm.values():
            fn()
        best: dict[str, dict] = {}
        for _ in range(repeat):
            for name, fn in todo.items():
                gc.collect()
                base = _rss_bytes()
                reset = peak_rss_reset()
                t0 = time.perf_counter()
                figures = fn()
                dt = time.perf_counter() - t0
                peak = peak_rss_bytes() - base if reset else None
                row = best.setdefault(name, {"seconds": dt, "peak_rss_bytes": peak, **figures})
                if dt < row["seconds"]:
                    row.update(figures, seconds=dt)
                if peak is not None and (row["peak_rss_bytes"] is None
                                         or peak > row["peak_rss_bytes"]):
                    row["peak_rss_bytes"] = peak
        pairs = best["in-memory"]["pairs"]
        t_mem = best["in-memory"]["seconds"]
        for name, row in best.items():
            if row.get("pairs") is None:
                row["pairs"] = pairs
            row["pairs_per_s"] = pairs / row["seconds"]
            row["vs_in_memory"] = row["seconds"] / t_mem
        disk_bytes = disk_mib << 20
        return {
            "points": int(X.shape[0]), "dims": int(X.shape[1]), "eps": eps, "device": device,
            "pairs": int(pairs), "chunk_pairs": chunk_pairs, "repeat": repeat,
            "folder": os.path.dirname(work), "file_system": file_system(work),
            "disk_write_fsync_bytes_per_s": disk_bandwidth(work, disk_bytes, fsync=True),
            "disk_write_cached_bytes_per_s": disk_bandwidth(work, disk_bytes, fsync=False),
            "cpu_count": os.cpu_count(), "paths": best,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def format_report(rep: dict) -> str:
    """The figures of :func:`run` as a text table."""
    lines = [f"{rep['points']:,} points, {rep['dims']}-D, eps {rep['eps']:g}, "
             f"{rep['pairs']:,} pairs, device {rep['device']}, {rep['cpu_count']} CPUs, "
             f"chunks of {rep['chunk_pairs']:,} pairs, best of {rep['repeat']}",
             f"output folder {rep['folder']}: {rep['file_system']}",
             f"sequential write: {rep['disk_write_fsync_bytes_per_s'] / 1e6:,.0f} MB/s with "
             f"fsync, {rep['disk_write_cached_bytes_per_s'] / 1e6:,.0f} MB/s without", "",
             f"{'path':16s} {'seconds':>8s} {'Mpairs/s':>9s} {'x in-mem':>8s} "
             f"{'file MB':>8s} {'peak RSS MB':>11s}"]
    for name, row in rep["paths"].items():
        size = f"{row['bytes'] / 1e6:8.0f}" if "bytes" in row else f"{'':8s}"
        peak = row["peak_rss_bytes"]
        peak_s = f"{peak / 2**20:11.0f}" if peak is not None else f"{'?':>11s}"
        lines.append(f"{name:16s} {row['seconds']:8.3f} {row['pairs_per_s'] / 1e6:9.1f} "
                     f"{row['vs_in_memory']:8.2f} {size} {peak_s}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    """The command line: ``python -m skyjoin.bench.streaming --help``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", default="Unif2D1M-0.5",
                    choices=sorted(k for k, c in NAMED_CASES.items() if c.metric == "euclidean"),
                    help="named data set and eps (skyjoin.datasets.named_case; the Euclidean "
                         "ones: this bench streams the Euclidean join)")
    ap.add_argument("--n", type=int, default=None, help="take the first N points of the case")
    ap.add_argument("--eps", type=float, default=None, help="instead of the case's eps")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--dir", default=None, help="folder for the files (default: here)")
    ap.add_argument("--formats", default="npz,parquet,npy",
                    help="comma-separated, of npz, parquet, npy, csv")
    ap.add_argument("--codecs", default="default",
                    help="Parquet codecs, comma-separated: default (the writer's: lz4 row "
                         "ids, raw column ids), or one for both columns (lz4, snappy, zstd, "
                         "none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chunk-pairs", type=int, default=DEFAULT_CHUNK_PAIRS)
    ap.add_argument("--disk-mib", type=int, default=1024, help="MiB of the bandwidth probe")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    X, eps = named_case(args.case)
    if args.n is not None:
        X = np.ascontiguousarray(X[:args.n])
    eps = args.eps if args.eps is not None else eps
    rep = run(X, eps, device=args.device, folder=args.dir,
              formats=tuple(f for f in args.formats.split(",") if f),
              codecs=tuple(c for c in args.codecs.split(",") if c), repeat=args.repeat,
              chunk_pairs=args.chunk_pairs, disk_mib=args.disk_mib)
    rep["case"] = args.case
    print(format_report(rep))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    return rep


if __name__ == "__main__":
    main()

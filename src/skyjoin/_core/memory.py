"""Large host arrays that are fast to touch the first time.

A result array of hundreds of MB (a neighbour table's column indices) is
written once, right after it is allocated.  With 4 KB pages every page's
first write is a fault; backed by transparent huge pages (2 MB) there are
512 times fewer.  Linux gives huge pages to an anonymous mapping that asks
for them (``MADV_HUGEPAGE``) even where the system setting is "madvise"; on
other systems this is an ordinary allocation.
"""

from __future__ import annotations

import errno
import mmap
import os

import numpy as np

__all__ = ["alloc_host", "available_host_bytes"]

#: below this size a plain allocation (huge pages do not pay for themselves)
HUGE_MIN_BYTES = 64 << 20


def alloc_host(n: int, dtype=np.int32) -> np.ndarray:
    """An uninitialised 1-D host array of n items, on huge pages when large.

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
        if nbytes < HUGE_MIN_BYTES:
            return np.empty(n, dtype=dtype)
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (MemoryError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno != errno.ENOMEM:
            raise
        raise MemoryError(
            f"cannot allocate {nbytes:,} bytes ({n:,} items of {dtype}) in host memory; "
            "for a join result, stream it with skyjoin.self_join_chunks (or the "
            "command line's --out pairs.parquet) or ask output='counts'") from exc
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    return np.frombuffer(buf, dtype=dtype, count=n)


def available_host_bytes() -> int | None:
    """Bytes of host memory the system can still give without swapping, or None.

    Linux: ``MemAvailable`` of ``/proc/meminfo`` (free memory plus the page
    cache and other memory the kernel can reclaim).  Elsewhere the free
    physical pages (``os.sysconf("SC_AVPHYS_PAGES")``), which ignore the
    reclaimable cache; None where neither is known.  Cost: one read of a
    small file.

    Examples
    --------
    >>> b = available_host_bytes()
    >>> b is None or b >= 0
    True
    """
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

"""Inputs of the distributed operators as row blocks held by the Dask workers.

Every operator starts from the same thing: a list of futures, one per block
of consecutive rows, plus the global row id of each block's first row (rows
are numbered in block order, so global ids are the caller's row numbers).

* a NumPy array is cut into blocks and scattered to the workers; each block
  is replicated on ``replicas`` workers (default 2 when there are two or
  more), because scattered data has no lineage: if the only worker holding
  a block died, the job could not recompute it.  Dask's Active Memory
  Manager drops the copies that no task waits for any more (its
  ReduceReplicas policy, every 2 s by default), so the operators also run
  again from the caller's array when a block was lost anyway
  (``reruns_on_lost_input``);
* a Dask array or Dask DataFrame keeps its own chunks / partitions, which
  Dask can recompute from their lineage;
* a path or glob of ``.parquet`` / ``.csv`` / ``.txt`` / ``.npy`` files is
  read by the workers themselves (one block per file, in sorted path order),
  so the files must be visible to every worker (a shared file system).

Each block is checked on its worker (2-D, real numbers, no NaN or inf) and
summarised there (length, bounds, a random sample), so the driver only
handles small objects; a NumPy array, checked and summarised by the driver
that holds it anyway, is the exception.
"""

from __future__ import annotations

import functools
import glob
import inspect
import logging
import os
import uuid
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar, Union

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import dask.array
    import dask.dataframe

from .._core.validate import check_points
from ..index.grid_kernels import column_bounds, parallel_column_bounds
from ..io import read_points

#: what the distributed operators take as points: an in-memory array, a Dask
#: array or data frame, or a path (file, glob or folder) the workers read
Points = Union[ArrayLike, "dask.array.Array", "dask.dataframe.DataFrame", str, "os.PathLike[str]"]

_Op = TypeVar("_Op", bound=Callable[..., Any])

__all__ = ["Blocks", "get_client", "as_blocks", "stacked", "reruns_on_lost_input",
           "is_dask_array", "is_dask_frame", "sample_rows", "in_working_layout",
           "DEFAULT_BLOCK_ROWS"]

log = logging.getLogger("skyjoin")

DEFAULT_BLOCK_ROWS = 1 << 20
SAMPLE_PER_BLOCK = 4096


def get_client(client=None):
    """The given client, else the current Dask client; a clear error if there is none."""
    if client is not None:
        return client
    try:
        from distributed import default_client
    except ImportError as exc:  # pragma: no cover - dask is an optional dependency
        raise ImportError("skyjoin.distributed needs dask[distributed]: "
                          "pip install 'skyjoin[distributed]'") from exc
    try:
        return default_client()
    except ValueError as exc:
        raise ValueError("no Dask client: pass client= or create one first, e.g. "
                         "distributed.Client(distributed.LocalCluster())") from exc


def new_token(what: str) -> str:
    """A unique key prefix for the tasks of one call (shows on the dashboard)."""
    return f"skyjoin-{what}-{uuid.uuid4().hex[:10]}"


@dataclass
class Blocks:
    """Row blocks held by the workers.

    Attributes
    ----------
    futures : list of distributed.Future
        Each resolves to a C-contiguous (m_b, d) array in the working dtype.
    offsets : ndarray of int64, shape (n_blocks + 1,)
        Block b holds global rows ``offsets[b]:offsets[b + 1]``.
    d : int
    lo, hi : ndarray of float64, shape (d,), or None
        Bounds of all points (zeros when empty); None when not summarised.
    sample : ndarray, shape (m, d), or None
        A uniform sample of the points (for the partition plan).
    from_array : bool
        The blocks are consecutive slices of one in-memory array of the
        caller (NumPy input).
    array : ndarray or None
        That array, checked, when it was not scattered (``scatter=False``:
        for workers that share this process, see :mod:`.shared`); futures
        is then empty.
    slices : ndarray of int64 or None
        Row bounds of the array's slices held by the GPU worker threads of
        this process (slice t on the t-th worker in sorted order), when
        :mod:`.gpu_slices` loaded them; None otherwise.
    """

    futures: list
    offsets: np.ndarray
    d: int
    lo: np.ndarray
    hi: np.ndarray
    sample: np.ndarray
    from_array: bool = False
    array: np.ndarray | None = None
    slices: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.offsets[-1])


def stacked(blocks, d: int, dtype) -> np.ndarray:
    """The rows of consecutive blocks as one (n, d) array, copying only if needed.

    Blocks scattered to workers that share the client's process (thread
    workers) are still the consecutive slices of the caller's array: they
    are then viewed as one array again, without a copy.  Otherwise they are
    concatenated.
    """
    blocks = [b for b in blocks if len(b)]
    if not blocks:
        return np.zeros((0, d), dtype=dtype)
    if len(blocks) == 1:
        return blocks[0]
    first = blocks[0]
    itemsize = np.dtype(dtype).itemsize
    adjacent = all(b.dtype == dtype and b.ndim == 2 and b.shape[1] == d and b.flags.c_contiguous
                   and b.base is not None and b.base is first.base for b in blocks)
    if adjacent:
        addr = first.__array_interface__["data"][0]
        for b in blocks:
            adjacent = adjacent and b.__array_interface__["data"][0] == addr
            addr += b.shape[0] * d * itemsize
    if adjacent:
        n = sum(b.shape[0] for b in blocks)
        return np.lib.stride_tricks.as_strided(first, shape=(n, d), strides=(d * itemsize, itemsize),
                                               writeable=False)
    return np.concatenate(blocks)


def _checked(block, dtype, name):
    """Validate a block on its worker (shape, real dtype, finite values)."""
    if hasattr(block, "to_numpy") and hasattr(block, "columns"):
        block = block.to_numpy()
    return check_points(block, name=name, dtype=dtype)


def _read_file(path, columns, dtype):
    """Read one point file on a worker."""
    return read_points(path, columns=columns, dtype=dtype)


def _frame_block(frame, columns, dtype, name):
    """A DataFrame partition's chosen columns as a checked array."""
    if columns is not None:
        frame = frame[list(columns)]
    return check_points(frame.to_numpy(), name=name, dtype=dtype)


def _summary(block, seed):
    """Length, bounds and a uniform sample of one block (runs on a worker)."""
    n, d = block.shape
    if n == 0:
        return n, d, None, None, block[:0]
    lo, hi = column_bounds(block, d)
    return n, d, lo, hi, block[sample_rows(n, SAMPLE_PER_BLOCK, seed)]


def sample_rows(n: int, size: int, seed: int) -> np.ndarray:
    """Ascending positions of a uniform sample of ``min(n, size)`` of n rows,
    without repeats (all rows when n <= size).  O(size log size)."""
    m = min(n, size)
    if m >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False))


def in_working_layout(X, dtype) -> bool:
    """Whether X is a 2-D NumPy array with columns, of ``dtype``, C-contiguous:
    usable in place, with only its values left to check."""
    return isinstance(X, np.ndarray) and X.ndim == 2 and X.shape[1] > 0 \
        and X.dtype == dtype and X.flags.c_contiguous


def _combine_samples(summaries, target: int, seed: int) -> np.ndarray:
    """A sample of about ``target`` rows in which each block weighs by its length."""
    total = sum(s[0] for s in summaries)
    rng = np.random.default_rng(seed)
    parts = []
    for n, _, _, _, smp in summaries:
        if n == 0:
            continue
        k = min(len(smp), max(1, int(round(target * n / total))))
        parts.append(smp[np.sort(rng.choice(len(smp), size=k, replace=False))])
    return np.concatenate(parts) if parts else np.zeros((0, summaries[0][1]))


def reruns_on_lost_input(op: _Op) -> _Op:
    """Decorator of an operator ``op(X, ..., retries=...)`` (or a method with
    ``self.retries``): run it again, up to ``retries`` times, when the blocks
    it scattered from the caller's in-memory array were lost.

    Dask recomputes what tasks computed, never what was scattered.  When a
    worker dies with the last copy of a block (the Active Memory Manager may
    have dropped the others, see the module docstring), every result that
    needs the block is cancelled ("already forgotten") and the operator
    raises ``CancelledError``.  The caller still holds the array, so the
    operator starts again and scatters it again.  Files and Dask collections
    are recomputed by Dask itself: their errors pass through.
    """
    sig = inspect.signature(op)

    @functools.wraps(op)
    def run(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        X = a["X"]
        retries = a["retries"] if "retries" in a else a["self"].retries
        try:
            limit = max(0, int(retries))
        except (TypeError, ValueError):     # None, or a bad value that op reports
            limit = 0
        in_memory = not isinstance(X, (str, os.PathLike)) and not is_dask_array(X) \
            and not is_dask_frame(X)
        attempt = 0
        while True:
            try:
                return op(*args, **kwargs)
            except CancelledError as exc:
                if not in_memory or attempt >= limit:
                    raise
                attempt += 1
                log.warning("%s: a worker died with scattered input (%s); running again "
                            "(%d of %d)", op.__qualname__, exc, attempt, limit)
    return run


def is_dask_array(X) -> bool:
    """Whether X is a Dask array (checked without importing Dask)."""
    return type(X).__module__.startswith("dask.array") or (
        hasattr(X, "dask") and hasattr(X, "chunks") and hasattr(X, "to_delayed"))


def is_dask_frame(X) -> bool:
    """Whether X is a Dask data frame (checked without importing Dask)."""
    return type(X).__module__.startswith("dask.dataframe") or (
        hasattr(X, "dask") and hasattr(X, "columns") and hasattr(X, "to_delayed"))


def _file_list(path) -> list[str]:
    """The files named by a path, a glob pattern or a directory (sorted)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        files = sorted(os.path.join(p, f) for f in os.listdir(p)
                       if os.path.splitext(f)[1].lower() in (".parquet", ".csv", ".txt", ".tsv",
                                                             ".dat", ".npy"))
    else:
        files = sorted(glob.glob(p))
    if not files:
        raise FileNotFoundError(f"no point files match {p!r}")
    return files


def as_blocks(client, X, *, dtype=np.float64, columns=None, block_rows: int | None = None,
              replicas: int | None = None, name: str = "X", seed: int = 0,
              sample_target: int = 20000, retries: int = 2, summarise: bool = True,
              scatter: bool = True, check: bool = True) -> Blocks:
    """Turn any supported input into row blocks on the workers, checked and summarised.

    Parameters
    ----------
    client : distributed.Client
    X : ndarray, dask.array.Array, dask.dataframe.DataFrame, str or os.PathLike
        The points (see the module docstring).  Anything else that
        ``numpy.asarray`` accepts is treated as a NumPy array.
    dtype : dtype
        Working dtype of the blocks.
    columns : list, optional
        Columns to use, for files and data frames.
    block_rows : int, optional
        Rows per block for NumPy input (default: about two blocks per worker
        thread, at most 2**20 rows).
    replicas : int, optional
        Copies of each scattered NumPy block (default min(2, n_workers)), as
        long as Dask's memory manager keeps them (see the module docstring).
    name : str
        Argument name for error messages.
    seed : int
        Seed of the sample.
    sample_target : int
        Size of the combined sample.
    retries : int
        Dask retries of each task.
    summarise : bool
        Summarise the blocks (bounds and sample, for a partition plan).  Only
        NumPy input can skip it: the result then has ``lo``, ``hi`` and
        ``sample`` set to None (a single partition needs none of them).
    scatter : bool
        Scatter NumPy input to the workers.  Without, the checked array is
        kept in ``Blocks.array`` (workers in this process read it there).
    check : bool
        Look for NaN and inf in a NumPy array that already has the working
        dtype and layout.  Only a caller whose workers run an operator that
        checks its input anyway may skip it (the one-partition path).

    Returns
    -------
    Blocks

    Raises
    ------
    ValueError
        Bad shape, NaN or inf values, blocks of different widths.
    FileNotFoundError
        A path that matches no file.
    """
    dtype = np.dtype(dtype)
    if isinstance(X, (str, os.PathLike)):
        files = _file_list(X)
        futures = [client.submit(_read_file, f, columns, dtype, retries=retries,
                                 key=f"{new_token('read')}-{k}") for k, f in enumerate(files)]
    elif is_dask_frame(X):
        parts = X.to_delayed()
        futs = client.compute(parts)
        futures = [client.submit(_frame_block, f, columns, dtype, name, retries=retries)
                   for f in futs]
    elif is_dask_array(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D with shape (n_points, n_dims), got "
                             f"{X.ndim}-D array of shape {X.shape}")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        parts = X.to_delayed()[:, 0].tolist()
        futs = client.compute(parts)
        futures = [client.submit(_checked, f, dtype, name, retries=retries) for f in futs]
    else:
        if columns is not None:
            raise TypeError("columns= selects columns of files and data frames; "
                            "slice the array instead")
        plain = in_working_layout(X, dtype)
        # an array to summarise is tested for NaN and inf in the bounds' parallel pass
        deferred = plain and check and summarise and X.shape[0] > 0
        arr = X if plain and (deferred or not check) else check_points(X, name=name,
                                                                        dtype=dtype)
        n = arr.shape[0]
        if deferred:
            lo, hi, finite = parallel_column_bounds(arr, arr.shape[1], check_finite=True)
            if not finite:
                check_points(arr, name=name, dtype=dtype)   # raises, naming the first bad row
                raise AssertionError("parallel_column_bounds saw a value check_points accepts")
        n_workers = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
        if block_rows is None:
            threads = max(1, sum(client.nthreads().values()))
            block_rows = int(min(DEFAULT_BLOCK_ROWS, max(1024, -(-n // (2 * threads)))))
        if isinstance(block_rows, bool) or int(block_rows) < 1:
            raise ValueError(f"block_rows must be an integer >= 1, got {block_rows!r}")
        bounds = list(range(0, n, int(block_rows))) + [n]
        if n == 0:
            bounds = [0, 0]
        futures = []
        if scatter:
            pieces = [arr[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            futures = client.scatter(pieces, hash=False)
            copies = min(2, n_workers) if replicas is None else int(replicas)
            if copies > 1:
                client.replicate(futures, n=copies)
        kept = None if scatter else arr
        offsets = np.asarray(bounds, dtype=np.int64)
        d = arr.shape[1]
        if not summarise:
            # lengths and width are known here; bounds and sample are not needed
            return Blocks(futures=list(futures), offsets=offsets, d=d, lo=None, hi=None,
                          sample=None, from_array=True, array=kept)
        # the array is here: summarised here, in one pass, rather than by a task per block
        if n == 0:
            return Blocks(futures=list(futures), offsets=offsets, d=d, lo=np.zeros(d),
                          hi=np.zeros(d), sample=np.zeros((0, d)), from_array=True, array=kept)
        if not deferred:
            lo, hi = parallel_column_bounds(arr, d)
        return Blocks(futures=list(futures), offsets=offsets, d=d, lo=lo, hi=hi,
                      sample=arr[sample_rows(n, sample_target, seed)], from_array=True,
                      array=kept)
    summaries = client.gather([client.submit(_summary, f, seed + k, retries=retries)
                               for k, f in enumerate(futures)])
    widths = {s[1] for s in summaries}
    if len(widths) != 1:
        raise ValueError(f"the blocks of {name} have different numbers of columns: "
                         f"{sorted(widths)}")
    d = widths.pop()
    offsets = np.zeros(len(summaries) + 1, dtype=np.int64)
    np.cumsum([s[0] for s in summaries], out=offsets[1:])
    full = [s for s in summaries if s[0]]
    if full:
        lo = np.min([s[2] for s in full], axis=0)
        hi = np.max([s[3] for s in full], axis=0)
    else:
        lo = hi = np.zeros(d)
    sample = _combine_samples(summaries, sample_target, seed) if full else np.zeros((0, d))
    return Blocks(futures=list(futures), offsets=offsets, d=d, lo=lo, hi=hi, sample=sample)

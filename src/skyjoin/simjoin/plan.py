"""The routing decisions of the epsilon join: one frozen ``JoinPlan`` per call.

Data flows one way: a public function (``api``, DBSCAN, the sweep, the
distributed join) validates the input, resolves the device and builds the
call's request (``request``); ``skyjoin.simjoin.engine`` hands it to the engine
of its device (``cpu.engine`` or ``gpu.pipeline``), which completes it by
the rules of this module once its grid is built (``plan_cpu``,
``plan_gpu``), reports it (``skyjoin._core.plans.report``) and executes it
without re-deciding anything.  Each rule is written once:

* ``memory_route``: where the result goes ("host table", "device table",
  "counts", "device counts", "chunks");
* ``id_width``: the column ids' dtype (int32 below 2**31 columns);

* ``cpu_pattern``: the CPU's cell pattern for ``pattern="auto"``;
* ``choose_config``: the GPU's kernel, pattern, threads per query and
  schedule;
* ``batch_capacity`` and ``plan_row_batches``: the GPU's result batches
  (count-then-fill: a first kernel counts every row exactly, the exclusive
  scan gives ``indptr``, batches are runs of consecutive rows whose pairs
  fit one result buffer, so no buffer can overflow);
* whether a result fits in the memory it goes to is ``result_size``'s
  rule (checked once the count is known, before the result is allocated).

The measurements behind the rules are in the join records of
``docs/decisions/``: ``join-cpu-pattern.md``, ``join-tiled-path.md``,
``join-gpu-config.md`` and ``join-memory.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .projection import Projection
from .result_size import check_memory_limit

__all__ = ["JoinPlan", "GpuConfig", "cpu_pattern", "plan_cpu", "choose_config", "request",
           "memory_route", "id_width", "MEMORY_ROUTES", "ENGINES",
           "plan_gpu", "plan_row_batches", "batch_capacity", "DEFAULT_BATCH_PAIRS",
           "TILE_MIN_POINTS", "PATTERNS", "KERNELS", "SCHEDULES", "THREADS_PER_POINT"]

PATTERNS = ("full", "unicomp", "lid_unicomp")
KERNELS = ("global", "shared", "bruteforce")
SCHEDULES = ("grid", "sortbywl", "workqueue")
THREADS_PER_POINT = (1, 2, 4, 8, 16, 32)
#: Where a result goes: a CSR table in host memory, one kept on the GPU,
#: the neighbour counts alone (in host memory, or kept on the GPU), or
#: bounded chunks (``self_join_chunks``).
MEMORY_ROUTES = ("host table", "device table", "counts", "device counts", "chunks")
#: The engine of each device.
ENGINES = {"cpu": "numba", "gpu": "cuda"}


#: CPU: cells with at least this many points take the tiled path of the
#: full pattern (the gather of the candidates is shared by enough points to
#: pay off); smaller cells go point by point with pruning, in any dimension.
TILE_MIN_POINTS = 8

#: GPU: default result buffer per batch, 2^27 pairs (512 MiB of int32 ids).
DEFAULT_BATCH_PAIRS = 1 << 27


@dataclass(frozen=True)
class JoinPlan:
    """Every routing decision of one join call.

    Attributes
    ----------
    device : {"cpu", "gpu"}
    self_join : bool
        X join X (True) or R join S.
    output : {"table", "counts"}
    pattern : {"auto", "full", "unicomp", "lid_unicomp"}
        The cell pattern ("auto" only before the rule has run).
    sort, include_self : bool
    precision : {"float64", "float32"}
    index_dims : int or None
        Requested indexed dimensions (None: the grid's default).
    kernel, threads_per_point, schedule
        GPU only: the kernel, threads per query and query order.
    batch_pairs : int or None
        GPU only: pairs per result batch (None: ``batch_capacity``'s default;
        the engine records the size it chose and reports the plan again).
    tile_min_points : int
        CPU only: the smallest cell of the tiled path.
    memory_limit : int or "auto"
        Bytes the result may take (``result_size_guard``).
    return_distance : bool
        Whether the table carries the distance of every pair.
    memory_route : {"host table", "device table", "counts", "device counts", "chunks"}
        Where the result goes (``memory_route``).
    engine : {"numba", "cuda"}
        The engine that runs the plan (``ENGINES``).
    id_width : {"int32", "int64"} or None
        dtype of the column ids (``id_width``; None until the engine knows
        the number of columns).
    device_memory_limit : int or None
        GPU only: bytes of device memory the result buffers may use.
    algorithm : {"grid", "brute", "brute-fp16", "projected"}
        The grid of non-empty cells, the brute-force screen of every
        pair (its product in float64, or on the FP16 lattice:
        ``skyjoin.simjoin.lattice``), or every pair screened on principal components
        (``algorithm.choose_algorithm``); the pattern, index and kernel choices
        apply to the grid only.
    projection : Projection or None
        "projected": the screen's axes, their norm bound and precision
        (``skyjoin.simjoin.projection``).
    metric : str
        The join's metric: "euclidean", or one that a Euclidean filter serves
        before an exact refine (``skyjoin.simjoin.metric_join``).
    reason : str
        Why the "auto" choices came out as they did.
    """

    device: str
    self_join: bool
    output: str = "table"
    pattern: str = "auto"
    sort: bool = True
    include_self: bool = False
    precision: str = "float64"
    index_dims: int | None = None
    kernel: str | None = None
    threads_per_point: int | None = None
    schedule: str | None = None
    batch_pairs: int | None = None
    tile_min_points: int = TILE_MIN_POINTS
    memory_limit: int | str = "auto"
    return_distance: bool = False
    memory_route: str = "host table"
    engine: str = "numba"
    id_width: str | None = None
    device_memory_limit: int | None = None
    algorithm: str = "grid"
    metric: str = "euclidean"
    reason: str = ""
    projection: Projection | None = None

    def describe(self) -> str:
        """One line for ``-v`` logging."""
        what = "self-join" if self.self_join else "join"
        if self.metric != "euclidean":
            what += f" ({self.metric}: Euclidean filter, exact refine on the host)"
        if self.algorithm in ("brute", "brute-fp16", "projected"):
            screen = self.projection.describe() if self.projection else \
                "FP16 lattice product screen" if self.algorithm == "brute-fp16" \
                else "matrix-product screen"
            return (f"{what} on {self.device} by brute force ({screen}, exact test):"
                    f" route={self.memory_route} precision={self.precision} sort={self.sort}"
                    + (" include_self" if self.include_self else ""))
        parts = [f"{what} on {self.device} ({self.engine})", f"route={self.memory_route}",
                 f"pattern={self.pattern}", f"precision={self.precision}",
                 f"ids={self.id_width or 'pending'}", f"sort={self.sort}"]
        if self.include_self:
            parts.append("include_self")
        if self.index_dims is not None:
            parts.append(f"index_dims={self.index_dims}")
        if self.return_distance:
            parts.append("distances")
        if self.memory_limit != "auto":
            parts.append(f"memory_limit={self.memory_limit}")
        if self.device == "gpu":
            parts.append(f"kernel={self.kernel} k={self.threads_per_point} "
                         f"schedule={self.schedule}")
            if self.batch_pairs is not None:
                parts.append(f"batch_pairs={self.batch_pairs}")
            if self.device_memory_limit is not None:
                parts.append(f"device_memory_limit={self.device_memory_limit}")
        else:
            parts.append(f"tile_min_points={self.tile_min_points}")
        if self.reason:
            parts.append(f"({self.reason})")
        return ", ".join(parts)


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------

def cpu_pattern(cell_start: np.ndarray, n_points: int) -> str:
    """The CPU's cell pattern for ``pattern="auto"``: LID-UNICOMP when most
    points lie in sparse cells (under ``TILE_MIN_POINTS`` points: the
    point-by-point path, one pass over half of the cells, then a mirror of
    a small result), the full pattern when most lie in dense cells (tiled
    path, no mirror, rows sorted by the merge).

    Cost: O(cells).
    """
    sizes = np.diff(cell_start)
    sparse = int(sizes[sizes < TILE_MIN_POINTS].sum())
    return "lid_unicomp" if 2 * sparse >= n_points else "full"


def auto_pattern(g) -> str:
    """``cpu_pattern`` of grid ``g``."""
    return cpu_pattern(g.cell_start, g.n_points)


def plan_cpu(request: JoinPlan, g) -> JoinPlan:
    """The CPU plan of ``request`` on grid ``g`` (the grid of the data points,
    the table's columns; None when there are none): the pattern and the id
    width resolved.

    R join S uses the full pattern (it has no symmetric half), and so do
    chunks (each chunk is filled from the cells that hold its rows, which
    only the full pattern's fill can restrict itself to).  A self-join
    takes the requested pattern, or ``cpu_pattern``'s for "auto"; its counts
    are found by the full pattern's counting pass or by LID-UNICOMP's
    forward half (``cpu.lid_unicomp.lid_unicomp_counts``: each pair's
    distance computed once), so counts asked with UNICOMP, which has no
    such counter, take the full pattern.  All patterns give the same pairs.
    Cost: O(cells).
    """
    request = replace(request, id_width=id_width(0 if g is None else g.n_points, "cpu"))
    if not request.self_join:
        return replace(request, pattern="full", reason="R join S: full")
    if request.memory_route == "chunks":
        return replace(request, pattern="full",
                       reason=f"chunks: full (asked {request.pattern}; rows filled by cells)")
    if request.output == "counts" and request.pattern == "unicomp":
        return replace(request, pattern="full", reason="counts: full (no UNICOMP counter)")
    if request.pattern != "auto":
        return request
    if g is None:
        return replace(request, pattern="full", reason="no points: full")
    pattern = auto_pattern(g)
    return replace(request, pattern=pattern,
                   reason=f"auto: {pattern} ({g.n_points} points in {g.n_cells} cells)")


def memory_route(output: str, *, on_device: bool = False, chunks: bool = False) -> str:
    """Where a join's result goes (``MEMORY_ROUTES``): "counts" for
    ``output="counts"`` ("device counts" kept on the GPU, ``on_device``),
    "chunks" for ``self_join_chunks``, "device table" for a table kept on
    the GPU (``on_device``), else "host table".  O(1)."""
    if output == "counts":
        return "device counts" if on_device else "counts"
    if chunks:
        return "chunks"
    return "device table" if on_device else "host table"


def id_width(n_cols: int, device: str) -> str:
    """dtype name of a table's column ids: int32 below 2**31 columns, else
    int64 (CPU; the GPU engine writes int32 ids: its columns are below
    2**31).  O(1)."""
    return "int64" if device == "cpu" and n_cols >= 2**31 else "int32"


def request(device: str, *, self_join: bool, output: str = "table", sort: bool = True,
            include_self: bool = False, precision: str = "float64",
            index_dims: int | None = None, pattern="auto", memory_limit="auto",
            return_distance: bool = False, on_device: bool = False, chunks: bool = False,
            kernel="auto", threads_per_point="auto", schedule="auto", batch_pairs=None,
            device_memory_limit=None, algorithm="grid", metric="euclidean") -> JoinPlan:
    """The request of one join call on the resolved ``device``, built at its
    public boundary: the caller's choices, "auto" where the engine's rule
    decides once the grid is built (``plan_cpu``, ``plan_gpu``), and the
    memory route (``memory_route``).  ``memory_limit`` is checked here
    (``check_memory_limit``); the GPU's option values by ``choose_config``.
    The GPU-only options (``kernel`` ... ``device_memory_limit``) are
    dropped on the CPU; ``algorithm`` ("grid", "brute", or the Projection of
    "projected") comes resolved from the boundary
    (``algorithm.resolve_algorithm``).  Cost: O(1)."""
    projection = algorithm if isinstance(algorithm, Projection) else None
    if isinstance(pattern, str):
        pattern = pattern.replace("-", "_")
    gpu = device == "gpu"
    if gpu and device_memory_limit is not None:
        if isinstance(device_memory_limit, bool) or int(device_memory_limit) <= 0:
            raise ValueError(f"device_memory_limit must be > 0 bytes, got {device_memory_limit}")
        device_memory_limit = int(device_memory_limit)
    common = dict(self_join=bool(self_join), output=output, sort=bool(sort),
                  include_self=bool(include_self) and bool(self_join), precision=precision,
                  index_dims=index_dims, memory_limit=check_memory_limit(memory_limit),
                  return_distance=bool(return_distance),
                  memory_route=memory_route(output, on_device=bool(on_device) and gpu,
                                            chunks=chunks),
                  engine=ENGINES["gpu" if gpu else "cpu"],
                  algorithm=str(algorithm), projection=projection, metric=metric)
    if not gpu:
        return JoinPlan(device=device, pattern=pattern if self_join else "full", **common)
    return JoinPlan(device="gpu", pattern=pattern, kernel=kernel,
                    threads_per_point=threads_per_point, schedule=schedule,
                    batch_pairs=batch_pairs, device_memory_limit=device_memory_limit, **common)


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuConfig:
    """A resolved GPU kernel configuration (``choose_config``)."""

    kernel: str = "global"
    pattern: str = "full"
    kt: int = 1
    schedule: str = "grid"
    reason: str = ""


def choose_config(mean_work: float, work_cv: float, self_join: bool, *, index_dims: int = 2,
                  counts_only: bool = False, kernel="auto", pattern="auto",
                  threads_per_point="auto", schedule="auto") -> GpuConfig:
    """Resolve the GPU's "auto" options into a configuration (the default rule).

    * kernel: the global-memory kernel (GPUCALCGLOBAL, Gowanlock & Karsin
      2018 §IV-E); the shared-memory kernel (HYBRID-DBSCAN §4.2) ties in 2-D
      and loses in 6-D, where cells hold few points;
    * cell pattern: *full* for tables, because count-then-fill writes each
      row contiguously only with the full pattern (the UNICOMP patterns emit
      into two rows, need atomics and a row sort, and every batch must visit
      every query); for counts only of a self-join with three or more
      indexed dimensions, LID-UNICOMP (Gallet & Gowanlock 2019 §III-B: one
      distance serves two points); in 2-D the full pattern;
    * threads per query (Gallet & Gowanlock 2019 §III-A): k = 8 when the
      mean candidate count is at least 256 and the grid indexes at most two
      dimensions or a table is wanted (the fill writes every pair), else 1;
    * schedule: for counts only, WORKQUEUE (§III-D) when the per-query work
      varies a lot (coefficient of variation above 1), else the grid order,
      which keeps the queries of one cell in one warp; tables: grid order.

    Parameters
    ----------
    mean_work : float
        Mean number of candidate points per query.
    work_cv : float
        Coefficient of variation of the per-query candidate counts.
    self_join : bool
    index_dims : int
        Number of dimensions the grid indexes.
    counts_only : bool
        Whether only the neighbour counts are wanted.
    kernel, pattern, threads_per_point, schedule
        The caller's choices; "auto" entries are resolved.

    Returns
    -------
    GpuConfig

    Raises
    ------
    ValueError
        For an unknown option value or an incompatible combination.

    Notes
    -----
    Cost: O(1).  The measurements behind the rule are in
    ``docs/decisions/join-gpu-config.md``.

    Examples
    --------
    >>> choose_config(1800.0, 0.2, True).kt
    8
    >>> choose_config(300.0, 3.0, True, index_dims=6, counts_only=True).pattern
    'lid_unicomp'
    >>> c = choose_config(900.0, 3.0, True, index_dims=6)      # a table
    >>> (c.pattern, c.kt, c.schedule)
    ('full', 8, 'grid')
    """
    why = []
    if isinstance(pattern, str):
        pattern = pattern.replace("-", "_")
    if kernel == "auto":
        kernel_c = "global"
    elif kernel in KERNELS:
        kernel_c = kernel
    else:
        raise ValueError(f"kernel must be 'auto' or one of {KERNELS}, got {kernel!r}")
    if pattern == "auto":
        lid = counts_only and self_join and index_dims >= 3 and kernel_c == "global"
        pattern_c = "lid_unicomp" if lid else "full"
        why.append(f"pattern={pattern_c}")
    elif pattern in PATTERNS:
        pattern_c = pattern
    else:
        raise ValueError(f"pattern must be 'auto' or one of {PATTERNS}, got {pattern!r}")
    if pattern_c != "full" and not self_join:
        raise ValueError(f"pattern={pattern_c!r} needs a self-join (one distance gives two pairs)")
    if threads_per_point == "auto":
        kt = 8 if (mean_work >= 256 and (index_dims <= 2 or not counts_only)) else 1
        why.append(f"k={kt} (mean candidates {mean_work:.0f}, {index_dims} indexed dims)")
    else:
        if threads_per_point not in THREADS_PER_POINT:
            raise ValueError(f"threads_per_point must be 'auto' or one of {THREADS_PER_POINT}, "
                             f"got {threads_per_point!r}")
        kt = int(threads_per_point)
    if schedule == "auto":
        schedule_c = "workqueue" if (work_cv > 1.0 and counts_only) else "grid"
        why.append(f"schedule={schedule_c} (work cv {work_cv:.2f})")
    elif schedule in SCHEDULES:
        schedule_c = schedule
    else:
        raise ValueError(f"schedule must be 'auto' or one of {SCHEDULES}, got {schedule!r}")
    if kernel_c in ("shared", "bruteforce"):
        if kernel_c == "shared":
            if pattern not in ("auto", "full") or threads_per_point not in ("auto", 1) \
                    or schedule not in ("auto", "grid"):
                raise ValueError("kernel='shared' supports pattern='full', threads_per_point=1 "
                                 "and schedule='grid' only")
            kt, schedule_c = 1, "grid"
        if kernel_c == "bruteforce" and pattern not in ("auto", "full"):
            raise ValueError("kernel='bruteforce' compares every pair: pattern must be 'full'")
        pattern_c = "full"
    return GpuConfig(kernel=kernel_c, pattern=pattern_c, kt=kt, schedule=schedule_c,
                     reason="; ".join(why))


def plan_gpu(request: JoinPlan, mean_work: float, work_cv: float, index_dims: int) -> JoinPlan:
    """The GPU plan of ``request`` (``request("gpu", ...)``) once the engine has
    measured the work per query: its "auto" choices resolved by
    ``choose_config``, and the grid's indexed dimensions.  Cost: O(1)."""
    cfg = choose_config(mean_work, work_cv, request.self_join, index_dims=index_dims,
                        counts_only=request.output == "counts", kernel=request.kernel,
                        pattern=request.pattern, threads_per_point=request.threads_per_point,
                        schedule=request.schedule)
    return replace(request, pattern=cfg.pattern, kernel=cfg.kernel, threads_per_point=cfg.kt,
                   schedule=cfg.schedule, index_dims=index_dims, reason=cfg.reason,
                   id_width=id_width(0, "gpu"))


def plan_row_batches(indptr: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Split rows into runs of consecutive rows holding at most ``cap`` pairs each.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_rows + 1,)
        The CSR row pointer (exact counts, count-then-fill).
    cap : int
        Pairs per batch; must be at least the longest row.

    Returns
    -------
    list of (row_start, row_stop)
        Covering all rows in order; rows with no pairs are included.

    Raises
    ------
    ValueError
        If a single row holds more than ``cap`` pairs.
    """
    n = len(indptr) - 1
    if n <= 0:
        return []
    cap = int(cap)
    longest = int(np.max(np.diff(indptr))) if n else 0
    if longest > cap:
        raise ValueError(f"a row holds {longest} pairs, more than the batch capacity {cap}")
    out = []
    r0 = 0
    total = int(indptr[-1])
    if total <= cap:
        return [(0, n)]
    while r0 < n:
        limit = int(indptr[r0]) + cap
        r1 = int(np.searchsorted(indptr, limit, side="right")) - 1
        r1 = max(min(r1, n), r0 + 1)
        out.append((r0, r1))
        r0 = r1
    return out


def batch_capacity(total_pairs: int, longest_row: int, batch_pairs: int | None,
                   free_bytes: int, bytes_per_pair: int) -> int:
    """Pairs per batch buffer: asked for, else a default bounded by free device memory.

    The capacity is never below the longest row (a row is never split) and
    never above the total.  Raises MemoryError if even the longest row cannot
    be buffered within ``free_bytes``.
    """
    if batch_pairs is not None:
        if int(batch_pairs) < 1:
            raise ValueError(f"batch_pairs must be >= 1, got {batch_pairs}")
        cap = int(batch_pairs)
    else:
        cap = DEFAULT_BATCH_PAIRS
    by_memory = max(0, int(free_bytes)) // max(1, bytes_per_pair)
    cap = min(cap, by_memory)
    cap = min(cap, max(total_pairs, 1))
    if cap < longest_row:
        if longest_row * bytes_per_pair > free_bytes:
            raise MemoryError(
                f"one row has {longest_row} neighbours, which needs "
                f"{longest_row * bytes_per_pair} bytes of device buffers; only {free_bytes} are allowed")
        cap = longest_row
    return max(cap, 1)


# ---------------------------------------------------------------------------
# Result size
# ---------------------------------------------------------------------------

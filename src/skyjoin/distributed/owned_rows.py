"""The rows of a distributed join that each partition owns, and one table from them.

With ``on_device=True`` a join stays where it was computed: each
partition's rows as a CSR table on its worker's GPU, gathered by nobody.

``skyjoin.distributed.self_join(..., on_device=True)`` returns a
``dask.bag.Bag`` with one partition per spatial partition; the partition's
one item is an :class:`OwnedRows`, whose arrays are CuPy arrays on the GPU
of the worker that made them.  The next GPU step maps over the bag
(``bag.map(fn)``), and Dask runs ``fn`` on the worker that holds the rows;
``to_host_table`` brings everything to one host table when it fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .._core.conditioning import condition_checked
from ..simjoin import engine
from ..simjoin.plan import request
from ..simjoin.result import NeighborTable, index_dtype
from ._kernels import place_rows

__all__ = ["OwnedRows", "task_self_join", "owned_table", "as_bag", "to_host_table",
           "assemble_table"]


def task_self_join(X, eps, *, device: str, precision: str, include_self: bool = False,
                   output: str = "table", sort: bool = True, on_device: bool = False,
                   batch_pairs=None, query_rows=None, column_ids=None, n_columns=None,
                   rows_ready=None):
    """The single-machine self-join of a task's points X on the resolved
    ``device``, through the join's engine entry (``skyjoin.simjoin.engine.run``).

    The driver has checked eps and precision; the task's points are
    conditioned once here (``skyjoin._core.conditioning.condition_checked``:
    host or device arrays; the range pass is the finiteness check of points
    the driver has not read, a NaN or inf reported with its row), the
    request built by ``skyjoin.simjoin.plan.request``.
    ``query_rows``, ``column_ids``, ``n_columns``, ``rows_ready`` and
    ``batch_pairs`` are the GPU engine's (``gpu.pipeline.run``): a
    partition's owned rows in global column ids, a part written as it is
    filled.  Cost: the join's, plus O(n d) for the conditioning."""
    (Xc,), e = condition_checked([X], ["X"], eps, precision)
    plan = request(device, self_join=True, output=output, sort=sort, include_self=include_self,
                   precision=precision, on_device=on_device, batch_pairs=batch_pairs)
    return engine.run(plan, None, Xc, e, query_rows=query_rows, column_ids=column_ids,
                      n_columns=n_columns, rows_ready=rows_ready)


def owned_table(points, ids, n_own: int, eps: float, *, include_self: bool, sort: bool,
                precision: str, n_columns: int, on_device: bool = False,
                rows_ready=None, batch_pairs=None) -> NeighborTable:
    """A partition's owned rows on the GPU: the join of its points (the owned ones
    first, then its halo) computed for the first ``n_own`` rows only, with the
    columns renamed to the global ``ids`` (int32, so ``n_columns`` < 2**31)
    before the rows are sorted.  ``points`` and ``ids`` on the host or on this
    thread's GPU; the table in host memory, or on the GPU with ``on_device``.
    ``rows_ready`` and ``batch_pairs``: as for :func:`task_self_join` (a part
    written as it is filled).  Cost: the single-machine GPU join of the
    partition's points, the halo's rows not computed."""
    return task_self_join(points, eps, device="gpu", precision=precision,
                          include_self=include_self, sort=sort, on_device=on_device,
                          batch_pairs=batch_pairs, query_rows=n_own,
                          column_ids=ids.astype(np.int32), n_columns=n_columns,
                          rows_ready=rows_ready)


@dataclass
class OwnedRows:
    """The rows of a distributed join that one partition owns.

    Attributes
    ----------
    rows : cupy.ndarray or ndarray of int64, shape (m,)
        Global ids of the partition's points (its rows), ascending.
    table : NeighborTable, shape (m, n)
        Row r holds the neighbours of point ``rows[r]``, as global ids;
        on the partition's GPU (``table.on_device``) or in host memory.
    """

    rows: Any
    table: NeighborTable

    @property
    def n_pairs(self) -> int:
        return self.table.n_pairs

    def to_host(self) -> "OwnedRows":
        """The same rows in host memory (a copy when on a GPU): O(m + pairs) bytes."""
        rows = self.rows.get() if hasattr(self.rows, "get") else np.asarray(self.rows)
        return OwnedRows(rows.astype(np.int64, copy=False), self.table.to_host())


def as_bag(futures: Sequence) -> Any:
    """A ``dask.bag.Bag`` over the futures of the partitions' ``[OwnedRows]`` lists
    (one bag partition each); the futures stay alive as long as the bag."""
    import dask.bag as db
    from dask import delayed

    return db.from_delayed([delayed(f) for f in futures])


def to_host_table(parts: Sequence[OwnedRows], n: int, sort: bool) -> NeighborTable:
    """One host NeighborTable of shape (n, n) from every partition's rows.

    Every point must be owned by exactly one partition.  O(n + pairs)
    host memory and time.
    """
    rows = []
    for part in parts:
        h = part.to_host()
        rows.append((h.rows, h.table.counts(), h.table.indices))
    return assemble_table(rows, n, sort)


def assemble_table(rows, n: int, sort: bool) -> NeighborTable:
    """One CSR table from the partitions' owned rows (ids, counts, columns).

    Every point must be owned by exactly one partition.  O(n + pairs).
    """
    counts = np.zeros(n, dtype=np.int64)
    for ids, c, _ in rows:
        counts[ids] = c
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=index_dtype(n))
    for ids, c, cols in rows:
        if len(cols):
            place_rows(indptr, ids, c, cols.astype(indices.dtype, copy=False), indices)
    return NeighborTable(indptr, indices, (n, n), sorted=bool(sort))

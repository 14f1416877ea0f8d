"""Join results: the CSR ``NeighborTable`` and the ``PairChunk`` of streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numpy.typing import DTypeLike

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["NeighborTable", "PairChunk", "index_dtype"]


def index_dtype(n_cols: int) -> np.dtype:
    """Smallest index dtype for column ids below n_cols (int32 when it fits)."""
    return np.dtype(np.int32) if n_cols < 2**31 else np.dtype(np.int64)


class NeighborTable:
    """Result of an epsilon join as a CSR table.

    Row ``i`` lists the columns ``j`` with ``dist(x_i, y_j) <= eps``:
    ``indices[indptr[i]:indptr[i + 1]]``.  For a self-join rows and columns
    both index ``X``; for ``join(R, S)`` rows index R and columns index S.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_rows + 1,)
    indices : ndarray of int32 or int64, shape (n_pairs,)
    shape : tuple (n_rows, n_cols)
    sorted : bool
        Whether the columns are ascending within each row.

    Attributes
    ----------
    indptr, indices : ndarray
        The CSR arrays (NumPy arrays, or CuPy arrays for a table kept on the
        GPU with ``on_device=True``).
    shape : tuple of int
    n_pairs : int
        Number of (row, column) pairs stored.
    sorted : bool
    on_device : bool
        Whether the arrays live on the GPU.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> nt = sj.self_join(np.array([[0.0], [1.0], [3.0]]), eps=1.0)
    >>> nt.pairs().tolist()
    [[0, 1], [1, 0]]
    """

    __slots__ = ("indptr", "indices", "shape", "sorted")

    def __init__(self, indptr: Any, indices: Any, shape: Sequence[int],
                 sorted: bool = True) -> None:
        self.indptr = indptr
        self.indices = indices
        self.shape = (int(shape[0]), int(shape[1]))
        self.sorted = bool(sorted)
        if len(indptr) != self.shape[0] + 1:
            raise ValueError("indptr must have n_rows + 1 entries")

    # -- basic properties -------------------------------------------------
    @property
    def on_device(self) -> bool:
        return hasattr(self.indices, "__cuda_array_interface__")

    @property
    def n_pairs(self) -> int:
        return int(self.indptr[-1])

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        where = "gpu" if self.on_device else "host"
        return (f"NeighborTable(shape={self.shape}, n_pairs={self.n_pairs}, "
                f"sorted={self.sorted}, on={where})")

    # -- conversions -------------------------------------------------------
    def to_host(self) -> "NeighborTable":
        """A copy of the table in host memory (itself if already there)."""
        if not self.on_device:
            return self
        return NeighborTable(self.indptr.get(), self.indices.get(), self.shape, self.sorted)

    def counts(self) -> np.ndarray:
        """Number of neighbours of each row (int64)."""
        return np.diff(self.indptr).astype(np.int64, copy=False)

    def row(self, i: int) -> np.ndarray:
        """Columns of row ``i``."""
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def pairs(self) -> np.ndarray:
        """All pairs as an (n_pairs, 2) int64 array of (row, column).

        Returns
        -------
        ndarray of int64, shape (n_pairs, 2)
            Row ``k`` is the pair ``(i, j)``: column 0 holds row ids, column
            1 column ids, in the table's order (rows ascending; columns
            ascending within a row when :attr:`sorted`).  A table kept on
            the GPU is copied to the host first.

        See Also
        --------
        to_scipy : the same pairs as a sparse matrix.
        skyjoin.self_join_chunks : the pairs in bounded chunks, never all
            in memory at once.

        Notes
        -----
        Allocates 16 bytes per pair: O(n_pairs) time and memory on top of
        the table's own (8 or 12 bytes per pair).

        Examples
        --------
        >>> import numpy as np, skyjoin as sj
        >>> sj.self_join(np.array([[0.0], [1.0], [3.0]]), eps=1.0, device="cpu").pairs()
        array([[0, 1],
               [1, 0]])
        """
        h = self.to_host()
        rows = np.repeat(np.arange(h.shape[0], dtype=np.int64), np.diff(h.indptr))
        return np.column_stack((rows, h.indices.astype(np.int64, copy=False)))

    def to_scipy(self, dtype: DTypeLike = np.float64) -> "scipy.sparse.csr_matrix":
        """The table as a ``scipy.sparse.csr_matrix`` with ones as values.

        Parameters
        ----------
        dtype : dtype, default float64
            Type of the stored values (all ones).

        Returns
        -------
        scipy.sparse.csr_matrix, shape ``self.shape``
            Entry ``(i, j)`` is stored, with value 1, iff ``(i, j)`` is a
            pair.  It shares ``indptr`` and ``indices`` with a host table
            (a table on the GPU is copied to the host first), so the matrix
            carries its index dtype (int32 when the column count allows).
            Its rows are sorted iff :attr:`sorted`.

        See Also
        --------
        pairs : the pairs as an (n_pairs, 2) array.
        scipy.spatial.cKDTree.sparse_distance_matrix : the same pattern,
            with distances as values.

        Notes
        -----
        O(n_pairs) time and memory for the values; the index arrays are not
        copied.

        Examples
        --------
        >>> import numpy as np, skyjoin as sj
        >>> A = sj.self_join(np.array([[0.0], [1.0], [3.0]]), eps=1.0, device="cpu").to_scipy()
        >>> A.toarray()
        array([[0., 1., 0.],
               [1., 0., 0.],
               [0., 0., 0.]])
        """
        import scipy.sparse as sp

        h = self.to_host()
        data = np.ones(h.n_pairs, dtype=dtype)
        return sp.csr_matrix((data, h.indices, h.indptr), shape=h.shape)

    def sort_rows(self) -> "NeighborTable":
        """Sort the columns within every row in place; returns self."""
        if not self.sorted:
            from .csr import sort_csr_rows  # Numba: loaded on first use

            sort_csr_rows(self.indptr, self.indices)
            self.sorted = True
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NeighborTable):
            return NotImplemented
        a, b = self.to_host(), other.to_host()
        return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
                and np.array_equal(a.indices, b.indices))

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable


@dataclass(frozen=True)
class PairChunk:
    """A bounded piece of a join result, as yielded by ``self_join_chunks``.

    Attributes
    ----------
    i, j : ndarray of int64
        The pairs of the chunk (row ids, column ids), grouped by row with
        rows ascending, columns ascending within a row when sorted.
    row_start, row_stop : int
        The chunk holds every pair whose row lies in [row_start, row_stop).
    """

    i: np.ndarray
    j: np.ndarray
    row_start: int
    row_stop: int

    def __len__(self) -> int:
        return len(self.i)

"""Join results: the CSR ``NeighborTable`` and the ``PairChunk`` of streams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numpy.typing import DTypeLike

from .result_size import check_memory_limit, result_size_guard

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["NeighborTable", "PairChunk", "PairStream", "index_dtype"]


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
    distances : ndarray, optional
        The distance of every pair, aligned with ``indices`` (``self_join``
        and ``join`` with ``return_distance=True``).

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
    distances : ndarray or None
        ``distances[p]`` is the distance of the pair ``indices[p]`` of its
        row, exactly as the join's test computed it (the square root of the
        sum of squared differences in the working precision: float64 for
        float64 input), or None when not asked for.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> nt = sj.self_join(np.array([[0.0], [1.0], [3.0]]), eps=1.0)
    >>> nt.pairs().tolist()
    [[0, 1], [1, 0]]
    """

    __slots__ = ("indptr", "indices", "shape", "sorted", "distances")

    def __init__(self, indptr: Any, indices: Any, shape: Sequence[int],
                 sorted: bool = True, distances: Any = None) -> None:
        self.indptr = indptr
        self.indices = indices
        self.shape = (int(shape[0]), int(shape[1]))
        self.sorted = bool(sorted)
        self.distances = distances
        if len(indptr) != self.shape[0] + 1:
            raise ValueError("indptr must have n_rows + 1 entries")
        if distances is not None and len(distances) != len(indices):
            raise ValueError("distances must have one entry per pair (as indices)")

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
    def _guard(self, form: str, memory_limit: int | str) -> None:
        """``result_size_guard`` for a host result of ``form`` built from this table."""
        result_size_guard(self.n_pairs, self.shape[0], form=form,
                          index_itemsize=self.indices.dtype.itemsize,
                          distance_itemsize=0 if self.distances is None
                          else self.distances.dtype.itemsize,
                          memory_limit=check_memory_limit(memory_limit))

    def to_host(self, *, memory_limit: int | str = "auto") -> "NeighborTable":
        """A copy of the table in host memory (itself if already there).

        Raises
        ------
        ResultTooLargeError
            If the copy does not fit in host memory (``memory_limit``: bytes,
            or "auto" for the memory available).
        """
        if not self.on_device:
            return self
        self._guard("table", memory_limit)
        dist = None if self.distances is None else self.distances.get()
        return NeighborTable(self.indptr.get(), self.indices.get(), self.shape, self.sorted,
                             distances=dist)

    def counts(self) -> np.ndarray:
        """Number of neighbours of each row (int64)."""
        return np.diff(self.indptr).astype(np.int64, copy=False)

    def row(self, i: int) -> np.ndarray:
        """Columns of row ``i``."""
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def pairs(self, unique: bool = False, *, memory_limit: int | str = "auto") -> np.ndarray:
        """The pairs as an (m, 2) int64 array of (row, column), grouped by row.

        Parameters
        ----------
        unique : bool, default False
            Self-join tables only: keep each unordered pair once, as
            (i, j) with i < j (self pairs dropped), the set that
            ``scipy.spatial.cKDTree.query_pairs`` returns.
        memory_limit : int or "auto"
            Bytes the array may take ("auto": the host memory available).

        Returns
        -------
        ndarray of int64, shape (m, 2)
            Row ``k`` is the pair ``(i, j)``: column 0 holds row ids, column
            1 column ids, in the table's order (rows ascending; columns
            ascending within a row when :attr:`sorted`).  A table kept on
            the GPU is copied to the host first.

        Raises
        ------
        ValueError
            ``unique=True`` on a table that is not square.
        ResultTooLargeError
            If the array does not fit (checked before it is allocated).

        See Also
        --------
        to_scipy : the same pairs as a sparse matrix.
        skyjoin.self_join_chunks : the pairs in bounded chunks, never all
            in memory at once.
        scipy.spatial.cKDTree.query_pairs : the pairs i < j, as a set.

        Notes
        -----
        O(n_rows + n_pairs) time; 16 bytes per pair for the array plus 8
        for the row ids while it is built (the guard counts 24), on top of
        the table's own.

        Examples
        --------
        >>> import numpy as np, skyjoin as sj
        >>> nt = sj.self_join(np.array([[0.0], [1.0], [3.0]]), eps=1.0, device="cpu")
        >>> nt.pairs()
        array([[0, 1],
               [1, 0]])
        >>> nt.pairs(unique=True)
        array([[0, 1]])
        """
        if unique and self.shape[0] != self.shape[1]:
            raise ValueError(f"pairs(unique=True) needs a self-join table (square), "
                             f"got shape {self.shape}")
        self._guard("pairs", memory_limit)
        h = self.to_host(memory_limit=memory_limit)
        rows = np.repeat(np.arange(h.shape[0], dtype=np.int64), np.diff(h.indptr))
        cols = h.indices
        if unique:
            keep = rows < cols
            rows, cols = rows[keep], cols[keep]
        return np.column_stack((rows, cols.astype(np.int64, copy=False)))

    def to_scipy(self, mode: str = "connectivity", dtype: DTypeLike = np.float64, *,
                 memory_limit: int | str = "auto") -> "scipy.sparse.csr_matrix":
        """The table as a ``scipy.sparse.csr_matrix``.

        Parameters
        ----------
        mode : {"connectivity", "distance"}
            Values: ones, or the distance of each pair (the table must hold
            them: ``return_distance=True``).
        dtype : dtype, default float64
            Type of the stored values: float64 by default, as
            scikit-learn's ``radius_neighbors_graph`` (the ``.npz`` file of
            ``skyjoin.io.write_neighbor_table`` and ``skyjoin join --out``
            stores other dtypes: see the Notes).
        memory_limit : int or "auto"
            Bytes the matrix may take ("auto": the host memory available).

        Returns
        -------
        scipy.sparse.csr_matrix, shape ``self.shape``
            Entry ``(i, j)`` is stored iff ``(i, j)`` is a pair.  It shares
            ``indices`` with a host table (a table on the GPU is copied to
            the host first), so the matrix carries its index dtype (int32
            when the column count allows); scipy casts ``indptr`` to that
            dtype (a copy, O(n)).  Its rows are sorted iff :attr:`sorted`.

        Raises
        ------
        ValueError
            An unknown mode, or mode="distance" on a table without distances.
        ResultTooLargeError
            If the matrix does not fit (checked before it is allocated).

        See Also
        --------
        pairs : the pairs as an (n_pairs, 2) array.
        scipy.spatial.cKDTree.sparse_distance_matrix : mode="distance" of
            ``include_self=True``.
        sklearn.neighbors.radius_neighbors_graph : mode="distance" of
            ``include_self=False`` (its default for that mode).

        Notes
        -----
        Every pair of the table is stored, zero distances included: a
        point's duplicates (and itself, with ``include_self=True``) are
        explicit zeros, so the matrix of mode="distance" has the sparsity
        of mode="connectivity".  The oracles' conventions for a self-join
        at radius eps:

        * ``cKDTree(X).sparse_distance_matrix(cKDTree(X), eps)`` stores
          every pair within eps, the diagonal and duplicates as explicit
          zeros: the table of ``include_self=True``;
        * scikit-learn's ``radius_neighbors_graph(X, eps, mode="distance")``
          leaves out the diagonal by default (``include_self=False``) and
          stores duplicates as explicit zeros: the table of
          ``include_self=False``; with ``include_self=True``, that of
          ``include_self=True``.

        The ``.npz`` file (``skyjoin.io.write_neighbor_table``, ``skyjoin
        join --out t.npz``) stores the same sparsity and index arrays, but
        its values in fewer bytes: boolean ones (a byte a pair) for a table
        without distances, and the distances in the table's own dtype
        (float32 after ``precision="float32"``).  So
        ``scipy.sparse.load_npz`` returns a bool (or float32) matrix, equal
        to ``to_scipy(dtype=bool)`` (or ``to_scipy("distance",
        dtype=nt.distances.dtype)``), where ``to_scipy()`` gives float64.

        O(n_pairs) time and memory for the values (the guard counts 16
        bytes a pair, in case scipy widens the indices); ``indices`` is not
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

        if mode not in ("connectivity", "distance"):
            raise ValueError(f"mode must be 'connectivity' or 'distance', got {mode!r}")
        if mode == "distance" and self.distances is None:
            raise ValueError("mode='distance' needs a table with distances: join with "
                             "return_distance=True")
        self._guard("scipy", memory_limit)
        h = self.to_host(memory_limit=memory_limit)
        if mode == "distance":
            data = h.distances.astype(dtype, copy=True)
        else:
            data = np.ones(h.n_pairs, dtype=dtype)
        return sp.csr_matrix((data, h.indices, h.indptr), shape=h.shape)

    def sort_rows(self) -> "NeighborTable":
        """Sort the columns within every row in place (their distances with
        them); returns self.  O(m log m) a row of m entries."""
        if not self.sorted:
            if self.distances is None:
                from .csr import sort_csr_rows  # Numba: loaded on first use

                sort_csr_rows(self.indptr, self.indices)
            else:
                rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))
                order = np.lexsort((self.indices, rows))
                self.indices[:] = self.indices[order]
                self.distances[:] = self.distances[order]
            self.sorted = True
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NeighborTable):
            return NotImplemented
        a, b = self.to_host(), other.to_host()
        return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
                and np.array_equal(a.indices, b.indices))

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable


class PairChunk:
    """A bounded piece of a join result, as yielded by ``self_join_chunks``.

    A chunk holds every pair of the rows ``[row_start, row_stop)``, grouped
    by row with rows ascending, columns ascending within a row when sorted.
    The joins yield it in CSR form (:meth:`from_csr`: ``indptr`` and
    ``indices``, as the join wrote them); the pair arrays ``i`` and ``j``
    are built from it on first access.

    Parameters
    ----------
    i, j : ndarray of int
        The pairs (row ids, column ids).
    row_start, row_stop : int
        The row range.

    Attributes
    ----------
    i, j : ndarray of int64
        The pairs of the chunk (row ids, column ids).  For a chunk in CSR
        form, built on first access: O(pairs) time and 16 bytes a pair.
    row_start, row_stop : int
        The chunk holds every pair whose row lies in [row_start, row_stop).
    indptr : ndarray of int64, shape (row_stop - row_start + 1,), or None
        Row offsets into ``indices`` (from 0), for a chunk in CSR form.
    indices : ndarray of int32 or int64, or None
        The column ids, row after row (the table's index dtype).  What the
        pair writers (``skyjoin.io.PairWriter.write_chunk``) read: the row
        ids are never expanded in Python.

    Examples
    --------
    >>> import numpy as np
    >>> c = PairChunk.from_csr(4, np.array([0, 2, 2, 3]), np.array([1, 5, 0], dtype=np.int32))
    >>> len(c), c.row_stop, c.i.tolist(), c.j.tolist()
    (3, 7, [4, 4, 6], [1, 5, 0])
    """

    __slots__ = ("_i", "_j", "row_start", "row_stop", "indptr", "indices")

    def __init__(self, i: Any, j: Any, row_start: int, row_stop: int) -> None:
        if len(i) != len(j):
            raise ValueError(f"i and j must have the same length, got {len(i)} and {len(j)}")
        self._i, self._j = i, j
        self.row_start, self.row_stop = int(row_start), int(row_stop)
        self.indptr: np.ndarray | None = None
        self.indices: np.ndarray | None = None

    @classmethod
    def from_csr(cls, row_start: int, indptr: np.ndarray, indices: np.ndarray) -> "PairChunk":
        """The chunk of rows ``row_start, row_start + 1, ...``: row ``row_start + r``
        holds ``indices[indptr[r]:indptr[r + 1]]`` (``indptr[0] == 0``).  O(1):
        the arrays are kept, not copied."""
        if len(indptr) < 1 or int(indptr[0]) != 0 or int(indptr[-1]) != len(indices):
            raise ValueError("indptr must run from 0 to len(indices)")
        c = cls.__new__(cls)
        c._i = c._j = None
        c.row_start = int(row_start)
        c.row_stop = int(row_start) + len(indptr) - 1
        c.indptr, c.indices = indptr, indices
        return c

    @property
    def i(self) -> np.ndarray:
        if self._i is None:
            assert self.indptr is not None
            self._i = np.repeat(np.arange(self.row_start, self.row_stop, dtype=np.int64),
                                np.diff(self.indptr))
        return self._i

    @property
    def j(self) -> np.ndarray:
        if self._j is None:
            assert self.indices is not None
            self._j = self.indices.astype(np.int64)
        return self._j

    def __len__(self) -> int:
        return len(self.indices) if self.indices is not None else len(self._i)

    def __repr__(self) -> str:
        return f"PairChunk(rows [{self.row_start}, {self.row_stop}), {len(self)} pairs)"


class PairStream:
    """The chunks of a self-join, as ``self_join_chunks`` returns them: an
    iterator of :class:`PairChunk` that can tell the total first.

    The join counts every row's neighbours before it fills the first chunk;
    :meth:`count` runs that pass (if it has not run) and returns the total,
    so that a caller can size a progress bar or a file before any pair is
    computed.  Iterating runs the count first if needed, then yields the
    chunks in row order.

    Attributes
    ----------
    n_pairs : int or None
        The total number of pairs, once counted (None before).

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> s = sj.self_join_chunks(np.array([[0.0], [1.0], [3.0]]), 1.0, device="cpu")
    >>> s.n_pairs, s.count(), [len(c) for c in s]
    (None, 2, [2])
    """

    __slots__ = ("_gen", "n_pairs")

    def __init__(self, gen: Any) -> None:
        # ``gen`` yields the total (an int) once counted, then the chunks
        self._gen = gen
        self.n_pairs: int | None = None

    def count(self) -> int:
        """The total number of pairs (runs the count pass if it has not run).
        O(the count pass) the first time, O(1) after."""
        if self.n_pairs is None:
            total = next(self._gen, 0)
            if not isinstance(total, (int, np.integer)):
                raise RuntimeError("internal error: the chunk stream yielded no count first")
            self.n_pairs = int(total)
        return self.n_pairs

    def __iter__(self) -> "PairStream":
        return self

    def __next__(self) -> PairChunk:
        self.count()
        return next(self._gen)

    def close(self) -> None:
        """Stop the join: nothing more is computed (idempotent)."""
        self._gen.close()

    def __repr__(self) -> str:
        total = "not counted" if self.n_pairs is None else f"{self.n_pairs} pairs"
        return f"PairStream({total})"

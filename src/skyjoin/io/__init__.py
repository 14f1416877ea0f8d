"""Data in and out: point files, join results, labels and indices.

Readers and the point writer (``skyjoin.io.points``)
    :func:`read_points` (an (n, d) float array) and :func:`read_frame` (a
    pandas DataFrame, for the skyline's DataFrame form) read ``.csv`` /
    ``.txt`` / ``.tsv`` (comma, tab, semicolon or whitespace separated, an
    optional header row detected automatically, a trailing delimiter at the
    end of every line ignored, a pandas index column dropped with a
    :class:`skyjoin.DroppedIndexColumn` warning), ``.parquet`` and ``.npy``;
    :func:`write_points` writes them.
Pairs (``skyjoin.io.pairs``)
    :func:`open_pair_writer` streams pair chunks into one ``.parquet``,
    ``.csv`` or ``.npy`` file without holding them all
    (:class:`ParquetPairWriter`, :class:`CsvPairWriter`,
    :class:`NpyPairWriter`): pairs or CSR rows are copied into blocks that
    a background thread encodes and writes while the caller computes the
    next ones (``skyjoin.io.pair_writer``, ``skyjoin.io.background``);
    :func:`write_pairs` writes one list.
Results (``skyjoin.io.results``)
    :func:`write_neighbor_table` (``.npz`` in ``scipy.sparse.save_npz``'s
    layout, or pairs) and :func:`read_neighbor_table`; :func:`write_labels`,
    :func:`write_counts`, :func:`write_indices` (``.csv``, ``.parquet`` or
    ``.npy``) and :func:`write_rows` (rows of a DataFrame with their ids).

Every writer is atomic (``skyjoin.io.atomic``): the file is written under a
temporary name in its folder and renamed when complete, so that a failed or
interrupted write leaves no partial file.  Delimited text is parsed by
``pyarrow.csv`` (multithreaded) and whitespace-separated text by pandas' C
parser.
"""

from .atomic import PendingFile, atomic_path, check_writable
from .pairs import (PAIR_FORMATS, CsvPairWriter, NpyPairWriter, PairWriter, ParquetPairWriter,
                    open_pair_writer, write_pairs)
from .points import POINT_FORMATS, read_frame, read_points, write_points
from .results import (COLUMN_FORMATS, TABLE_FORMATS, read_neighbor_table, write_counts,
                      write_indices, write_labels, write_neighbor_table, write_rows)

__all__ = [
    "read_points",
    "read_frame",
    "write_points",
    "write_pairs",
    "open_pair_writer",
    "PairWriter",
    "ParquetPairWriter",
    "CsvPairWriter",
    "NpyPairWriter",
    "write_neighbor_table",
    "read_neighbor_table",
    "write_labels",
    "write_counts",
    "write_indices",
    "write_rows",
    "atomic_path",
    "PendingFile",
    "check_writable",
    "POINT_FORMATS",
    "PAIR_FORMATS",
    "TABLE_FORMATS",
    "COLUMN_FORMATS",
]

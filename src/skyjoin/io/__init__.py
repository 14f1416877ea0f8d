"""Data in and out: point files, join results, labels and indices.

Readers (``skyjoin.io.points``)
    :func:`read_points` (an (n, d) float array) and :func:`read_frame` (a
    pandas DataFrame, for the skyline's DataFrame form) read ``.csv`` /
    ``.txt`` / ``.tsv`` (comma, tab, semicolon or whitespace separated, an
    optional header row detected automatically, a trailing delimiter at the
    end of every line ignored), ``.parquet`` and ``.npy``.
Writers (``skyjoin.io.results``)
    :func:`write_pairs` (``.parquet`` or ``.npz``), :func:`write_neighbor_table`
    (``.npz`` CSR or ``.parquet`` pairs) and :func:`read_neighbor_table`,
    :func:`write_labels` and :func:`write_indices` (``.csv`` or ``.parquet``),
    and :class:`ParquetPairWriter`, which streams pair chunks into one Parquet
    file without holding them all.

Delimited text is parsed by ``pyarrow.csv`` (multithreaded) and
whitespace-separated text by pandas' C parser.
"""

from .points import POINT_FORMATS, read_frame, read_points
from .results import (ParquetPairWriter, read_neighbor_table, write_indices, write_labels,
                      write_neighbor_table, write_pairs)

__all__ = [
    "read_points",
    "read_frame",
    "write_pairs",
    "write_neighbor_table",
    "read_neighbor_table",
    "write_labels",
    "write_indices",
    "ParquetPairWriter",
    "POINT_FORMATS",
]

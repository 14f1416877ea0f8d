"""Atomic outputs: every file is written under a temporary name, then renamed.

Every writer of :mod:`skyjoin.io` (and every file the ``skyjoin`` command
writes) goes through :class:`PendingFile`, or :func:`atomic_path` built on
it: the bytes go to a hidden temporary file in the destination's folder,
which is renamed onto the final name (``os.replace``, atomic on one file
system) only once the writer has finished.  A run that fails or is
interrupted leaves neither a partial file under the final name nor the
temporary file (its removal is attempted on any exception, ``KeyboardInterrupt``
included; a process killed outright can leave the hidden temporary file, never
a partial file under the final name).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Iterator

__all__ = ["PendingFile", "atomic_path", "check_writable"]


def check_writable(path: str | os.PathLike[str]) -> str:
    """Check that ``path`` can be created: its folder exists and is writable,
    and ``path`` is not a folder.  Returns the path as a string.

    Raises
    ------
    FileNotFoundError
        The folder does not exist.
    PermissionError
        The folder is not writable.
    IsADirectoryError
        ``path`` is a folder.

    Notes
    -----
    O(1): two ``stat`` calls, no file created.
    """
    p = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(p))
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p!r} is a folder, not a file name")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {p!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {p!r}: the folder {folder!r} is not writable")
    return p


class PendingFile:
    """A file being written: a temporary name now, the final name on :meth:`commit`.

    The temporary name is hidden (a leading dot), lies in the final file's
    folder (so the rename never copies) and keeps its extension (NumPy's
    ``save``/``savez`` and Matplotlib's ``savefig`` choose by extension).

    Parameters
    ----------
    path : str or os.PathLike
        The final name.  Its folder must exist.

    Attributes
    ----------
    path : str
        The final name.
    tmp : str
        The name to write to.

    Raises
    ------
    FileNotFoundError, PermissionError, IsADirectoryError
        As :func:`check_writable`.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> f = PendingFile(path)
    >>> with open(f.tmp, "w") as fh:
    ...     _ = fh.write("done")
    >>> os.path.exists(path)
    False
    >>> f.commit(); open(path).read()
    'done'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_writable(path)
        folder, name = os.path.split(os.path.abspath(self.path))
        stem, ext = os.path.splitext(name)
        self.tmp = os.path.join(folder, f".{stem}.{uuid.uuid4().hex[:12]}.partial{ext}")

    def commit(self) -> None:
        """Rename the finished temporary file onto the final name."""
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        """Remove the temporary file, if any (idempotent)."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.tmp)

    def __repr__(self) -> str:
        return f"PendingFile({self.path!r})"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary name to write ``path`` to; renamed onto ``path`` when the
    block ends normally, removed when it raises (the exception propagates).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> with atomic_path(path) as tmp:
    ...     np.save(tmp, np.arange(3))
    >>> np.load(path).tolist()
    [0, 1, 2]
    """
    pending = PendingFile(path)
    try:
        yield pending.tmp
    except BaseException:
        pending.discard()
        raise
    try:
        pending.commit()
    except BaseException:
        pending.discard()
        raise

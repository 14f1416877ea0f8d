"""One background thread that writes blocks in order, beside the caller.

A pair writer fills a block of pairs in the caller's thread (the join's),
then hands it to :class:`BlockWriter`, whose thread encodes and writes it
(Parquet, CSV formatting and file writes release the GIL) while the caller
fills the next one.  Blocks come from a fixed pool: at most ``depth`` blocks
wait or are being written while one more is filled, so that the memory of
a stream is bounded by ``depth + 1`` blocks whatever its length, and a
caller faster than the disk waits for a free block (back-pressure) instead
of queueing without bound.

A writer may also hand over a call (:meth:`BlockWriter.submit_call`), run
in order with the blocks: a chunk of pairs written from the caller's own
arrays, with no copy in the caller's thread.  At most one call waits or
runs at a time, so that at most one such chunk is held besides the one the
caller computes.

The first error of the thread stops every later write and is raised in the
caller's thread by the next :meth:`BlockWriter.submit`, :meth:`BlockWriter.drain`
or :meth:`BlockWriter.take`.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

__all__ = ["BlockWriter"]


class BlockWriter:
    """Write blocks in submission order on one background thread.

    Parameters
    ----------
    write : callable
        ``write(block)``: encodes and writes one block (run on the thread).
    new_block : callable
        ``new_block()``: a fresh empty block, called when the pool has none
        free and fewer than ``depth + 1`` exist.
    depth : int
        Blocks that may wait or be written at once, besides the one being
        filled (>= 1).
    threaded : bool
        False: write each block in the caller's thread at :meth:`submit`
        (one block in all).

    Notes
    -----
    Memory: at most ``depth + 1`` blocks exist (``1`` when not threaded),
    and at most one call holds its arguments.
    """

    def __init__(self, write: Callable[[Any], None], new_block: Callable[[], Any],
                 depth: int = 2, threaded: bool = True) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._write = write
        self._new_block = new_block
        self._limit = depth + 1 if threaded else 1
        self._made = 0
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._jobs: queue.Queue[Any] = queue.Queue(maxsize=depth + 1)
        self._call_slot = threading.Semaphore(1)
        if threaded:
            self._thread = threading.Thread(target=self._run, name="skyjoin-writer", daemon=True)
            self._thread.start()

    # -- the caller's side ------------------------------------------------------
    def take(self) -> Any:
        """An empty block to fill: a free one, a new one while the pool is not
        full, else the next one the thread releases (back-pressure)."""
        self._raise_error()
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        if self._made < self._limit:
            self._made += 1
            return self._new_block()
        block = self._free.get()
        self._raise_error()
        return block

    def submit(self, block: Any) -> None:
        """Hand a filled block over; it is written after every earlier one."""
        self._raise_error()
        if self._thread is None:
            try:
                self._write(block)
            finally:
                self._free.put(block)
            return
        self._jobs.put(("block", block))

    def submit_call(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the thread after every earlier block and call; waits
        while an earlier call is still waiting or running."""
        self._raise_error()
        if self._thread is None:
            fn()
            return
        self._call_slot.acquire()
        if self._error is not None:
            self._call_slot.release()
            self._raise_error()
        self._jobs.put(("call", fn))

    def drain(self) -> None:
        """Wait until every submitted block is written; stop the thread.
        Raises the thread's error, if any."""
        self._stop()
        self._raise_error()

    def cancel(self) -> None:
        """Drop the blocks not yet written, wait for the one being written,
        stop the thread; errors are not raised (the caller is abandoning)."""
        self._stopped = True
        if self._thread is not None:
            while True:
                try:
                    self._done(self._jobs.get_nowait())
                except queue.Empty:
                    break
        self._stop()

    @property
    def stopped(self) -> bool:
        """Whether writing was abandoned (:meth:`cancel`) or failed: a long
        call checks it between blocks and returns early."""
        return self._stopped or self._error is not None

    # -- the thread -------------------------------------------------------------
    def _stop(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        self._jobs.put(None)
        self._thread.join()

    def _done(self, job) -> None:
        """Give back what a job held: its block to the pool, or the call slot."""
        kind, what = job
        if kind == "block":
            self._free.put(what)
        else:
            self._call_slot.release()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if self._error is None and not self._stopped:
                    kind, what = job
                    if kind == "block":
                        self._write(what)
                    else:
                        what()
            except BaseException as exc:  # handed to the caller's thread
                self._error = exc
            finally:
                self._done(job)

    def _raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            self._stopped = True
            raise err

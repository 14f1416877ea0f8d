"""The GPU join's batched fill (host side): the batches of rows filled on the
device over three CUDA streams, and each copied into host memory while the
GPU fills the next.

``fill_batches`` yields each batch's column ids from a pinned staging
buffer; ``fill_to_host`` assembles them into the host table's column array
(or hands each to a sink).  Used by ``pipeline.fill_rows`` and
``pipeline.chunk_stream``.  Nothing can overflow: the buffers are sized from
exact counts (``skyjoin.simjoin.plan.batch_capacity``), and a batch whose fill
flags an overflow is recomputed once, then the call fails loudly.  Cost:
O(pairs) copies besides the kernels; memory 3 x ``cap`` pairs on the device
and in pinned host memory.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from ..._core.memory import alloc_host
from ..._core.transfer import parallel_copy

__all__ = ["fill_batches", "fill_to_host", "N_STREAMS"]

#: CUDA streams (and device result buffers) of the batched fill.
N_STREAMS = 3


def fill_to_host(cp, eng, batches, counts, indptr, indptr_h, cursor, cap, sort, progress, stats,
                  sink=None, rows_ready=None):
    """Fill every batch on the GPU (``fill_batches``) and assemble the host
    CSR column array: each batch is copied by parallel host threads from its
    pinned buffer into the final array while the GPU computes the next one.
    With ``sink``, each batch goes to ``sink(r0, r1, pinned_chunk)``
    instead, and nothing is allocated here (returns None).
    """
    total = int(indptr_h[-1])
    n_rows = len(indptr_h) - 1
    t0 = time.perf_counter()
    final = alloc_host(total, np.int32) if sink is None else None
    stats["host_alloc_s"] = time.perf_counter() - t0
    if total == 0:
        return final
    t_fill = time.perf_counter()
    copy_s = 0.0
    for r0, r1, chunk in fill_batches(cp, eng, batches, counts, indptr, indptr_h, cursor, cap,
                                      sort, stats):
        tc = time.perf_counter()
        m = chunk.shape[0]
        if m and sink is not None:
            sink(r0, r1, chunk)
        elif m:
            base = int(indptr_h[r0])
            parallel_copy(final[base:base + m], chunk)
        copy_s += time.perf_counter() - tc
        if rows_ready is not None and sink is None:
            rows_ready(r0, r1, indptr_h, final)
        if progress is not None:
            progress(r1, n_rows)
    stats["fill_pipeline_s"] = time.perf_counter() - t_fill
    stats["host_copy_s"] = copy_s
    return final


def fill_batches(cp, eng, batches, counts, indptr, indptr_h, cursor, cap, sort, stats):
    """Fill the row batches on the GPU and yield each one's column ids in order:
    ``(r0, r1, pinned)``, ``pinned`` the pairs of rows [r0, r1) laid out by
    the row counts, in a pinned host buffer valid until the next item is
    asked for.

    Three streams, each with a device result buffer of ``cap`` pairs and a
    pinned host staging buffer: while the caller reads batch b-2 (copies it,
    writes it), the GPU fills and sorts batch b-1 and copies it down.  A
    batch whose fill flags an overflow is recomputed once, synchronously;
    then the call fails loudly.  Leaving early (an exception, a generator
    closed) waits for the copies in flight, so that no DMA outlives its
    pinned buffer.  Memory: 3 x ``cap`` pairs on the device and in pinned
    host memory.
    """
    import cupyx  # lazy, as CuPy

    nslots = min(N_STREAMS, len(batches))
    if nslots == 0:
        return
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(nslots)]
    dev_out = [cp.empty(cap, dtype=cp.int32) for _ in range(nslots)]
    pinned = [cupyx.empty_pinned(cap, dtype=np.int32) for _ in range(nslots)]
    flags = [cp.zeros(1, dtype=cp.int32) for _ in range(nslots)]
    flags_h = [cupyx.empty_pinned(1, dtype=np.int32) for _ in range(nslots)]
    cursors = [cursor] + [cp.zeros_like(cursor) for _ in range(nslots - 1)] if cursor is not None \
        else [None] * nslots
    plan = eng.sort_plan(indptr, batches) if sort else None
    cp.cuda.Device().synchronize()      # counts / indptr ready before other streams read them
    inflight: deque = deque()
    wait_s = 0.0

    def launch(b, slot):
        r0, r1 = batches[b]
        base = int(indptr_h[r0])
        m = int(indptr_h[r1]) - base
        with streams[slot]:
            flags[slot].fill(0)
            eng.fill(r0, r1, counts, indptr, dev_out[slot], base, cursors[slot], flags[slot], plan,
                     indptr_h)
            if m:
                dev_out[slot][:m].get(stream=streams[slot], out=pinned[slot][:m], blocking=False)
            flags[slot].get(stream=streams[slot], out=flags_h[slot], blocking=False)
            ev = streams[slot].record()
        inflight.append((b, slot, ev, base, m))

    def wait():
        """The oldest batch in flight, complete in its pinned buffer."""
        nonlocal wait_s
        b, slot, ev, base, m = inflight.popleft()
        tw = time.perf_counter()
        ev.synchronize()
        wait_s += time.perf_counter() - tw
        if int(flags_h[slot][0]):
            r0, r1 = batches[b]
            with streams[slot]:
                flags[slot].fill(0)
                eng.fill(r0, r1, counts, indptr, dev_out[slot], base, cursors[slot], flags[slot],
                         plan, indptr_h)
                streams[slot].synchronize()
                if int(flags[slot].get()[0]):
                    raise RuntimeError(f"GPU join: batch of rows [{r0}, {r1}) overflowed twice")
                if m:
                    dev_out[slot][:m].get(stream=streams[slot], out=pinned[slot][:m])
                streams[slot].synchronize()
        return batches[b][0], batches[b][1], pinned[slot][:m]

    try:
        for b in range(len(batches)):
            while len(inflight) >= max(1, nslots - 1):
                yield wait()
            launch(b, b % nslots)
        while inflight:
            yield wait()
    finally:
        for item in inflight:
            item[2].synchronize()
        stats["gpu_wait_s"] = wait_s

"""How fast can 1 or 2 GPUs put a join result into host memory (issue 6)?

The 2-GPU join of 20M blobs writes a 3.4 GB column array to the host and
does not scale (1.01x for two halves run side by side without Dask).  This
probe times the host side alone for the same bytes, every GPU writing its
share of one array at once:

* ``staged``: the present path, device -> pinned staging buffers -> a
  parallel host copy into fresh huge-page memory (``alloc_host``);
* ``registered``: fresh huge-page memory faulted in by parallel threads,
  page-locked with ``cudaHostRegister`` (portable), and written by the
  GPUs' DMA engines directly (no host copy); fault, register, DMA and
  unregister are timed apart.

Run on a multi-GPU host: ``python3 scripts/host_path_probe.py [GB]``.
"""

import sys
import threading
import time

import numpy as np


def main():
    import cupy as cp
    import cupyx

    from skyjoin._core.memory import alloc_host
    from skyjoin._core.transfer import parallel_copy

    total = int(float(sys.argv[1] if len(sys.argv) > 1 else 3.4) * 1e9) // 4 * 4
    n_gpus = cp.cuda.runtime.getDeviceCount()
    chunk = 64 << 20  # bytes per DMA / staging chunk
    src = []
    for g in range(n_gpus):
        with cp.cuda.Device(g):
            src.append(cp.arange(total // 4, dtype=cp.int32))
    zeros = np.zeros(chunk // 4, dtype=np.int32)

    def staged(k):
        final = alloc_host(total // 4, np.int32)
        per = total // 4 // k
        t0 = time.perf_counter()

        def work(g):  # two staging buffers: the next chunk's DMA beside this chunk's copy
            with cp.cuda.Device(g):
                s = cp.cuda.Stream(non_blocking=True)
                pins = [cupyx.empty_pinned(chunk // 4, dtype=np.int32) for _ in range(2)]
                lo, hi = g * per, (g + 1) * per if g < k - 1 else total // 4
                parts = [(a, min(hi, a + chunk // 4)) for a in range(lo, hi, chunk // 4)]
                events = [None, None]

                def issue(i):
                    a, b = parts[i]
                    src[g][a:b].get(stream=s, out=pins[i % 2][:b - a], blocking=False)
                    events[i % 2] = s.record()
                issue(0)
                for i, (a, b) in enumerate(parts):
                    if i + 1 < len(parts):
                        issue(i + 1)
                    events[i % 2].synchronize()
                    parallel_copy(final[a:b], pins[i % 2][:b - a])
        ths = [threading.Thread(target=work, args=(g,)) for g in range(k)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        out = time.perf_counter() - t0
        assert final[-1] == total // 4 - 1 and final[per - 1] == per - 1
        return {"staged_s": out}

    def registered(k):
        final = alloc_host(total // 4, np.int32)
        n = total // 4
        t0 = time.perf_counter()
        for a in range(0, n, chunk // 4):  # fault in, parallel threads
            b = min(n, a + chunk // 4)
            parallel_copy(final[a:b], zeros[:b - a])
        t1 = time.perf_counter()
        cp.cuda.runtime.hostRegister(final.ctypes.data, final.nbytes, 1)  # portable
        t2 = time.perf_counter()
        per = n // k

        def work(g):
            with cp.cuda.Device(g):
                s = cp.cuda.Stream(non_blocking=True)
                lo, hi = g * per, (g + 1) * per if g < k - 1 else n
                for a in range(lo, hi, chunk // 4):
                    b = min(hi, a + chunk // 4)
                    cp.cuda.runtime.memcpyAsync(final.ctypes.data + 4 * a, src[g].data.ptr + 4 * a,
                                                4 * (b - a), 2, s.ptr)
                s.synchronize()
        ths = [threading.Thread(target=work, args=(g,)) for g in range(k)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        t3 = time.perf_counter()
        cp.cuda.runtime.hostUnregister(final.ctypes.data)
        t4 = time.perf_counter()
        assert final[-1] == n - 1 and final[per - 1] == per - 1
        return {"fault_s": t1 - t0, "register_s": t2 - t1, "dma_s": t3 - t2,
                "unregister_s": t4 - t3, "registered_total_s": t4 - t0}

    print(f"{total / 1e9:.2f} GB, {n_gpus} GPUs", flush=True)
    for rep in range(2):
        for k in range(1, n_gpus + 1):
            r = {**staged(k), **registered(k)}
            print(f"{k} GPU(s): " + " ".join(f"{key} {v:.3f}" for key, v in r.items()),
                  flush=True)


if __name__ == "__main__":
    main()

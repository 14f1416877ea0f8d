"""Local Dask clusters for skyjoin: CPU worker processes, or one worker per GPU.

A worker runs one partition at a time (one Dask thread) and gives that
partition all of its cores through Numba's threads, or its whole GPU.
"""

from __future__ import annotations

import os

__all__ = ["local_cluster", "local_gpu_cluster", "visible_gpus"]


def local_cluster(n_workers: int, *, numba_threads: int | None = None, processes: bool = True,
                  dashboard_address: str = ":0", **kwargs):
    """A ``distributed.LocalCluster`` of CPU workers that share the cores.

    Parameters
    ----------
    n_workers : int
        Worker processes.
    numba_threads : int, optional
        Numba threads per worker (``NUMBA_NUM_THREADS``); default: the cores
        divided among the workers.
    processes : bool
        Worker processes (True) or threads of this process.
    dashboard_address : str
        Where the dashboard listens (":0" picks a free port).
    **kwargs
        Passed to ``LocalCluster``.

    Returns
    -------
    distributed.LocalCluster

    Raises
    ------
    ValueError
        n_workers < 1.

    Examples
    --------
    >>> from distributed import Client
    >>> with local_cluster(2) as cluster, Client(cluster) as client:  # doctest: +SKIP
    ...     print(client.dashboard_link)
    """
    from distributed import LocalCluster

    if isinstance(n_workers, bool) or int(n_workers) < 1:
        raise ValueError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    n_workers = int(n_workers)
    if numba_threads is None:
        numba_threads = max(1, (os.cpu_count() or 1) // n_workers)
    env = dict(kwargs.pop("env", {}) or {})
    env.setdefault("NUMBA_NUM_THREADS", str(int(numba_threads)))
    if processes:
        kwargs["env"] = env
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                        dashboard_address=dashboard_address, **kwargs)


def visible_gpus() -> list[str]:
    """The GPU ids this process may use (``CUDA_VISIBLE_DEVICES``, else all CuPy sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() != "":
        return [g.strip() for g in env.split(",") if g.strip()]
    from .._device import _probe_gpu

    ok, _ = _probe_gpu()
    if not ok:
        return []
    import cupy

    return [str(k) for k in range(cupy.cuda.runtime.getDeviceCount())]


def local_gpu_cluster(n_gpus: int | None = None, *, dashboard_address: str = ":0",
                      numba_threads: int | None = None):
    """One Dask worker per GPU of this host, each seeing only its own GPU.

    Uses dask-cuda's ``LocalCUDACluster`` when it is installed; otherwise a
    ``SpecCluster`` of nannies, each with its own ``CUDA_VISIBLE_DEVICES``.
    Every worker has one Dask thread and ``SKYJOIN_DEVICE=gpu``, so the
    operators' ``device=None`` means the GPU there.

    Parameters
    ----------
    n_gpus : int, optional
        Number of GPUs (workers) to use; default: every visible GPU.
    dashboard_address : str
    numba_threads : int, optional
        Numba threads per worker for its CPU-side work (default: the cores
        divided among the workers).

    Returns
    -------
    distributed.deploy.Cluster

    Raises
    ------
    skyjoin.GPUUnavailableError
        No GPU is visible, or fewer than ``n_gpus``.
    """
    from .._device import GPUUnavailableError

    gpus = visible_gpus()
    if not gpus:
        raise GPUUnavailableError("local_gpu_cluster: no GPU is visible to this process")
    if n_gpus is None:
        n_gpus = len(gpus)
    if isinstance(n_gpus, bool) or int(n_gpus) < 1 or int(n_gpus) > len(gpus):
        raise GPUUnavailableError(f"asked for {n_gpus!r} GPUs but {len(gpus)} are visible")
    gpus = gpus[:int(n_gpus)]
    if numba_threads is None:
        numba_threads = max(1, (os.cpu_count() or 1) // len(gpus))
    env = {"SKYJOIN_DEVICE": "gpu", "NUMBA_NUM_THREADS": str(int(numba_threads))}
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus), threads_per_worker=1,
                                dashboard_address=dashboard_address, env=env)
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        f"gpu-{g}": {"cls": Nanny,
                     "options": {"nthreads": 1, "env": dict(env, CUDA_VISIBLE_DEVICES=g)}}
        for g in gpus
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": dashboard_address}}
    return SpecCluster(workers=workers, scheduler=scheduler, name="skyjoin-gpus")

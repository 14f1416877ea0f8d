"""Dask workers for skyjoin: local clusters of CPU worker processes, or one worker per GPU.

A worker runs one partition at a time (one Dask thread) and gives that
partition all of its cores through Numba's threads, or its whole GPU.

The GPU workers of one host are by default threads of the client's process,
each bound to its own GPU (its Dask thread makes that GPU current once, when
it starts).  The host's GPUs then share one address space with the driver:
the points go to the workers and the results come back by reference, where
worker processes would serialise them through a socket: O(pairs) bytes
copied twice (docs/decisions/distributed-partitions.md has the
measurement).  Worker processes (``processes=True``) isolate each GPU in
its own process instead.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numba

if TYPE_CHECKING:
    import distributed
    from distributed.deploy import SpecCluster

from .._core.device import gpu_available
from ..errors import GPUUnavailableError

__all__ = ["local_cluster", "local_gpu_cluster", "visible_gpus"]


def local_cluster(n_workers: int, *, numba_threads: int | None = None, processes: bool = True,
                  dashboard_address: str = ":0", **kwargs: Any) -> distributed.LocalCluster:
    """A ``distributed.LocalCluster`` of CPU workers that share the cores.

    Parameters
    ----------
    n_workers : int
        Worker processes.
    numba_threads : int, optional
        Numba threads per worker, at most Numba's thread pool
        (``numba.config.NUMBA_NUM_THREADS``, which the worker processes
        inherit); default: the pool divided among the workers.  Each worker
        sets it with ``numba.set_num_threads`` on its threads when it starts
        (:class:`~skyjoin.distributed.numba_threads.NumbaThreads` says why
        not through ``NUMBA_NUM_THREADS``).
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
        n_workers < 1; numba_threads outside [1, Numba's pool];
        ``NUMBA_NUM_THREADS`` in ``env`` (pass numba_threads instead).

    Examples
    --------
    >>> from distributed import Client
    >>> with local_cluster(2) as cluster, Client(cluster) as client:  # doctest: +SKIP
    ...     print(client.dashboard_link)
    """
    from distributed import LocalCluster

    from .numba_threads import NumbaThreads

    if isinstance(n_workers, bool) or int(n_workers) < 1:
        raise ValueError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    n_workers = int(n_workers)
    numba_threads = numba_threads_per_worker(numba_threads, n_workers)
    env = dict(kwargs.pop("env", {}) or {})
    if "NUMBA_NUM_THREADS" in env:
        raise ValueError("local_cluster: NUMBA_NUM_THREADS in env would reach the workers after "
                         "they import Numba, which then refuses to compile; pass "
                         "numba_threads= instead")
    kwargs["plugins"] = tuple(kwargs.pop("plugins", ()) or ()) + (NumbaThreads(numba_threads),)
    if processes:
        kwargs["env"] = env
    else:
        # thread workers share this process's memory with the caller: Dask's
        # per-worker limit would pause them for the caller's own arrays
        kwargs.setdefault("memory_limit", 0)
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                        dashboard_address=dashboard_address, **kwargs)


def numba_threads_per_worker(numba_threads: int | None, n_workers: int) -> int:
    """The Numba thread count of each of ``n_workers`` workers of this host, checked.

    Parameters
    ----------
    numba_threads : int, optional
        The count asked for; default: Numba's thread pool
        (``numba.config.NUMBA_NUM_THREADS``, what worker processes inherit)
        divided among the workers, at least 1.
    n_workers : int

    Returns
    -------
    int

    Raises
    ------
    ValueError
        numba_threads is not an integer in [1, Numba's pool]: a thread
        cannot use more Numba threads than the pool has.
    """
    pool = int(numba.config.NUMBA_NUM_THREADS)
    if numba_threads is None:
        return max(1, pool // max(1, int(n_workers)))
    if isinstance(numba_threads, bool) or not 1 <= int(numba_threads) <= pool:
        raise ValueError(f"numba_threads must be an integer in [1, {pool}] (Numba's thread pool, "
                         f"NUMBA_NUM_THREADS), got {numba_threads!r}")
    return int(numba_threads)


def visible_gpus() -> list[str]:
    """The GPU ids this process may use (``CUDA_VISIBLE_DEVICES``, else all CuPy sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() != "":
        return [g.strip() for g in env.split(",") if g.strip()]
    if not gpu_available():
        return []
    import cupy

    return [str(k) for k in range(cupy.cuda.runtime.getDeviceCount())]


def _bind_thread(gpu: int, numba_threads: int) -> None:
    """Make ``gpu`` the current device of this (worker) thread; set its Numba threads."""
    import cupy

    cupy.cuda.Device(gpu).use()
    numba.set_num_threads(numba_threads)


def thread_cluster(workers, bind, *, dashboard_address: str = ":0", name: str = "skyjoin"):
    """A cluster of worker threads in this process, each running its tasks on one
    thread set up by ``bind(*args)`` when it starts.

    Parameters
    ----------
    workers : list of (name, args)
        One worker per entry; ``bind(*args)`` runs on its task thread first
        (the GPU workers make their GPU current there).
    bind : callable
    dashboard_address : str
    name : str

    Returns
    -------
    distributed.SpecCluster
        Scheduler and workers talk through Dask's in-process transport, so
        data moves between them and the client by reference, never
        serialised; no worker has a memory limit, since the process's memory
        is the caller's too (a per-worker limit would pause the workers for
        the caller's own arrays).
    """
    from distributed import Scheduler, SpecCluster, Worker

    scheduler = {"cls": Scheduler, "options": {"protocol": "inproc://",
                                               "dashboard_address": dashboard_address}}
    specs = {
        wname: {"cls": Worker, "options": {
            "nthreads": 1, "protocol": "inproc://", "memory_limit": 0,
            "executor": ThreadPoolExecutor(1, thread_name_prefix=f"skyjoin-{wname}",
                                           initializer=bind, initargs=tuple(args))}}
        for wname, args in workers
    }
    return SpecCluster(workers=specs, scheduler=scheduler, name=name)


def local_gpu_cluster(n_gpus: int | None = None, *, processes: bool = False,
                      dashboard_address: str = ":0",
                      numba_threads: int | None = None) -> SpecCluster:
    """One Dask worker per GPU of this host.

    With ``processes=False`` (the default) the workers are threads of this
    process, worker k running its tasks on one thread bound to GPU k (see
    the module docstring for why).  With ``processes=True`` each worker is a
    process that sees only its own GPU: dask-cuda's ``LocalCUDACluster``
    when it is installed, otherwise a ``SpecCluster`` of nannies, each with
    its own ``CUDA_VISIBLE_DEVICES`` and ``SKYJOIN_DEVICE=gpu``.  Every
    worker has one Dask thread.

    Parameters
    ----------
    n_gpus : int, optional
        Number of GPUs (workers) to use; default: every visible GPU.
    processes : bool
        Worker processes instead of worker threads of this process.
    dashboard_address : str
    numba_threads : int, optional
        Numba threads per worker for its CPU-side work, at most Numba's
        thread pool (default: the pool divided among the workers).  Not
        applied to dask-cuda's workers, whose ``env`` and plugins dask-cuda
        sets itself.

    Returns
    -------
    distributed.deploy.Cluster

    Raises
    ------
    skyjoin.GPUUnavailableError
        No GPU is visible, or fewer than ``n_gpus``.
    ValueError
        numba_threads outside [1, Numba's pool].
    """
    gpus = visible_gpus()
    if not gpus:
        raise GPUUnavailableError("local_gpu_cluster: no GPU is visible to this process")
    if n_gpus is None:
        n_gpus = len(gpus)
    if isinstance(n_gpus, bool) or int(n_gpus) < 1 or int(n_gpus) > len(gpus):
        raise GPUUnavailableError(f"asked for {n_gpus!r} GPUs but {len(gpus)} are visible")
    gpus = gpus[:int(n_gpus)]
    numba_threads = numba_threads_per_worker(numba_threads, len(gpus))
    if not processes:
        # CUDA_VISIBLE_DEVICES (if set) already renumbers the GPUs 0..k-1 here
        return thread_cluster([(f"gpu-{g}", (k, numba_threads)) for k, g in enumerate(gpus)],
                              _bind_thread, dashboard_address=dashboard_address,
                              name="skyjoin-gpus")
    from .numba_threads import NumbaThreads

    env = {"SKYJOIN_DEVICE": "gpu"}
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus), threads_per_worker=1,
                                dashboard_address=dashboard_address, env=env)
    from distributed import Nanny, Scheduler, SpecCluster

    scheduler = {"cls": Scheduler, "options": {"dashboard_address": dashboard_address}}
    workers = {
        f"gpu-{g}": {"cls": Nanny,
                     "options": {"nthreads": 1, "env": dict(env, CUDA_VISIBLE_DEVICES=g),
                                 "plugins": (NumbaThreads(numba_threads),)}}
        for g in gpus
    }
    return SpecCluster(workers=workers, scheduler=scheduler, name="skyjoin-gpus")

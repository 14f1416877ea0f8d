"""skyjoin on a Dask cluster: the self-join, DBSCAN and the skyline.

The operators take a ``client=`` (a ``distributed.Client``; default: the
current one) and NumPy arrays, Dask arrays, Dask data frames, or a path to
Parquet/CSV files that the workers read themselves.  Their results are
identical to the single-machine operators'.

>>> import numpy as np, skyjoin.distributed as sd
>>> from distributed import Client, LocalCluster
>>> with LocalCluster(n_workers=2, processes=False) as cl, Client(cl) as client:
...     X = np.random.default_rng(0).uniform(0, 10, (2000, 2))
...     nt = sd.self_join(X, 0.5, client=client, device="cpu")
...     labels = sd.DBSCAN(eps=0.5, min_samples=5, client=client, device="cpu").fit(X).labels_
...     front = sd.skyline(X, client=client)

Several GPUs of one host: one worker per GPU (:func:`local_gpu_cluster`),
each worker running the GPU engine (``device="gpu"``).  Each GPU receives
only its partition and halo; results that need not meet on the driver
stay partitioned: ``out="dir/"`` (a Parquet file per partition, written
by its worker) and ``on_device=True`` (each partition's table on its GPU,
as a ``dask.bag.Bag`` of :class:`OwnedRows`).
"""

from .join import PartitionedPairs, self_join
from .owned_rows import OwnedRows
from .dbscan import DBSCAN
from .skyline import skyline
from .workers import local_cluster, local_gpu_cluster

__all__ = ["self_join", "DBSCAN", "skyline", "PartitionedPairs", "OwnedRows", "local_cluster",
           "local_gpu_cluster"]

"""The GPU engine of the epsilon join (CuPy and CUDA C++), one module per stage.

* ``pipeline``: the entry (``run``, ``chunk_stream``, ``count_rows`` /
  ``fill_rows``): engine, plan, count, scan, result size, batches;
* ``batches``: the batched fill on three streams, copied to the host while
  the GPU fills the next batch;
* ``engine``: ``GpuEngine``, the state of one join on the device: grids
  (``skyjoin.index.grid_gpu``), candidate ranges, the count and fill
  kernels, row sorts;
* ``kernels/join.cu``: the CUDA C++ kernels (GPUCALCGLOBAL, Gowanlock &
  Karsin 2018 §IV-E; UNICOMP §V-B; LID-UNICOMP, Gallet & Gowanlock 2019
  §III-B; the SORTBYWL and WORKQUEUE schedules, §III-C, §III-D);
* ``unit_vectors``: haversine's range check and unit vectors on the GPU,
  for DBSCAN's GPU grid path.

Entered only through ``skyjoin.simjoin.engine`` (``unit_vectors`` through
``skyjoin.simjoin.metric_join``).
"""

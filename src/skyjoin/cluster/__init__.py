"""DBSCAN on the epsilon join: api -> plan -> engine -> result.

Modules (imported lazily by ``skyjoin``; none is imported here):

* ``estimator``            ``DBSCAN`` (scikit-learn estimator) and ``dbscan``;
* ``plan``                 ``DBSCANPlan`` and the one path rule (``plan_fit``, ``plan_sweep``);
* ``engine``               the one entry into the paths of a clustering (conditioned points, a plan);
* ``hybrid``               HYBRID-DBSCAN (Gowanlock et al. 2019, §3): cell order, table T;
* ``core_points``          core points: counts, or exact weighted sums;
* ``union_find``           the CPU union-find, clusters and border points from T;
* ``grid_cpu``             one clustering on a fine grid, no table (CPU);
* ``grid_gpu``             the same on the GPU (CuPy + CUDA C++);
* ``table_gpu``            DBSCAN from T kept on the GPU (CuPy + CUDA C++);
* ``sweep``                ``dbscan_sweep``: many clusterings, reuse and pipelining (§7.5-7.6);
* ``response_time_model``  ``dbscan_model``: the response-time model (§7.7).
"""

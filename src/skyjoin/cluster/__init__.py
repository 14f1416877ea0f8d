"""DBSCAN on the epsilon join: estimator, point assignment, sweeps, response-time model.

Modules (imported lazily by ``skyjoin``; none is imported here):

* ``estimator``  ``DBSCAN`` (scikit-learn estimator) and ``dbscan``; the
  HYBRID-DBSCAN driver and the rule choosing GPU-only or hybrid;
* ``assign``     point assignment over a neighbour table (Numba);
* ``grid_dbscan`` single CPU runs on a fine grid, without a neighbour table;
* ``sweep``      ``dbscan_sweep``: the multi-clustering pipeline with table reuse;
* ``model``      ``dbscan_model``: the response-time model;
* ``gpu``        DBSCAN entirely on the GPU (CuPy + CUDA C++);
"""

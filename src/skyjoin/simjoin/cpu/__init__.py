"""The CPU engine of the epsilon join (Numba), one module per stage.

* ``engine``: the entry (``run``, ``run_chunks``: grids, plan, execution)
  and the passes: count, scan, fill, mirror, sort;
* ``cells``: the adjacent cells of a query cell (Gowanlock & Karsin 2018,
  §IV-D);
* ``point_scan``: the point-by-point scan of sparse cells, with pruning;
* ``full_pattern``: every adjacent cell (§IV-E), tiled for dense cells;
* ``unicomp``: UNICOMP's forward half (§V-B);
* ``lid_unicomp``: LID-UNICOMP's forward half (Gallet & Gowanlock 2019,
  §III-B);
* ``mirror``: both halves of a symmetric pattern's table;
* ``_simd``: explicit vector instructions of the tiled path.

Entered only through ``skyjoin.simjoin.engine``.
"""

"""The epsilon (distance similarity) join: api -> plan -> engine -> result.

Modules (none is imported here):

* ``api``       ``self_join``, ``join``, ``self_join_chunks``: check, condition, plan, run;
* ``plan``      ``JoinPlan`` and every routing rule (``request``, ``plan_cpu``, ``plan_gpu``,
                batches, ``result_size_guard``);
* ``engine``    the one entry into the engines (``run``, ``run_chunks``);
* ``cpu``       the CPU engine (Numba), a module per stage;
* ``gpu``       the GPU engine (CuPy and CUDA C++), a module per stage;
* ``result``    ``NeighborTable``, ``PairChunk``, ``PairStream``;
* ``csr``, ``distances``, ``schedule``: shared by the engines and the writers.
"""

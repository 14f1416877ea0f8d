"""``skyjoin.dbscan_sweep``: many (eps, min_samples) clusterings with reuse and pipelining.

* ``api``          ``dbscan_sweep`` and ``SweepResult``; runs the plan (``..plan.plan_sweep``);
* ``pipeline``     the two-stage pipeline of §7.5 and equation (2);
* ``table``        the table path: every min_samples from T, incrementally (§7.6);
* ``grid_levels``  the grid path's first stage: each point's level (no T);
* ``grid_links``   the grid path's second stage: cell links, union-find, labels;
* ``grid_reach``   the grid path's border reaches, beside the union-find.
"""

from .api import SweepResult, dbscan_sweep
from .pipeline import ideal_pipeline_time, pipeline_makespan
from .table import add_core_level

__all__ = ["SweepResult", "dbscan_sweep", "add_core_level", "ideal_pipeline_time",
           "pipeline_makespan"]

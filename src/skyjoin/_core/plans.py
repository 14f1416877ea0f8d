"""How an operator reports the plan it ran, to whoever asked for it.

Every public operator builds one frozen plan at its boundary (the join's
``JoinPlan``, DBSCAN's ``DBSCANPlan``, the skyline's ``SkylinePlan``) and
passes it to ``report``, which logs its one-line ``describe()`` on the
"skyjoin" logger (shown by the command line's ``-v``) and hands the plan to
every ``recording()`` block active in the calling context.  A caller that
must say what ran (the command line prints the device and path) reads the
plans from there instead of deciding them again.

A plan may be reported twice: once as asked for (a GPU request whose
"auto" choices wait for the grid) and once resolved; ``recording`` keeps
both, in order, and the last one is the plan that ran.

Costs: O(1) per report.  Contexts (``contextvars``) keep concurrent
threads' recordings apart.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

__all__ = ["report", "recording"]

_log = logging.getLogger("skyjoin")
_active: contextvars.ContextVar[tuple[list[Any], ...]] = contextvars.ContextVar(
    "skyjoin_plan_recordings", default=())


def report(plan: Any, what: str = "plan") -> Any:
    """Log ``plan.describe()`` at debug level and hand the plan to every active
    ``recording()``; returns the plan."""
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s: %s", what, plan.describe())
    for plans in _active.get():
        plans.append(plan)
    return plan


@contextlib.contextmanager
def recording() -> Iterator[list[Any]]:
    """Collect the plans that operators report inside the block, in order.

    >>> from types import SimpleNamespace
    >>> with recording() as plans:
    ...     _ = report(SimpleNamespace(device="cpu", describe=lambda: "on cpu"))
    >>> plans[-1].device
    'cpu'
    """
    plans: list[Any] = []
    token = _active.set(_active.get() + (plans,))
    try:
        yield plans
    finally:
        _active.reset(token)

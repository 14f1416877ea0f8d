"""``skyjoin.dbscan_model``: the response-time model of HYBRID-DBSCAN (§7.7), in d dimensions.

The paper observes that the mean number of neighbours grows linearly with
the area of the eps-disc (Fig. 5), so the work, and the time beyond a fixed
overhead theta, scales with that area (equation 3)::

    T(eps) = theta + pi eps^2 (T(m) - theta) / a(m),       a(m) = pi m^2

measured from one run at the probe radius m.  In d dimensions the disc is a
d-ball of volume ``V_d(r) = pi^(d/2) / Gamma(d/2 + 1) r^d``, so::

    T(eps) = theta + (T(m) - theta) V_d(eps) / V_d(m) = theta + (T(m) - theta) (eps / m)^d

and the mean number of neighbours is ``v(eps) = alpha V_d(eps)`` with
``alpha = v(m) / V_d(m)`` (points per unit volume around a point).

theta is the part of the run that does not grow with eps: the paper's is
the pinned-memory allocation; ours is the spatial ordering of the points
and the join's grid construction, both measured in the probe run.  Unlike
the paper, which assumes T_CPU = T_GPU, the table and the assignment phases
are each measured, and each scaled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .._core.device import resolve_device
from .._core.validate import check_eps, check_min_samples, check_points, check_precision
from .hybrid import hybrid_dbscan

__all__ = ["ResponseTimeModel", "dbscan_model", "ball_volume"]


def ball_volume(r: ArrayLike, d: int) -> np.ndarray:
    """Volume of the d-ball of radius r (the paper's a(eps) = pi eps^2 for d = 2)."""
    return math.pi ** (d / 2) / math.gamma(d / 2 + 1) * np.asarray(r, dtype=np.float64) ** d


@dataclass
class ResponseTimeModel:
    """Response time of HYBRID-DBSCAN as a function of eps, from one probe run (§7.7).

    Attributes
    ----------
    d : int
        Dimension of the data.
    n : int
        Number of points.
    probe_eps : float
        The paper's m^eps.
    theta : float
        Seconds that do not scale with eps (ordering + grid).
    table_time, assign_time : float
        Seconds of the probe's table and assignment phases (beyond theta).
    probe_time : float
        Total seconds of the probe run, T(m^eps).
    mean_neighbours : float
        v(m^eps): mean neighbourhood size (itself excluded) at the probe.
    alpha : float
        v(m) / V_d(m): neighbours per unit volume.
    """

    d: int
    n: int
    probe_eps: float
    theta: float
    table_time: float
    assign_time: float
    probe_time: float
    mean_neighbours: float
    alpha: float

    def scale(self, eps: ArrayLike) -> np.ndarray:
        """V_d(eps) / V_d(m^eps): how much more work than the probe."""
        return (np.asarray(eps, dtype=np.float64) / self.probe_eps) ** self.d

    def predict(self, eps: ArrayLike) -> float | np.ndarray:
        """Predicted seconds of one HYBRID-DBSCAN run at eps (equation 3, d-ball).

        Parameters
        ----------
        eps : float or array_like of float

        Returns
        -------
        float or ndarray
        """
        t = self.theta + (self.table_time + self.assign_time) * self.scale(eps)
        return float(t) if np.ndim(t) == 0 else t

    def predict_neighbours(self, eps: ArrayLike) -> float | np.ndarray:
        """Predicted mean neighbourhood size v(eps) = alpha V_d(eps)."""
        v = self.alpha * ball_volume(eps, self.d)
        return float(v) if np.ndim(v) == 0 else v

    def predict_pairs(self, eps: ArrayLike) -> float | np.ndarray:
        """Predicted size of the neighbour table at eps (pairs, self excluded)."""
        return self.predict_neighbours(eps) * self.n


def dbscan_model(X: ArrayLike, probe_eps: float, *, min_samples: int = 5,
                 device: str | None = None, precision: str = "float64") -> ResponseTimeModel:
    """Measure one HYBRID-DBSCAN run at probe_eps and model the time of other eps (§7.7).

    Parameters
    ----------
    X : array_like, shape (n, d)
    probe_eps : float
        The radius of the measured run (the paper's m^eps).  Pick one in the
        middle or upper part of the range you will predict: small radii
        overweight fixed costs (the paper's Fig. 6).
    min_samples : int, default 5
        Does not change the time much (the paper's Fig. 1).
    device : {"auto", "cpu", "gpu"} or None, default None
        Device of the join (None: the ``SKYJOIN_DEVICE`` environment
        variable, else "auto").
    precision : {"float64", "float32"}

    Returns
    -------
    ResponseTimeModel
        With ``predict(eps)`` (seconds) and ``predict_neighbours(eps)``.

    Raises
    ------
    ValueError
        Bad points, probe_eps <= 0, min_samples < 1.

    See Also
    --------
    skyjoin.dbscan_sweep : runs the eps the model predicts.

    Notes
    -----
    One HYBRID-DBSCAN run at probe_eps (``hybrid.hybrid_dbscan``): the
    join's cost plus O(pairs) to assign; each prediction is O(1).

    References
    ----------
    M. Gowanlock, C. M. Rude, D. M. Blair, J. D. Li, V. Pankratius, "A Hybrid
    Approach for Optimizing Parallel Clustering Throughput using the GPU",
    IEEE TPDS 30(4), 2019, §7.7.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.random.default_rng(0).uniform(0, 100, (20000, 2))
    >>> model = sj.dbscan_model(X, probe_eps=1.0, device="cpu")
    >>> t = model.predict(0.5)        # seconds, predicted
    >>> round(model.predict_neighbours(1.0) / model.predict_neighbours(0.5), 6)
    4.0
    """
    probe_eps = check_eps(probe_eps)
    min_samples = check_min_samples(min_samples)
    precision = check_precision(precision)
    dev = resolve_device(device)
    X = check_points(X, name="X")
    n, d = X.shape
    if n == 0:
        raise ValueError("X is empty: there is nothing to measure")
    tm: dict = {}
    hybrid_dbscan(X, probe_eps, min_samples, device=dev, precision=precision, timings=tm)
    probe_time = tm["order"] + tm["table"] + tm["assign"]
    grid_s = float(tm.get("join_grid", 0.0))
    theta = tm["order"] + grid_s
    v = tm["pairs"] / n
    return ResponseTimeModel(d=d, n=n, probe_eps=probe_eps, theta=theta,
                             table_time=max(0.0, tm["table"] - grid_s), assign_time=tm["assign"],
                             probe_time=probe_time, mean_neighbours=v,
                             alpha=v / float(ball_volume(probe_eps, d)))

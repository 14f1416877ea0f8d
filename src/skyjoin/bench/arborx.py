"""ArborX's GPU DBSCAN beside ours: the anchor of the GPU DBSCAN cases.

ArborX's FDBSCAN and FDBSCAN-DenseBox (Prokopenko, Lebrun-Grandié and
Arndt, ICPP 2023) are the fastest public GPU DBSCAN for low dimensions.
ArborX is not part of skyjoin: ``scripts/build-arborx`` builds it, with
Kokkos, from source trees fetched beside the project (the recipe of the
shared anchors' ``arborx`` folder), and the project's driver
(``scripts/arborx-driver``).  The driver, ``dbscan_driver FILE N EPS
MINPTS REPS``, reads raw float32 points (n x 3) and times each
implementation REPS times in each of two residences (:data:`RESIDENCES`):
the points already on the GPU and the labels left there (the
``ArborX::dbscan`` call alone), and host to host (the device allocation,
the copy in, the call and the labels' copy out).  It prints one line a
run (:data:`LINE`), with the cluster and noise counts of that run's
labels.

:func:`cases` are the GPU cases of ``skyjoin bench dbscan``: the clustered
3-D set of the comparison (:func:`clustered`, 37M points, at eps 0.1 with
min_samples 2 and at eps 0.25 with 10), a 2-D set of 10M blobs (the
driver's points are 3-D: a zero third coordinate leaves every distance as
it is), and a dense set whose eps-cells mostly hold min_samples points or more,
where DenseBox's single boxes should pay.  Ours runs twice: like for like
with ArborX's driver (the points already on the GPU, the labels left there,
``on_device=True``), and host to host (``DBSCAN(device="gpu").fit`` of host
points, labels on the host), each beside ArborX's run of the same
residence (``harness.ratios`` pairs rows of one residence).  Ours is
timed as the driver times ArborX's call: the estimator's making and its
fit alone (the stream synchronised before and after where the points are
on the GPU), the labels' counts taken after the clock stops.  Each case
compares the cluster and noise counts of every implementation with ours
(:func:`count_differences`).

``SKYJOIN_ARBORX_DRIVER`` names the driver; without it (or where it is
not a program) the ArborX rows are skipped, saying how to build it.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time

import numpy as np

import skyjoin as sj

from .. import datasets
from .._core.device import cupy
from .harness import Case, Impl, data_case, label_counts, size_tag

__all__ = ["DRIVER_ENV", "IMPLEMENTATIONS", "RESIDENCES", "LINE", "driver", "driver_points",
           "run_driver", "clustered", "cases", "count_differences"]

DRIVER_ENV = "SKYJOIN_ARBORX_DRIVER"
#: the driver's names of ArborX's two implementations, in its order
IMPLEMENTATIONS = ("FDBSCAN-DenseBox", "FDBSCAN")
#: the driver's residences, and the rows' words for them
RESIDENCES = {"device": "points on GPU", "host": "host to host"}
#: one line of the driver's output: a run, and the counts of its labels
LINE = re.compile(r"^arborx (?P<impl>\S+) (?P<residence>device|host) eps (?P<eps>\S+) "
                  r"minpts (?P<minpts>\d+): (?P<seconds>[0-9.eE+-]+) s\s+noise (?P<noise>\d+)"
                  r"\s+clusters (?P<clusters>\d+)")
#: runs of each implementation inside one driver call (the fastest counts)
DRIVER_REPS = 3


def driver() -> str | None:
    """The driver named by ``SKYJOIN_ARBORX_DRIVER`` if it is an executable
    file, else None."""
    path = os.environ.get(DRIVER_ENV)
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def driver_points(X) -> np.ndarray:
    """X as the driver reads it: C-contiguous float32, n x 3.  2-D points get
    a zero third coordinate (every distance unchanged); other
    dimensionalities are refused (the driver is built for 3-D)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] not in (2, 3):
        raise ValueError(f"the ArborX driver takes 2-D or 3-D points, got shape {X.shape}")
    out = np.zeros((X.shape[0], 3), dtype=np.float32)
    out[:, :X.shape[1]] = X
    return out


def run_driver(path: str, X, eps: float, min_samples: int, reps: int = DRIVER_REPS,
               timeout: float = 600.0) -> dict:
    """Run the driver on X: for each (implementation, residence) its fastest
    run's seconds, every run's seconds, and the cluster and noise counts of
    its first run.

    The points go to a temporary raw file (removed after).  A driver that
    fails, whose output lacks runs, or whose runs of one implementation
    disagree on the counts, raises RuntimeError with its output's tail.
    Cost: the driver's, plus writing 12 bytes a point.
    """
    P = driver_points(X)
    with tempfile.TemporaryDirectory(prefix="skyjoin-arborx-") as tmp:
        raw = os.path.join(tmp, "points.f32")
        P.tofile(raw)
        proc = subprocess.run([path, raw, str(len(P)), repr(float(eps)), str(int(min_samples)),
                               str(int(reps))], capture_output=True, text=True, timeout=timeout)
    tail = (proc.stdout + proc.stderr)[-2000:]
    if proc.returncode != 0:
        raise RuntimeError(f"the ArborX driver failed (status {proc.returncode}): {tail}")
    out: dict = {}
    for line in proc.stdout.splitlines():
        m = LINE.match(line.strip())
        if m is None:
            continue
        counts = (int(m["clusters"]), int(m["noise"]))
        got = out.setdefault((m["impl"], m["residence"]),
                             {"times": [], "clusters": counts[0], "noise": counts[1]})
        if counts != (got["clusters"], got["noise"]):
            raise RuntimeError(f"the ArborX driver's runs of {m['impl']} disagree: {counts} "
                               f"clusters and noise after {(got['clusters'], got['noise'])}: "
                               f"{tail}")
        got["times"].append(float(m["seconds"]))
    missing = [f"{i} ({r})" for i in IMPLEMENTATIONS for r in RESIDENCES
               if len(out.get((i, r), {}).get("times", ())) < reps]
    if missing:
        raise RuntimeError(f"the ArborX driver printed no {reps} runs of {', '.join(missing)}: "
                           f"{tail}")
    for got in out.values():
        got["seconds"] = min(got["times"])
    return out


def clustered(n: int, seed: int = 11) -> np.ndarray:
    """The comparison's clustered 3-D set, float32: 20,000 Gaussian clusters
    of widths 0.2-2 in [0, 256]^3, their first fifth of points replaced by
    uniform ones.  O(n)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 256, (20000, 3))
    lab = rng.integers(0, 20000, n)
    X = centres[lab] + rng.normal(0, 1, (n, 3)) * rng.uniform(0.2, 2.0, 20000)[lab, None]
    X[: n // 5] = rng.uniform(0, 256, (n // 5, 3))
    return X.astype(np.float32)


def _ours(get, eps, m):
    """Ours host to host: ``DBSCAN(device="gpu").fit`` of host points, the
    labels on the host; the estimator's making and fit timed alone, like
    the driver's call (the counts are taken after the clock stops)."""
    def fn():
        X = get()
        t0 = time.perf_counter()
        est = sj.DBSCAN(eps=eps, min_samples=m, device="gpu",
                        precision="float32" if X.dtype == np.float32 else "float64")
        labels = est.fit(X).labels_
        seconds = time.perf_counter() - t0
        return dict(label_counts(labels), seconds=seconds, path=est.path_,
                    residence=RESIDENCES["host"])

    return Impl("skyjoin DBSCAN (gpu, host to host)", fn, ours=True, self_timed=True)


def _ours_on_device(get, eps, m):
    """Ours like ArborX's driver times it: the points already on the GPU (one
    upload, untimed), the labels left there (``on_device=True``); the
    estimator's making and fit timed alone, the stream synchronised before
    and after (the driver's fences), the counts taken after."""
    held = {}

    def fn():
        cp = cupy()
        if "X" not in held:
            held["X"] = cp.asarray(get())
        X = held["X"]
        stream = cp.cuda.get_current_stream()
        stream.synchronize()
        t0 = time.perf_counter()
        est = sj.DBSCAN(eps=eps, min_samples=m, device="gpu", on_device=True,
                        precision="float32" if X.dtype == np.float32 else "float64")
        labels = est.fit(X).labels_
        stream.synchronize()
        seconds = time.perf_counter() - t0
        return dict(label_counts(labels), seconds=seconds, path=est.path_,
                    residence=RESIDENCES["device"])

    return Impl("skyjoin DBSCAN (points on GPU)", fn, ours=True, self_timed=True)


def _arborx(get, eps, m, impl, residence, path, runs=None):
    """ArborX's ``impl`` in ``residence`` (a key of :data:`RESIDENCES`).  The
    rows of one case share ``runs`` (a dict): one driver call times them all."""
    runs = {} if runs is None else runs

    def fn():
        if "out" not in runs:
            runs["out"] = run_driver(path, get(), eps, m)
        got = runs["out"][(impl, residence)]
        return {"seconds": got["seconds"], "size": got["clusters"], "noise": got["noise"],
                "runs_s": got["times"], "residence": RESIDENCES[residence]}

    skip = None if path else (f"the ArborX driver is not built (scripts/build-arborx, then "
                              f"{DRIVER_ENV}=.../dbscan_driver)")
    # the driver warms up and times DRIVER_REPS runs itself: one call, no warm-up call
    return Impl(f"ArborX {impl} ({RESIDENCES[residence]})", fn, repeat=1, skip_reason=skip,
                warmup_fn=lambda: None, self_timed=True)


#: (name, data, n, eps, min_samples): the comparison's cases
_CASES = [("Clustered3D", "clustered", 37_000_000, 0.1, 2),
          ("Clustered3D", "clustered", 37_000_000, 0.25, 10),
          ("Blobs2D", "blobs", 10_000_000, 0.3, 10),
          ("Dense3D", "dense", 10_000_000, 0.2, 10)]
QUICK_N = 200_000


def _data(kind: str, n: int) -> np.ndarray:
    if kind == "clustered":
        return clustered(n)
    if kind == "blobs":
        return datasets.blobs(n, 2, centers=50, std=1.5, low=0.0, high=100.0, seed=1)
    # dense: uniform in [0, 10]^3 at 10M points: about 15 points a DenseBox cell (side
    # eps / sqrt(3)) at eps 0.2, most cells dense at min_samples 10; 335 neighbours a point
    side = 10.0 * (n / 10_000_000) ** (1 / 3)
    return np.random.default_rng(3).uniform(0, side, (n, 3)).astype(np.float32)


def cases(quick: bool = False) -> list[Case]:
    """The GPU cases with ArborX beside ours (``QUICK_N`` points when quick)."""
    path = driver()
    out = []
    for prefix, kind, n_full, eps, m in _CASES:
        n = QUICK_N if quick else n_full

        def impls_of(get, eps=eps, m=m):
            runs: dict = {}
            return [_ours_on_device(get, eps, m), _ours(get, eps, m)] + [
                _arborx(get, eps, m, i, r, path, runs) for r in RESIDENCES
                for i in IMPLEMENTATIONS]

        out.append(data_case(f"{prefix}-{size_tag(n)}-eps{eps:g}-m{m}",
                             {"n": n, "eps": eps, "min_samples": m, "kind": kind,
                              "anchor": "ArborX"},
                             lambda kind=kind, n=n: _data(kind, n), impls_of))
    return out


def count_differences(rows) -> list[str]:
    """One line for each ArborX row, and each of our rows, whose cluster or
    noise counts differ from one of ours in the same case (float32 ties can
    round apart: the line gives both counts, to be explained in the report)."""
    ours: dict = {}
    for r in rows:
        if r.ours and r.size is not None:
            ours.setdefault(r.case, []).append(r)
    lines = []
    for r in rows:
        if r.size is None or r.case not in ours:
            continue
        if not r.ours and not r.impl.startswith("ArborX"):
            continue
        o = ours[r.case][0]
        if r is not o and (r.size, r.extra.get("noise")) != (o.size, o.extra.get("noise")):
            who = f"ours ({o.impl})" if r.ours else "ours"
            lines.append(f"{r.case}: {r.impl} {r.size:,} clusters / {r.extra.get('noise'):,} "
                         f"noise, {who} {o.size:,} / {o.extra.get('noise'):,}")
    return lines

"""Haversine's points on the GPU: their range check and unit vectors, one kernel.

Where the plan makes haversine's unit vectors on the GPU
(``skyjoin.cluster.plan.filter_on_device``: DBSCAN's GPU grid path), the
(latitude, longitude) float64 points are uploaded as they are, 16 bytes a
point, and one thread a point

* tests the range of ``simjoin.metrics.check_metric_points``
  (``|lat| > LAT_LIMIT or |lon| > LON_LIMIT``, the host's comparison), an
  ``atomicMin`` keeping the first row that breaks it, so that the
  ValueError (``metrics.haversine_domain_error``) names the row the host
  check names;
* writes ``(cos lat cos lon, cos lat sin lon, sin lat)``, the host's
  formula (``simjoin.cpu.unit_vectors``), with CUDA's double ``sin`` and
  ``cos`` (at most 2 ulp from the exact value, where the C library's are
  within 1: the CUDA C++ Programming Guide, appendix "Mathematical
  Functions", double precision).  The decision chords of the grid
  (``metrics.decision_radii``) cover functions within about 10 ulp:
  docs/exactness.md, for the derivation.  Compiled with
  ``--fmad=false`` (the formula has no product to fuse with a sum; the
  flag keeps it so).

The unit vectors are the grid's points only: a pair the grid cannot decide
sends the clustering to the table path, whose filter and refine read the
host's unit vectors and the original points (``metric_join.MetricPoints.on_host``).
O(n) on the device, 24 bytes a point out; one 8-byte copy back (the first
row outside), two values more when there is one.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._core.device import cupy
from ..metrics import LAT_LIMIT, LON_LIMIT, haversine_domain_error

__all__ = ["SOURCE", "compiled_module", "unit_vectors"]

_BLOCK = 256

SOURCE = r"""
extern "C" __global__ void haversine_unit_vectors(
        const double* P, long long n, double lat_limit, double lon_limit, double* U,
        unsigned long long* first_outside) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double lat = P[2 * i], lon = P[2 * i + 1];
    if (fabs(lat) > lat_limit || fabs(lon) > lon_limit)
        atomicMin(first_outside, (unsigned long long)i);
    double c = cos(lat);
    U[3 * i] = c * cos(lon);
    U[3 * i + 1] = c * sin(lon);
    U[3 * i + 2] = sin(lat);
}
"""


@functools.lru_cache(maxsize=None)
def compiled_module():
    """The kernel, compiled by NVRTC once per process, without fused multiply-adds."""
    return cupy().RawModule(code=SOURCE, options=("--fmad=false",))


def unit_vectors(P, name: str = "X"):
    """The (n, 3) float64 unit vectors, on the GPU, of the (n, 2) C-contiguous
    float64 device points P, (latitude, longitude) in radians, finite.

    Raises
    ------
    ValueError
        A row outside haversine's domain: the first one, named as
        ``metrics.check_metric_points`` names it, with its values.
    """
    cp = cupy()
    n = int(P.shape[0])
    U = cp.empty((n, 3), dtype=cp.float64)
    if n == 0:
        return U
    first = cp.full(1, n, dtype=cp.uint64)      # n: no row outside
    compiled_module().get_function("haversine_unit_vectors")(
        ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
        (P, np.int64(n), np.float64(LAT_LIMIT), np.float64(LON_LIMIT), U, first))
    row = int(cp.asnumpy(first)[0])
    if row < n:
        raise haversine_domain_error(name, row, cp.asnumpy(P[row]).tolist())
    return U

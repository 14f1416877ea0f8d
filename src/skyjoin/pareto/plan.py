"""The skyline's routing: which algorithm and variant run where (one rule).

``plan_skyline`` is the only place that picks the algorithm for
``algorithm="auto"``, the SkyAlign variant for ``variant=None``, and refuses
combinations a device cannot run.  ``skyjoin.skyline`` checks and
conditions the points, resolves the device once, builds the plan once and
hands it to the one run entry (:func:`skyjoin.pareto.run.run`), which makes
the one device memory check; the engines (``sort2d.skyline_2d``,
``cpu.skyalign_cpu``, ``gpu.skyline_gpu``, ``baselines``) run what it says.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SkylinePlan", "plan_skyline", "ALGORITHMS", "VARIANTS", "CPU_VARIANTS",
           "GPU_VARIANTS", "MAX_SKYALIGN_D"]

ALGORITHMS = ("auto", "skyalign", "sort2d", "bruteforce", "bnl", "sfs", "ggs")
VARIANTS = ("default", "nosync", "levelwise", "sync", "noquart", "padded")
CPU_VARIANTS = ("nosync", "levelwise", "sync", "noquart")
GPU_VARIANTS = ("sync", "nosync", "levelwise", "noquart", "padded")
CPU_ONLY = ("sort2d", "bruteforce", "bnl", "sfs")
MAX_SKYALIGN_D = 64          # SkyAlign's masks are 64-bit words
#: the default SkyAlign variant of each device (docs/decisions/skyline-plan.md)
DEFAULT_VARIANT = {"cpu": "levelwise", "gpu": "padded"}


@dataclass(frozen=True)
class SkylinePlan:
    """Every routing decision of one skyline call.

    Attributes
    ----------
    device : {"cpu", "gpu"}
    algorithm : {"skyalign", "sort2d", "bruteforce", "bnl", "sfs", "ggs"}
    variant : str or None
        The SkyAlign variant (None for the other algorithms).
    distinct : bool
    n, d : int
        The rows, and the columns the engine compares (with diff columns:
        the min / max columns plus the two of the group number).
    residence : {"host", "device"}
        Where the points are: "device" for a GPU (CuPy) array, which only a
        GPU plan takes, and whose result stays on the GPU.
    diff_columns : int
        The diff columns the rows are grouped by (0: none).  Host input
        arrives grouped; device input is grouped on the GPU by the run
        entry, inside its memory handling.
    """

    device: str
    algorithm: str
    variant: str | None
    distinct: bool
    n: int
    d: int
    residence: str = "host"
    diff_columns: int = 0

    def describe(self) -> str:
        """One line for ``-v`` logging."""
        v = f" ({self.variant})" if self.variant else ""
        where = ", points on the GPU" if self.residence == "device" else ""
        groups = f", grouped by {self.diff_columns} diff column(s)" if self.diff_columns else ""
        return (f"skyline of {self.n:,} x {self.d} on the {self.device}: {self.algorithm}{v}"
                + (", distinct" if self.distinct else "") + groups + where)


def check_algorithm(algorithm, variant):
    """Normalise and check the user's ``algorithm`` and ``variant`` (no device needed)."""
    if not isinstance(algorithm, str) or algorithm.lower() not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    algorithm = algorithm.lower()
    if variant is not None and (not isinstance(variant, str) or variant.lower() not in VARIANTS):
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    variant = None if variant in (None, "default") else variant.lower()
    if variant is not None and algorithm not in ("auto", "skyalign"):
        raise ValueError(f"variant={variant!r} applies to algorithm='skyalign' only")
    return algorithm, variant


def plan_skyline(n: int, d: int, device: str, algorithm: str = "auto",
                 variant: str | None = None, distinct: bool = False, residence: str = "host",
                 diff_columns: int = 0) -> SkylinePlan:
    """The rule.

    * ``algorithm="auto"``: on the CPU with d == 2 and no SkyAlign variant
      asked for, "sort2d" (the sort-and-scan skyline of Kung, Luccio,
      Preparata 1975: NumPy only, nothing to compile;
      docs/decisions/skyline-sort2d.md); else SkyAlign (Bøgh, Chester,
      Assent 2016) for d <= 64, else SFS on the CPU and GGS on the GPU.
    * ``variant=None``: "levelwise" on the CPU (the NoSync CPU port of §7.1,
      one pass per mask order), "padded" on the GPU (§6.2.3).
    * Refused: SkyAlign beyond 64 dimensions; "sort2d" for d != 2;
      "sort2d", "bruteforce", "bnl" and "sfs" on the GPU; a GPU-only
      variant ("padded") on the CPU; points on the GPU (``residence="device"``)
      with a CPU device.

    ``device`` is resolved ("cpu" or "gpu"): the caller resolved it once.
    O(1).
    """
    if device not in ("cpu", "gpu"):
        raise ValueError(f"plan_skyline takes a resolved device ('cpu' or 'gpu'), got {device!r}")
    if residence not in ("host", "device"):
        raise ValueError(f"residence must be 'host' or 'device', got {residence!r}")
    if residence == "device" and device != "gpu":
        raise ValueError("X is a GPU array but device resolved to 'cpu'; pass device='gpu' or "
                         "copy it to the host")
    algorithm, variant = check_algorithm(algorithm, variant)
    if algorithm == "auto":
        if device == "cpu" and d == 2 and variant is None:
            algorithm = "sort2d"
        elif d <= MAX_SKYALIGN_D:
            algorithm = "skyalign"
        else:
            algorithm = "ggs" if device == "gpu" else "sfs"
    if algorithm == "sort2d" and d != 2:
        raise ValueError(f"algorithm='sort2d' computes 2-D skylines only, got {d} columns; "
                         "use algorithm='auto'")
    if algorithm == "skyalign" and d > MAX_SKYALIGN_D:
        raise ValueError(f"SkyAlign supports up to {MAX_SKYALIGN_D} dimensions, got {d}; "
                         "use algorithm='sfs' or 'ggs'")
    if device == "gpu" and algorithm in CPU_ONLY:
        raise ValueError(f"algorithm={algorithm!r} runs on the CPU only; pass device='cpu'")
    if algorithm == "skyalign":
        variant = variant or DEFAULT_VARIANT[device]
        allowed = GPU_VARIANTS if device == "gpu" else CPU_VARIANTS
        if variant not in allowed:
            raise ValueError(f"variant {variant!r} is GPU-only; the CPU has {', '.join(allowed)}")
    else:
        variant = None
    return SkylinePlan(device=device, algorithm=algorithm, variant=variant,
                       distinct=bool(distinct), n=int(n), d=int(d), residence=residence,
                       diff_columns=int(diff_columns))

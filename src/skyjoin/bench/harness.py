"""The benchmark harness: cases run against peers in one process.

A suite (``skyjoin.bench.join``, ``.dbscan``, ``.skyline``) builds a list of
``Case`` objects, each with the implementations to time (ours and the
peers').  ``run_suite`` times every implementation of every case in the same
process, checks that they agree on the result size, and writes the report
as JSON plus a PNG chart.  Ratios are always against peers measured in the
same run; nothing here asserts a timing.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import platform
import time
from typing import Any, Callable

__all__ = ["Impl", "Case", "Row", "run_suite", "write_report", "timed"]


@dataclasses.dataclass
class Impl:
    """One implementation to time on a case.

    ``fn()`` runs it and returns the result size (pairs, labels, points...)
    as an int, or a dict of extra figures with at least a "size" key.
    ``warmup`` runs it once untimed first (JIT compilation, GPU context).
    """

    name: str
    fn: Callable[[], Any]
    ours: bool = False
    warmup: bool = False
    repeat: int = 1
    skip_reason: str | None = None


@dataclasses.dataclass
class Case:
    name: str
    params: dict
    impls: list[Impl]
    setup: Callable[[], None] | None = None     # e.g. generate the data
    teardown: Callable[[], None] | None = None


@dataclasses.dataclass
class Row:
    suite: str
    case: str
    impl: str
    ours: bool
    time_s: float | None
    size: int | None
    extra: dict
    params: dict
    error: str | None = None


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one call of fn, and its return value."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _split(out: Any) -> tuple[int | None, dict]:
    if isinstance(out, dict):
        extra = dict(out)
        size = extra.pop("size", None)
        return (None if size is None else int(size)), extra
    if out is None:
        return None, {}
    return int(out), {}


def run_suite(suite: str, cases: list[Case], log: Callable[[str], None] = print) -> list[Row]:
    """Time every implementation of every case; return the rows."""
    rows: list[Row] = []
    for case in cases:
        if case.setup is not None:
            case.setup()
        try:
            for impl in case.impls:
                if impl.skip_reason:
                    rows.append(Row(suite, case.name, impl.name, impl.ours, None, None, {},
                                    case.params, error=f"skipped: {impl.skip_reason}"))
                    log(f"  {case.name:<24} {impl.name:<34} skipped ({impl.skip_reason})")
                    continue
                try:
                    if impl.warmup:
                        impl.fn()
                    best, out = None, None
                    for _ in range(max(1, impl.repeat)):
                        t, out = timed(impl.fn)
                        best = t if best is None else min(best, t)
                    size, extra = _split(out)
                    rows.append(Row(suite, case.name, impl.name, impl.ours, best, size, extra,
                                    case.params))
                    log(f"  {case.name:<24} {impl.name:<34} {best:9.3f} s  size={size}")
                except Exception as exc:  # a peer failing must not stop the run
                    rows.append(Row(suite, case.name, impl.name, impl.ours, None, None, {},
                                    case.params, error=f"{type(exc).__name__}: {exc}"))
                    log(f"  {case.name:<24} {impl.name:<34} FAILED {type(exc).__name__}: {exc}")
        finally:
            if case.teardown is not None:
                case.teardown()
            gc.collect()
    _check_sizes(rows, log)
    return rows


def _check_sizes(rows: list[Row], log) -> None:
    """Flag cases whose implementations disagree on the result size."""
    by_case: dict[str, set] = {}
    for r in rows:
        if r.size is not None and not r.extra.get("size_not_comparable"):
            by_case.setdefault(r.case, set()).add(r.size)
    for case, sizes in by_case.items():
        if len(sizes) > 1:
            log(f"  WARNING: {case}: implementations disagree on the result size: {sorted(sizes)}")


def ratios(rows: list[Row]) -> list[dict]:
    """For each case: our best time, each peer's time and peer/ours."""
    out = []
    cases = []
    for r in rows:
        if r.case not in cases:
            cases.append(r.case)
    for case in cases:
        rs = [r for r in rows if r.case == case and r.time_s is not None]
        ours = [r for r in rs if r.ours]
        if not ours:
            continue
        for o in ours:
            for p in rs:
                if p.ours:
                    continue
                out.append({"case": case, "ours": o.impl, "peer": p.impl,
                            "ours_s": o.time_s, "peer_s": p.time_s,
                            "speedup": p.time_s / o.time_s if o.time_s > 0 else float("inf")})
    return out


def machine_info() -> dict:
    info = {"python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "node": platform.node()}
    try:
        import numba

        info["numba_threads"] = numba.config.NUMBA_NUM_THREADS
    except Exception:
        pass
    return info


def write_report(suite: str, rows: list[Row], out_dir: str, title: str | None = None) -> tuple[str, str | None]:
    """Write ``<suite>.json`` and a ``<suite>.png`` bar chart; return their paths."""
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, f"{suite}.json")
    payload = {"suite": suite, "machine": machine_info(),
               "rows": [dataclasses.asdict(r) for r in rows], "ratios": ratios(rows)}
    with open(json_path, "w") as fh:
        json.dump(payload, fh, indent=1, default=float)
    png_path = os.path.join(out_dir, f"{suite}.png")
    try:
        _plot(rows, png_path, title or f"skyjoin bench {suite}")
    except Exception:  # matplotlib missing or headless trouble: the JSON is the record
        png_path = None
    return json_path, png_path


def _plot(rows: list[Row], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = []
    impls = []
    for r in rows:
        if r.case not in cases:
            cases.append(r.case)
        if r.impl not in impls:
            impls.append(r.impl)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(cases) + 2), 4.5))
    width = 0.8 / max(1, len(impls))
    x = np.arange(len(cases))
    for k, impl in enumerate(impls):
        vals = []
        for c in cases:
            t = [r.time_s for r in rows if r.case == c and r.impl == impl and r.time_s is not None]
            vals.append(t[0] if t else np.nan)
        ax.bar(x + k * width, vals, width, label=impl)
    ax.set_xticks(x + width * (len(impls) - 1) / 2)
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_table(rows: list[Row]) -> str:
    """A short plain-text table of the rows with speedups of ours over peers."""
    lines = [f"{'case':<26} {'implementation':<36} {'time s':>9} {'size':>14}"]
    for r in rows:
        t = f"{r.time_s:9.3f}" if r.time_s is not None else "        -"
        s = f"{r.size:14d}" if r.size is not None else "             -"
        lines.append(f"{r.case:<26} {r.impl:<36} {t} {s}" + (f"  ({r.error})" if r.error else ""))
    rs = ratios(rows)
    if rs:
        lines.append("")
        lines.append(f"{'case':<26} {'ours':<28} {'peer':<34} {'speedup':>8}")
        for q in rs:
            lines.append(f"{q['case']:<26} {q['ours']:<28} {q['peer']:<34} {q['speedup']:8.2f}x")
    return "\n".join(lines)

"""The benchmark harness: cases run against peers in one process.

A suite (``skyjoin.bench.join``, ``.dbscan``, ``.skyline``,
``.distributed``) builds a list of ``Case`` objects, each with the
implementations to time (ours and the peers').  ``run_suite`` runs them all
in the same process, on the same data, by these rules:

* every implementation runs once untimed first (the warm-up: JIT
  compilation, cache loads, GPU contexts, imports and thread pools never
  land in a timing);
* the timed runs are interleaved, as a user's pipeline runs one library
  after another: ours, peer, ours, peer, ... for ``repeat`` rounds, and
  each implementation keeps its fastest run;
* ratios (``ratios``) are only between an implementation of ours and a peer
  timed in the same case of the same run;
* a figure quoted from a paper (``Case.quoted``) was measured at another
  size or on another machine: it is reported in its own column, marked so,
  and never divided by anything.

Case names carry the number of points the case really runs (``size_tag``),
in every mode.  Nothing here asserts a timing.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import platform
import time
from typing import Any, Callable, Iterable

__all__ = ["Impl", "Case", "Row", "CaseData", "data_case", "run_suite", "write_report",
           "label_counts",
           "timed", "ratios", "format_table", "chart", "size_tag", "select", "check_names",
           "case_order",
           "available_memory_bytes", "QUOTED_LABEL", "REPEAT", "MAX_CHART_PX"]

#: Timed runs of each implementation (interleaved rounds); the fastest is kept.
REPEAT = 3
#: The column of figures quoted from papers: never a ratio.
QUOTED_LABEL = "quoted, other size/machine"
#: Widest chart written, in pixels.
MAX_CHART_PX = 1600
_DPI = 100


@dataclasses.dataclass
class Impl:
    """One implementation to time on a case.

    ``fn()`` runs it and returns the result size (pairs, labels, points...)
    as an int, or a dict of extra figures with at least a "size" key.  It
    runs once untimed (the warm-up: ``warmup_fn`` if given, a shorter run of
    the same code for a peer that takes minutes and compiles nothing), then
    ``repeat`` timed runs interleaved with the case's other
    implementations.
    """

    name: str
    fn: Callable[[], Any]
    ours: bool = False
    repeat: int = REPEAT
    skip_reason: str | None = None
    warmup_fn: Callable[[], Any] | None = None
    #: ``fn`` returns a dict whose "seconds" is its own timing (a peer run in
    #: its own process, timed there without the process's start): that
    #: figure, not the call's wall time, is the row's time
    self_timed: bool = False


@dataclasses.dataclass
class Case:
    """A case: its name (with its real size), parameters and implementations.

    ``quoted`` maps a label to seconds quoted from elsewhere (a paper, other
    sizes or machines): reported in the column ``QUOTED_LABEL``, never as a
    ratio.
    """

    name: str
    params: dict
    impls: list[Impl]
    setup: Callable[[], None] | None = None     # e.g. generate the data
    teardown: Callable[[], None] | None = None
    quoted: dict[str, float] = dataclasses.field(default_factory=dict)


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
    quoted_s: float | None = None


class CaseData:
    """The data of one case: made by ``make()`` in setup, dropped in teardown.

    ``after`` runs after the data is dropped (e.g. to free a GPU pool).
    """

    def __init__(self, make: Callable[[], Any], after: Callable[[], None] | None = None):
        self.make = make
        self.after = after
        self.X: Any = None

    def setup(self) -> None:
        self.X = self.make()

    def get(self) -> Any:
        return self.X

    def teardown(self) -> None:
        self.X = None
        if self.after is not None:
            self.after()


def data_case(name: str, params: dict, make: Callable[[], Any],
              impls_of: Callable[[Callable[[], Any]], list[Impl]],
              after: Callable[[], None] | None = None,
              quoted: dict[str, float] | None = None) -> Case:
    """A case whose data ``make()`` builds in setup; ``impls_of(get)`` gives
    the implementations, which read the data through ``get()``."""
    data = CaseData(make, after)
    return Case(name, params, impls_of(data.get), setup=data.setup, teardown=data.teardown,
                quoted=dict(quoted or {}))


def label_counts(labels) -> dict:
    """The result size of a DBSCAN run: its clusters ("size") and noise
    points of the labels (NumPy or CuPy, noise -1).  O(n)."""
    n = int(labels.shape[0])
    return {"size": int(labels.max()) + 1 if n else 0, "noise": int((labels < 0).sum())}


def size_tag(n: int) -> str:
    """The size of a case as its name carries it: 1M, 50k, 17264.

    Exact: ``M`` for whole millions, ``k`` for whole thousands, else the
    number itself.
    """
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def select(cases: list[Case], names: Iterable[str] | None) -> list[Case]:
    """The cases named in ``names`` (all of them for None or empty).

    Raises
    ------
    ValueError
        For a name that is not a case of the list, naming the cases there are.
    """
    if not names:
        return cases
    names = list(names)
    known = [c.name for c in cases]
    check_names(names, known)
    return [c for c in cases if c.name in set(names)]


def check_names(names: Iterable[str], known: list[str]) -> None:
    """Raise ``ValueError`` for a name not in ``known``, listing ``known``."""
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(map(repr, unknown))}; the cases of "
                         f"this suite in this mode are: {', '.join(known)}")


def available_memory_bytes() -> int | None:
    """Memory the system can still give (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


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


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_case(suite: str, case: Case, log: Callable[[str], None] = print) -> list[Row]:
    """Warm up every implementation of a case, then time them interleaved.

    Round r (r < ``impl.repeat``) runs every implementation once, in the
    case's order; each keeps its fastest run and that run's figures.  An
    implementation that fails is reported with its error and left out of
    the later rounds.  O(sum of the implementations' (repeat + 1) runs).
    """
    rows: dict[str, Row] = {}
    live: list[Impl] = []

    def row(impl, **kw):
        rows[impl.name] = Row(suite, case.name, impl.name, impl.ours, kw.pop("time_s", None),
                              kw.pop("size", None), kw.pop("extra", {}), case.params, **kw)

    for impl in case.impls:
        if impl.skip_reason:
            row(impl, error=f"skipped: {impl.skip_reason}")
            log(f"  {case.name:<24} {impl.name:<34} skipped ({impl.skip_reason})")
            continue
        try:
            (impl.warmup_fn or impl.fn)()
            live.append(impl)
        except Exception as exc:  # a peer failing must not stop the run
            row(impl, error=_error(exc))
            log(f"  {case.name:<24} {impl.name:<34} FAILED (warm-up) {_error(exc)}")
    gc.collect()
    gc.freeze()          # what the warm-ups made (compiled code, caches) stays out of the scans
    best: dict[str, tuple[float, Any]] = {}
    for r in range(max((i.repeat for i in live), default=0)):
        for impl in list(live):
            if r >= max(1, impl.repeat):
                continue
            try:
                t, out = timed(impl.fn)
                if impl.self_timed:
                    t = float(out.pop("seconds"))
            except Exception as exc:
                live.remove(impl)
                best.pop(impl.name, None)
                row(impl, error=_error(exc))
                log(f"  {case.name:<24} {impl.name:<34} FAILED {_error(exc)}")
                continue
            if impl.name not in best or t < best[impl.name][0]:
                best[impl.name] = (t, out)
    for impl in live:
        t, out = best[impl.name]
        size, extra = _split(out)
        extra["timed_runs"] = max(1, impl.repeat)
        row(impl, time_s=t, size=size, extra=extra)
        log(f"  {case.name:<24} {impl.name:<34} {t:9.3f} s  size={size}")
    out_rows = [rows[i.name] for i in case.impls if i.name in rows]
    for label, seconds in case.quoted.items():
        out_rows.append(Row(suite, case.name, label, False, None, None, {}, case.params,
                            quoted_s=float(seconds)))
    return out_rows


def run_suite(suite: str, cases: list[Case], log: Callable[[str], None] = print) -> list[Row]:
    """Run every case (``run_case``), each between its setup and teardown.

    The objects alive at the start (modules, the imported libraries) and
    those the warm-ups made are frozen out of the garbage collector
    meanwhile (``gc.freeze``, undone at the end), so that the collection
    before each timed run scans only what the runs made.
    """
    rows: list[Row] = []
    gc.collect()
    gc.freeze()
    try:
        for case in cases:
            if case.setup is not None:
                case.setup()
            try:
                rows += run_case(suite, case, log)
            finally:
                if case.teardown is not None:
                    case.teardown()
                gc.collect()
    finally:
        gc.unfreeze()
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


def case_order(rows: list[Row]) -> list[str]:
    """The case names of ``rows``, each once, in the order they first appear."""
    return list(dict.fromkeys(r.case for r in rows))


def ratios(rows: list[Row]) -> list[dict]:
    """For each case: peer time / our time, for every pair of ours and a peer
    both timed in that case of this run (quoted figures never take part),
    like for like: where both rows say where the data lies
    (``extra["residence"]``), only rows of the same residence."""
    out = []
    for case in case_order(rows):
        rs = [(r, r.time_s) for r in rows
              if r.case == case and r.time_s is not None and r.quoted_s is None]
        for o, o_s in ((r, t) for r, t in rs if r.ours):
            for p, p_s in ((r, t) for r, t in rs if not r.ours):
                where = (o.extra.get("residence"), p.extra.get("residence"))
                if None not in where and where[0] != where[1]:
                    continue
                out.append({"case": case, "ours": o.impl, "peer": p.impl,
                            "ours_s": o_s, "peer_s": p_s,
                            "speedup": p_s / o_s if o_s > 0 else float("inf")})
    return out


def machine_info() -> dict:
    info = {"python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "node": platform.node()}
    try:
        import numba

        info["numba_threads"] = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    except Exception:
        pass
    return info


def write_report(suite: str, rows: list[Row], out_dir: str, title: str | None = None) -> tuple[str, str | None]:
    """Write ``<suite>.json`` and a ``<suite>.png`` bar chart; return their paths."""
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, f"{suite}.json")
    payload = {"suite": suite, "machine": machine_info(),
               "rows": [dataclasses.asdict(r) for r in rows], "ratios": ratios(rows),
               "timing": f"warm-up run, then best of up to {REPEAT} interleaved runs"}
    with open(json_path, "w") as fh:
        json.dump(payload, fh, indent=1, default=float)
    png_path: str | None = os.path.join(out_dir, f"{suite}.png")
    try:
        import matplotlib.pyplot as plt

        fig = chart(rows, title or f"skyjoin bench {suite}")
        fig.savefig(os.path.join(out_dir, f"{suite}.png"), dpi=_DPI)
        plt.close(fig)
    except Exception:  # matplotlib missing or headless trouble: the JSON is the record
        png_path = None
    return json_path, png_path


def chart(rows: list[Row], title: str):
    """A bar chart of the timed rows (log seconds), at most ``MAX_CHART_PX``
    wide at 100 dpi, with the legend right of the axes, outside the bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed_rows = [r for r in rows if r.time_s is not None]
    cases = case_order(timed_rows)
    impls = list(dict.fromkeys(r.impl for r in timed_rows))
    width_in = min(MAX_CHART_PX / _DPI, max(10.0, 0.5 * len(cases) * max(1, len(impls)) ** 0.5 + 5))
    fig = plt.figure(figsize=(width_in, 5.5), dpi=_DPI)
    legend_in = 3.6                              # right margin kept for the legend
    ax = fig.add_axes((0.7 / width_in, 0.32, 1 - (legend_in + 0.8) / width_in, 0.6))
    width = 0.8 / max(1, len(impls))
    x = np.arange(len(cases))
    for k, impl in enumerate(impls):
        vals: list[float] = []
        for c in cases:
            t = [r.time_s for r in timed_rows if r.case == c and r.impl == impl and r.time_s]
            vals.append(t[0] if t else np.nan)
        ax.bar(x + k * width, vals, width, label=impl)
    ax.set_xticks(x + width * (len(impls) - 1) / 2)
    ax.set_xticklabels(cases, rotation=35 if len(cases) < 12 else 70, ha="right",
                       fontsize=8 if len(cases) < 12 else 6)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log)")
    ax.set_title(title)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def format_table(rows: list[Row]) -> str:
    """A plain-text table of the rows, a column of quoted figures, then the
    ratios of ours against the peers timed in the same case."""
    lines = [f"{'case':<26} {'implementation':<44} {'time s':>9} {'size':>14} "
             f"{'s (' + QUOTED_LABEL + ')':>36}"]
    for r in rows:
        t = f"{r.time_s:9.3f}" if r.time_s is not None else "        -"
        s = f"{r.size:14d}" if r.size is not None else "             -"
        q = f"{r.quoted_s:36.3f}" if r.quoted_s is not None else ""
        lines.append(f"{r.case:<26} {r.impl:<44} {t} {s} {q}".rstrip()
                     + (f"  ({r.error})" if r.error else ""))
    rs = ratios(rows)
    if rs:
        lines.append("")
        lines.append("peer / ours, timed in this run on the same data "
                     "(warm-up, then best of interleaved runs):")
        lines.append(f"{'case':<26} {'ours':<34} {'peer':<44} {'ratio':>8}")
        for x in rs:
            lines.append(f"{x['case']:<26} {x['ours']:<34} {x['peer']:<44} {x['speedup']:8.2f}x")
    return "\n".join(lines)

"""``skyjoin skyline``: the skyline (Pareto set) of the rows of a file."""

from __future__ import annotations

import os
import time

import click
import numpy as np

import skyjoin as sj

from .._core.plans import recording
from ..io import write_rows
from ..errors import ColumnError, NonNumericColumnError
from ..io.points import column_positions, non_numeric_message
from ..pareto.plan import ALGORITHMS
from .distributed import client_from_options, run_skyline, uses_cluster
from .errors import user_errors
from .inputs import column_usage_error, not_numbers_error, read_input_frame
from .options import (DEVICE, VERBOSE, WARM_ROWS, column_list, distributed_options,
                      kernel_note, operator_clock, phase, ran_on)
from .outputs import COLUMN_OUT, PLOT_OUT, check_out
from .plots import save_skyline
from .wording import plural

__all__ = ["skyline_cmd"]

def _columns(df, mins, maxs, path):
    """The columns of ``df`` to minimise and to maximise, checked.

    With neither ``mins`` nor ``maxs``, every column is minimised.  Every
    chosen column must hold numbers (true/false, dates and durations
    included): others are a data error naming them and the columns that do.

    Raises
    ------
    click.BadParameter, click.UsageError
        A name or position that is no column of the file, a column given to
        both --min and --max (exit status 2).
    ValueError
        Chosen columns that do not hold numbers, or hold missing, NaN or
        infinite values (exit status 1), naming the file, the column and the row.
    """
    named = not all(isinstance(c, (int, np.integer)) for c in df.columns)
    kind = "npy" if path.lower().endswith(".npy") else "text"
    labels = list(df.columns)

    def pick(specs, option):
        try:
            return [labels[k] for k in column_positions(labels, specs, path, named, kind)]
        except ColumnError as exc:
            raise column_usage_error(exc, option) from None

    mins = list(dict.fromkeys(pick(mins, "--min"))) if mins else []
    maxs = list(dict.fromkeys(pick(maxs, "--max"))) if maxs else []
    both = [c for c in mins if c in maxs]
    if both:
        raise click.UsageError(f"column {both[0]!r} is in both min and max: give each column "
                               "to --min or to --max")
    cols = mins + maxs if (mins or maxs) else labels
    _check_numbers(df, cols, labels, path)
    sense = ["min"] * len(mins) + ["max"] * len(maxs) if (mins or maxs) else ["min"] * len(cols)
    return cols, sense


def _check_numbers(df, cols, labels, path) -> None:
    """Refuse chosen columns that are not numbers, or hold missing, NaN or
    infinite values, with the reader's wording.  O(n d)."""
    import pandas as pd
    import pyarrow as pa

    def numeric(c):
        t = df[c].dtype
        return (pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t)
                or pd.api.types.is_datetime64_any_dtype(t) or pd.api.types.is_timedelta64_dtype(t))

    bad = [c for c in cols if not numeric(c)]
    if bad:
        arrays = [(pa.array(df[c], from_pandas=True), c) for c in bad]
        exc = NonNumericColumnError(non_numeric_message(arrays, path), path, bad,
                                [c for c in labels if numeric(c)])
        raise not_numbers_error(exc, "--min/--max")
    for c in cols:
        v = df[c]
        missing = v.isna().to_numpy()
        if missing.any():
            raise ValueError(f"{path!r} has a missing or NaN value in column {c!r} at data row "
                             f"{int(np.flatnonzero(missing)[0])} (0-based); remove or fill it")
        if pd.api.types.is_float_dtype(v.dtype):
            inf = np.isinf(v.to_numpy())
            if inf.any():
                raise ValueError(f"{path!r} has an infinite value in column {c!r} at data row "
                                 f"{int(np.flatnonzero(inf)[0])} (0-based); remove or fill it")


@click.command("skyline")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--min", "min_cols", default=None, metavar="COLS",
              help="Comma-separated columns (names or 0-based positions) to minimise.")
@click.option("--max", "max_cols", default=None, metavar="COLS",
              help="Comma-separated columns to maximise.  With neither --min nor --max, "
                   "every column is minimised (all must hold numbers); columns not named "
                   "are ignored.")
@click.option("--distinct", is_flag=True, help="Keep one row (the first) of equal points.")
@DEVICE
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default="auto", show_default=True,
              help="'auto': sort and scan for two columns on the CPU, SkyAlign up to 64 "
                   "columns, else SFS (CPU) or GGS (GPU); or name one (bruteforce, bnl, sfs "
                   "and sort2d run on the CPU only).")
@click.option("--out", "out", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the skyline rows here: .csv or .parquet (a first column 'row', the "
                   "0-based row in DATA, then DATA's columns) or .npy (the row ids alone).")
@click.option("--plot", "plot", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="Draw a picture (.png, .pdf or .svg): the staircase in 2-D, parallel "
                   "coordinates of the skyline otherwise.")
@distributed_options
@VERBOSE
@user_errors
def skyline_cmd(data, min_cols, max_cols, distinct, device, algorithm, out, plot, scheduler,
                local_cluster):
    """The skyline (Pareto set) of the rows of DATA (.csv/.txt/.parquet/.npy).

    A row is in the skyline when no other row is at least as good in every
    chosen column and better in one.  With --scheduler or --local-cluster
    the workers read DATA themselves and --out receives the skyline's row ids.

    \b
    Examples:
      skyjoin generate anticorrelated -n 100000 -d 3 --out cars.csv
      skyjoin skyline cars.csv
      skyjoin skyline cars.csv --min x0 --max x1,x2 --out best.csv --plot best.png
    """
    mins, maxs = column_list(min_cols) or [], column_list(max_cols) or []
    check_out(out, COLUMN_OUT, what="the skyline")
    check_out(plot, PLOT_OUT, option="--plot", what="the picture")
    if uses_cluster(scheduler, local_cluster):
        if plot:
            raise click.UsageError("--plot is not available with --scheduler/--local-cluster")
        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            _, msg = run_skyline(client, data, min_cols=mins, max_cols=maxs,
                                 distinct=distinct, device=device, out=out)
        click.echo(msg)
        return
    t0 = time.perf_counter()
    df = read_input_frame(data)
    t_read = time.perf_counter() - t0
    cols, sense = _columns(df, mins, maxs, data)
    table = df[cols]
    kw = dict(sense=sense, distinct=distinct, device=device, algorithm=algorithm)
    # the first call of a process loads (or compiles) the kernels: a call
    # on a few rows takes that time, reported apart from the skyline's
    with operator_clock() as warm:
        sj.skyline(table.iloc[:WARM_ROWS], **kw)
    with phase("skyline"), operator_clock() as clock, recording() as plans:
        res, st = sj.skyline(table, return_stats=True, **kw)
    dev = ran_on(plans)
    sky = (table.index.get_indexer(res.index) if table.index.is_unique
           else np.flatnonzero(table.index.isin(res.index))).astype(np.int64)
    click.echo(f"{plural(len(sky), 'skyline row')} of {len(df):,} ({plural(len(cols), 'column')}: "
               + ", ".join(f"{c} {s}" for c, s in zip(cols, sense))
               + f"); {dev}, {st['algorithm']}; read {t_read:.3f} s, "
               f"skyline {clock['seconds']:.3f} s"
               + kernel_note(warm, clock))
    if st.get("prefilter_survivors") is not None:
        tests = [f"{st[k]:,} {k.replace('_', ' ')}" for k in ("dominance_tests", "mask_tests")
                 if st.get(k) is not None]          # None: the algorithm counts none
        click.echo(f"pre-filter kept {st['prefilter_survivors']:,} rows"
                   + (f"; {', '.join(tests)}" if tests else ""))
    if out:
        with phase(f"write {out}"):
            write_rows(out, df, sky)
        click.echo(f"wrote {out}")
    if plot:
        X = table.to_numpy(dtype=np.float64)
        with phase(f"draw {plot}"):
            save_skyline(plot, X, sky, sense=sense, names=[str(c) for c in cols],
                         title=f"skyline of {os.path.basename(data)}: {len(sky):,} of "
                               f"{len(df):,} rows")
        click.echo(f"wrote {plot}")

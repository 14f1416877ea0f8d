"""The command line on a Dask cluster: ``--scheduler ADDRESS`` / ``--local-cluster N``.

The ``join``, ``dbscan`` and ``skyline`` commands add the two options with
:func:`distributed_options` and open the client with
:func:`client_from_options`; with neither option they run on this machine.
With either, the input file is read by the workers themselves (it must be
visible to them), and the operator runs through :mod:`skyjoin.distributed`
(:func:`run_join`, :func:`run_dbscan`, :func:`run_skyline`).  Dask itself is
imported only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import sys
import time

import click

from .._core.device import resolve_device
from ..io import write_counts, write_indices, write_labels, write_neighbor_table
from .options import distributed_options
from .outputs import join_output
from .wording import plural

__all__ = ["distributed_options", "client_from_options", "local_cluster_device", "uses_cluster",
           "run_join", "run_dbscan", "run_skyline"]


def uses_cluster(scheduler, local_cluster) -> bool:
    """Whether the options ask for a Dask cluster.

    Raises
    ------
    click.UsageError
        Both options given (exit status 2).
    """
    if scheduler is not None and local_cluster is not None:
        raise click.UsageError("give --scheduler or --local-cluster, not both")
    return scheduler is not None or local_cluster is not None


def _sd():
    """skyjoin.distributed (Numba's engines and Dask), imported when a
    cluster command runs."""
    from .. import distributed

    return distributed


def local_cluster_device(device=None) -> str:
    """The kind of workers ``--local-cluster`` starts: the command's device,
    resolved once ("auto" and ``SKYJOIN_DEVICE`` included), so that a GPU
    host gets GPU workers unless the command says ``--device cpu``.  This
    chooses which cluster to start; the operators receive the command's
    ``device`` as given."""
    return resolve_device(device)


@contextlib.contextmanager
def client_from_options(scheduler=None, local_cluster=None, device=None, echo=None):
    """A Dask client for the command-line options, closed on exit (None without options).

    Prints the dashboard address.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler.
    local_cluster : int, optional
        Start a local cluster of this many workers (with ``device="gpu"``,
        one worker per GPU).
    device : {"auto", "cpu", "gpu"}, optional
        The command's device.
    echo : callable, optional
        Where to print (default: standard error).

    Yields
    ------
    distributed.Client or None

    Raises
    ------
    ValueError
        Both options given.

    Examples
    --------
    >>> with client_from_options(None, None) as client:
    ...     client is None
    True
    """
    if scheduler is not None and local_cluster is not None:
        raise ValueError("give --scheduler or --local-cluster, not both")
    if echo is None:
        def echo(msg):
            print(msg, file=sys.stderr)
    if scheduler is None and local_cluster is None:
        yield None
        return
    from distributed import Client

    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            client = stack.enter_context(Client(scheduler))
        else:
            sd = _sd()
            if local_cluster_device(device) == "gpu":
                cluster = sd.local_gpu_cluster(local_cluster)
            else:
                cluster = sd.local_cluster(local_cluster)
            stack.enter_context(cluster)
            client = stack.enter_context(Client(cluster))
        n = len(client.scheduler_info(n_workers=-1)["workers"])
        echo(f"Dask: {n} worker(s), dashboard {client.dashboard_link}")
        yield client


def run_join(client, data, eps, *, out=None, counts=False, include_self=False, sort=True,
             precision="float64", columns=None, device=None):
    """The ``skyjoin join`` command on a Dask cluster; returns its one-line summary.

    ``out``: with ``counts``, a .csv/.parquet file of counts; a ``.npz`` or
    ``.parquet`` file receives the whole table (assembled on this machine);
    any other path is a folder where the workers write one Parquet file of
    pairs per partition (for results larger than this machine's memory); see
    :func:`skyjoin.cli.outputs.join_output`.
    """
    sd = _sd()
    t0 = time.perf_counter()
    kind = join_output(out, counts, distributed=True)
    kw = dict(client=client, include_self=include_self, device=device, precision=precision,
              columns=columns)
    if kind in ("counts", "summary"):
        c = sd.self_join(data, eps, output="counts", **kw)     # a Dask array on the workers
        if out:
            c = c.compute()          # to the one file written here
            write_counts(out, c)
        n, n_pairs = int(c.shape[0]), int(c.sum())      # the sum alone comes back
    elif kind == "folder":
        res = sd.self_join(data, eps, sort=sort, out=out, **kw)
        n, n_pairs = res.shape[0], res.n_pairs
    else:
        nt = sd.self_join(data, eps, sort=sort, **kw)
        n, n_pairs = nt.shape[0], nt.n_pairs
        if out:
            write_neighbor_table(out, nt)
    dt = time.perf_counter() - t0
    mean = n_pairs / n if n else 0.0
    return (f"{plural(n, 'point')}, eps {eps:g}: {plural(n_pairs, 'pair')} "
            f"({mean:.2f} neighbours per point) "
            f"in {dt:.3f} s on the Dask cluster (including reading)"
            + (f"; wrote {out}" if out else ""))


def run_dbscan(client, data, eps, min_samples, *, out=None, precision="float64", columns=None,
               device=None):
    """The ``skyjoin dbscan`` command (one clustering) on a Dask cluster; returns (labels, summary).
    """
    sd = _sd()
    t0 = time.perf_counter()
    est = sd.DBSCAN(eps=eps, min_samples=min_samples, client=client, device=device,
                    precision=precision).fit(data, columns=columns)
    dt = time.perf_counter() - t0
    labels = est.labels_
    k = int(labels.max()) + 1 if len(labels) else 0
    if out:
        write_labels(out, labels)
    return labels, (f"eps={eps:g} min_samples={min_samples}: {plural(k, 'cluster')}, "
                    f"{len(est.core_sample_indices_):,} core, {int((labels < 0).sum()):,} noise "
                    f"points ({dt:.3f} s on the Dask cluster, {est.n_partitions_} partitions, "
                    f"including reading)" + (f"; labels: {out}" if out else ""))


def run_skyline(client, data, *, min_cols=(), max_cols=(), distinct=False, device=None,
                out=None):
    """The ``skyjoin skyline`` command on a Dask cluster; returns (row ids, summary).

    ``min_cols`` / ``max_cols`` name (or give 0-based positions of) the
    columns to minimise / maximise; with neither, every column is minimised.
    ``out`` receives the skyline's row ids (.npy, or a column ``row`` of
    .csv / .parquet): the rows themselves stay with the workers that read
    them.
    """
    cols = list(min_cols) + list(max_cols)
    sense = ["min"] * len(min_cols) + ["max"] * len(max_cols) if cols else None
    sd = _sd()
    t0 = time.perf_counter()
    ids = sd.skyline(data, client=client, sense=sense, distinct=distinct, device=device,
                     columns=cols or None)
    dt = time.perf_counter() - t0
    if out:
        write_indices(out, ids, name="row")
    return ids, (f"{len(ids):,} skyline rows ({dt:.3f} s on the Dask cluster, including "
                 f"reading)" + (f"; wrote {out}" if out else ""))

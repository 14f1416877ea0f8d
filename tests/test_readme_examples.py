"""Every shell example of the README runs as written, on small data.

The lines of the README's ``bash`` blocks that call ``skyjoin`` run in
order in one empty folder (each example may use the files of the ones
before it), through click's test runner.  Only sizes shrink: ``-n N``
becomes at most :data:`SMALL`, the demo gets ``-n``, and ``bench`` runs
``--quick`` on one case.
"""

import pathlib
import re
import shlex

import pytest
from click.testing import CliRunner

from skyjoin.cli import main

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
SMALL = 20_000


def shell_examples():
    """The ``skyjoin`` command lines of the README's bash blocks, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    lines = [ln.strip() for b in blocks for ln in b.splitlines()]
    return [shlex.split(ln, comments=True) for ln in lines if ln.startswith("skyjoin ")]


def small(argv):
    """The same command on small data."""
    args = list(argv[1:])
    for k, a in enumerate(args[:-1]):
        if a in ("-n", "--n-points"):
            args[k + 1] = str(min(int(args[k + 1]), SMALL))
    if args[:1] == ["demo"]:
        args += ["-n", "3000"]
    if args[:1] == ["bench"]:
        args += ["--quick", "--case", "Unif2D10k-4"]
    return args


def test_the_readme_has_examples():
    cmds = {a[1] for a in shell_examples() if len(a) > 1}
    assert {"generate", "join", "dbscan", "skyline", "demo", "bench"} <= cmds


def test_every_readme_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKYJOIN_DEVICE", "cpu")
    for argv in shell_examples():
        args = small(argv)
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, f"{shlex.join(argv)}\n{res.output}{res.exception!r}"
        assert "Error" not in res.output, shlex.join(argv)
        if args[:1] == ["dbscan"] and "--sweep-eps" not in args:
            # the example shows clusters, not one blob over everything
            found = re.search(r": ([\d,]+) clusters?,", res.output)
            assert found and int(found.group(1).replace(",", "")) > 1, res.output


@pytest.mark.parametrize("argv, want", [
    (["skyjoin", "generate", "uniform", "-n", "1000000", "-d", "2"],
     ["generate", "uniform", "-n", str(SMALL), "-d", "2"]),
    (["skyjoin", "demo"], ["demo", "-n", "3000"]),
])
def test_small(argv, want):
    assert small(argv) == want

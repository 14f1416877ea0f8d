"""The skyline's one routing rule (skyline.plan.plan_skyline)."""

import pytest

from skyjoin.pareto.plan import SkylinePlan, plan_skyline


def test_auto_algorithm_and_default_variants():
    assert plan_skyline(10, 8, "cpu") == SkylinePlan("cpu", "skyalign", "levelwise", False, 10, 8)
    assert plan_skyline(10, 8, "gpu").variant == "padded"
    assert plan_skyline(10, 65, "cpu").algorithm == "sfs"
    assert plan_skyline(10, 65, "gpu").algorithm == "ggs"
    assert plan_skyline(10, 4, "cpu", "BNL").variant is None
    assert plan_skyline(10, 4, "gpu", variant="sync").variant == "sync"
    assert plan_skyline(10, 4, "cpu", variant="default").variant == "levelwise"


@pytest.mark.parametrize("args,match", [
    ((10, 65, "cpu", "skyalign"), "up to 64"),
    ((10, 4, "gpu", "sfs"), "CPU only"),
    ((10, 4, "cpu", "auto", "padded"), "GPU-only"),
    ((10, 4, "cpu", "sfs", "sync"), "applies to algorithm='skyalign' only"),
    ((10, 4, "cpu", "quick"), "algorithm must be one of"),
    ((10, 4, "cpu", "auto", "fast"), "variant must be one of"),
])
def test_refusals(args, match):
    with pytest.raises(ValueError, match=match):
        plan_skyline(*args)


def test_describe_names_the_decisions():
    text = plan_skyline(1_000, 3, "cpu", distinct=True).describe()
    assert "skyalign (levelwise)" in text and "cpu" in text and "distinct" in text


def test_plan_records_residence_and_diff_grouping():
    plan = plan_skyline(10, 4, "gpu", residence="device", diff_columns=1)
    assert (plan.residence, plan.diff_columns) == ("device", 1)
    text = plan.describe()
    assert "points on the GPU" in text and "1 diff column" in text
    assert plan_skyline(10, 4, "cpu").residence == "host"
    with pytest.raises(ValueError, match="GPU array but device resolved to 'cpu'"):
        plan_skyline(10, 4, "cpu", residence="device")
    with pytest.raises(ValueError, match="resolved device"):
        plan_skyline(10, 4, "auto")


def test_the_public_call_reports_the_plan_it_ran():
    """One plan per call, reported once, and it is the plan that ran."""
    import numpy as np

    import skyjoin as sj
    from skyjoin._core.plans import recording

    X = np.random.default_rng(3).random((200, 2))
    with recording() as plans:
        sky, stats = sj.skyline(X, device="cpu", return_stats=True)
    assert plans == [SkylinePlan("cpu", "sort2d", None, False, 200, 2)]
    assert stats["algorithm"] == "sort2d"
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "g": np.arange(200) % 3})
    with recording() as plans:
        sj.skyline(df, min=["a"], max=["b"], diff=["g"], device="cpu", distinct=True)
    assert plans == [SkylinePlan("cpu", "skyalign", "levelwise", True, 200, 4, "host", 1)]


@pytest.mark.parametrize("operator", ["skyline", "paretoset"])
def test_the_points_are_checked_once_and_one_plan_runs(monkeypatch, operator):
    import numpy as np

    import skyjoin as sj
    from skyjoin._core.plans import recording
    from skyjoin.pareto import columns

    calls = []
    real = columns.check_points
    monkeypatch.setattr(columns, "check_points",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    X = np.random.default_rng(5).integers(0, 6, (300, 3)).astype(np.float64)
    with recording() as plans:
        if operator == "skyline":
            got = sj.skyline(X, sense=["min", "max", "min"], device="cpu")
        else:
            got = np.flatnonzero(sj.paretoset(X, sense=["min", "max", "min"], distinct=False,
                                              device="cpu"))
    Y = X * np.array([1, -1, 1])
    le = (Y[:, None, :] <= Y[None, :, :]).all(axis=2)
    lt = (Y[:, None, :] < Y[None, :, :]).any(axis=2)
    np.testing.assert_array_equal(got, np.flatnonzero(~(le & lt).any(axis=0)))
    assert len(calls) == 1 and len(plans) == 1 and plans[0].device == "cpu"

"""The skyline's one routing rule (skyline.plan.plan_skyline)."""

import pytest

from skyjoin.skyline.plan import SkylinePlan, plan_skyline


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

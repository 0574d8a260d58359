"""The preflight's MIG check on the controller gives what the mig_plan module gives, model by model."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.filter.mig_selection_problems import FilterModule, mig_selection_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config

A100 = "0x20B010DE"
H100 = "0x233010DE"
A30 = "0x20B710DE"
TOO_BIG = {"too-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 3}}]}
TWO_ME = {"two-me": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.6gb+me": 1, "2g.12gb+me": 1}}]}


def selection(config, configs=None, include_defaults=True):
    return {"config": config, "configs": configs or {}, "include_defaults": include_defaults}


def test_a_selection_that_fits_every_model_has_no_problem():
    assert mig_selection_problems([A100, H100], selection("all-balanced")) == []
    assert mig_selection_problems([], selection("all-balanced")) == []


@pytest.mark.parametrize("models, chosen, wanted", [
    ([A100], selection("too-big", TOO_BIG), ["mig-parted config too-big cannot be applied"]),
    ([A30], selection("two-me", TWO_ME), ["mig-parted config two-me cannot be applied"]),
    ([A100, "0x1234ABCD"], selection("all-balanced"), ["0x1234ABCD"]),
    ([A100], selection("nope"), ["invalid mig-parted config: selected mig-config not present: nope"]),
    ([A100], selection("x", {"x": "not a list"}, include_defaults=False), ["invalid mig-parted config"]),
])
def test_problems_name_what_is_wrong(models, chosen, wanted):
    problems = mig_selection_problems(models, chosen)
    assert len(problems) == len(wanted)
    for problem, fragment in zip(problems, wanted):
        assert fragment in problem


def test_the_message_is_the_mig_plan_module_message():
    content = {"version": "v1", "mig-configs": TOO_BIG}
    module_message = plan_named_config(content, True, "too-big", resolve_model(A100)).message
    assert mig_selection_problems([A100], selection("too-big", TOO_BIG)) == [module_message]


def test_registered_as_a_filter():
    assert FilterModule().filters()["mig_selection_problems"] is mig_selection_problems

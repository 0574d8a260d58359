"""Issue 21 (9, 10): bounds of the run's numbers and names (_run_inputs), shared by modules and preflight."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import (
    LEASE_MAX, bounded, lock_problems, node_name_problem, probe_problems, run_variable_problems)


@pytest.mark.parametrize("value", ["nan", float("nan"), "inf", float("-inf"), True, "x", None, [1]])
def test_not_a_finite_number(value):
    assert "must be a number from 0 to 1" in bounded("n", value, 0, 1)


@pytest.mark.parametrize("values,option", [
    ({"probe_min_share": 1.5}, "probe_min_share"), ({"probe_min_share": -0.1}, "probe_min_share"),
    ({"probe_max_inflation": 0.5}, "probe_max_inflation"), ({"probe_max_inflation": -1}, "probe_max_inflation"),
    ({"probe_seconds": 10 ** 9}, "probe_seconds"), ({"probe_seconds": 0}, "probe_seconds"),
    ({"probe_seconds": 2.5}, "probe_seconds"), ({"probe_seconds": "1e9"}, "probe_seconds"),
])
def test_probe_bounds(values, option):
    problems = probe_problems(values)
    assert len(problems) == 1 and problems[0].startswith(option + " must be"), problems


def test_probe_good_values_and_prefix():
    assert probe_problems({"probe_min_share": 0, "probe_max_inflation": 0, "probe_seconds": 20}) == []
    assert probe_problems({"probe_min_share": "0.5", "probe_max_inflation": "1.5", "probe_seconds": "30"}) == []
    assert probe_problems({"verify_probe_min_share": 2}, "verify_")[0].startswith("verify_probe_min_share")


def test_lock_bounds():
    assert lock_problems(1800, "run-1 alice@ctl") == []
    assert lock_problems(LEASE_MAX) == []
    for duration in (0, -1, 10 ** 12, LEASE_MAX + 1, "forever"):
        assert lock_problems(duration)[0].startswith("lease_duration must be an integer from 1 to 86400"), duration
    for holder in ("x" * 10240, "a\nb", " ", ""):
        assert lock_problems(60, holder)[0].startswith("holder must be"), holder


def test_node_names():
    assert node_name_problem("gpufleet_node_name", "gpu-a.example.com") is None
    for name in ("a;b", "GPU-A", "a/status", "", "a" * 254, 5):
        assert "is not a Kubernetes node name" in node_name_problem("gpufleet_node_name", name)


def test_run_variables():
    assert run_variable_problems({}) == []
    problems = run_variable_problems({"verify_probe_min_share": "nan", "gpufleet_rollout_lock_duration": 0,
                                      "gpufleet_node_name": "a;b"})
    names = ["verify_probe_min_share", "gpufleet_rollout_lock_duration", "gpufleet_node_name"]
    assert [p.split(" ")[0] for p in problems] == names

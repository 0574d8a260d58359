"""Issue 21 (9, 10): bounds of the run's numbers and names (_run_inputs), shared by modules and preflight."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import (
    LEASE_MAX, bounded, lock_problems, node_name_problem, probe_problems, run_variable_problems, unit_names_problems)


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


@pytest.mark.parametrize("unit", ["kubelet", "nvidia-dcgm", "dcgm-exporter.service", "nvsm.socket", "gpu-agent@0.service",
                                  "a:b_c.d\\x2d", "x" * 247, "x" * 247 + ".target"])
def test_unit_names(unit):
    assert unit_names_problems("mig_gpu_clients", [unit]) == []


@pytest.mark.parametrize("unit,reason", [
    ("--now", "starts with '-'"), ("-H", "starts with '-'"), ("a b", "' ' is not allowed"),
    ("../x", "'/' is not allowed"), ("", "empty"), ("kubelet;reboot", "';' is not allowed"),
    ("nvidia*", "'*' is not allowed"), ("gpu-agent@.service", "template without an instance"),
    ("@x.service", "nothing before '@'"), ("a@b@c", "more than one '@'"), (".service", "nothing before '.service'"),
    ("x" * 248, "longer than 255"), ("k\u00e9let", "'\u00e9' is not allowed"), ("a\nb", "'\\n' is not allowed"),
])
def test_unit_names_refused(unit, reason):
    problems = unit_names_problems("mig_gpu_clients", ["kubelet", unit])
    assert len(problems) == 1, problems
    assert problems[0].startswith("mig_gpu_clients[1] %r is not a systemd unit name" % unit[:80]), problems
    assert reason in problems[0], problems


def test_unit_names_list_and_entries():
    assert unit_names_problems("mig_gpu_clients", []) == []
    assert unit_names_problems("mig_gpu_clients", "kubelet") == [
        "mig_gpu_clients must be a list of systemd unit names, got 'kubelet'"]
    assert unit_names_problems("mig_gpu_clients", [5])[0].startswith("mig_gpu_clients[0] 5 is not a systemd unit name")
    assert len(unit_names_problems("mig_gpu_clients", ["--now", "-H", "ok"])) == 2


def test_run_variables_check_the_gpu_clients():
    assert run_variable_problems({"mig_gpu_clients": ["kubelet", "nvsm"]}) == []
    assert run_variable_problems({"mig_gpu_clients": ["kubelet", "--now"]})[0].startswith("mig_gpu_clients[1] '--now'")

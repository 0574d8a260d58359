"""_preflight: the variable and GPU-read checks the preflight makes for every host, message by message."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import (
    gpu_models,
    host_problems,
    read_problems,
    variable_problems,
)


def test_defaults_have_no_problem():
    assert variable_problems({}) == []


@pytest.mark.parametrize("serial", [1, "1", "25%", "100%", [1, "25%"], ["5", 10, "50%"]])
def test_valid_batch_sizes(serial):
    assert variable_problems({"gpufleet_rollout_serial": serial}) == []


@pytest.mark.parametrize("serial", [0, "0", "101%", "x%", [], ["1", "x%"], "1,2", -1, "0%"])
def test_invalid_batch_sizes_name_the_value(serial):
    problems = variable_problems({"gpufleet_rollout_serial": serial})
    assert len(problems) == 1 and problems[0].startswith('gpufleet_rollout_serial must be a number of hosts, a percentage ("25%")')


@pytest.mark.parametrize("budget,ok", [(0, True), ("0", True), (100, True), ("55", True), (101, False), ("150", False),
                                       (-1, False), ("5.5", False), ("07", False)])
def test_failure_budget(budget, ok):
    problems = variable_problems({"gpufleet_rollout_max_fail_percentage": budget})
    assert problems == ([] if ok else ["gpufleet_rollout_max_fail_percentage must be an integer from 0 to 100, got '%s'" % budget])


def test_every_variable_problem_at_once():
    problems = variable_problems({"gpufleet_mig_backend": "hosts", "gpufleet_rollout_serial": ["1", "x%"],
                                  "gpufleet_rollout_max_fail_percentage": 150, "gpufleet_verify_pods": "sometimes",
                                  "mig_configs": "not-a-dict"})
    assert problems == [
        "gpufleet_mig_backend must be 'host' or 'operator', got 'hosts'",
        'gpufleet_rollout_serial must be a number of hosts, a percentage ("25%") or a list of them, got ["1", "x%"]',
        "gpufleet_rollout_max_fail_percentage must be an integer from 0 to 100, got '150'",
        "gpufleet_verify_pods must be 'always', 'changed' or 'never', got 'sometimes'",
        'mig_configs must be a mapping of config name to mig-parted items, got "not-a-dict"',
    ]


def test_models_and_read():
    gpus = [{"pci_device_id": "0x233010DE"}, {"pci_device_id": "0x233010DE"}, {"pci_device_id": "0x20B010DE"}]
    assert gpu_models(None, gpus) == ["0x233010DE", "0x20B010DE"]
    assert gpu_models("H100-80GB", gpus) == ["H100-80GB"]
    assert read_problems(None, {"gpufleet_gpus": [], "gpufleet_gpus_reason": "nvidia-smi was not found"}) == [
        "no GPU found (nvidia-smi was not found)"]
    assert read_problems("H100-80GB", {"gpufleet_gpus": [], "gpufleet_gpus_reason": "x"}) == []
    assert read_problems(None, {}) == []  # not read (unreachable): the rollout reports it


def test_host_problems_keep_the_order():
    values = {"ansible_facts": {"gpufleet_gpus": [], "gpufleet_gpus_reason": "none"}, "gpufleet_verify_pods": "x"}
    assert host_problems(values, ["mig first"]) == [
        "mig first", "no GPU found (none)", "gpufleet_verify_pods must be 'always', 'changed' or 'never', got 'x'"]


def test_the_backend_and_what_dra_needs_are_checked_per_host():
    values = {"gpufleet_gpu_backend": "dra", "ansible_facts": {"gpufleet_gpus": [{"driver_version": "560.1"}]}}
    assert host_problems(values, []) == ["NVIDIA driver 560.1 is too old for the DRA driver: 565 or newer is required"]
    assert host_problems({"gpufleet_gpu_backend": "both"}, []) == [
        "gpufleet_gpu_backend must be 'device-plugin' or 'dra', got 'both'"]


def test_the_mig_drain_scope_is_gpu_or_node():
    """Issue 38: gpufleet_mig_drain_scope picks the rollout's drain (the pods of the changing GPUs, or all)."""
    assert variable_problems({"gpufleet_mig_drain_scope": "gpu"}) == variable_problems({}) == []
    assert variable_problems({"gpufleet_mig_drain_scope": "node"}) == []
    assert variable_problems({"gpufleet_mig_drain_scope": "GPU"}) == [
        "gpufleet_mig_drain_scope must be 'gpu' or 'node', got 'GPU'"]

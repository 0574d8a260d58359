"""_dra_preflight: the backend variable and what DRA needs, message by message."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import (
    alpha_gates,
    backend_problem,
    cluster_problems,
    dra_host_problems,
    gate_problems,
    gate_values,
    parse_kubernetes_version,
)

GPUS_580 = {"gpufleet_gpus": [{"index": 0, "driver_version": "580.65.06"}]}


def dra(**extra):
    values = {"gpufleet_gpu_backend": "dra", "ansible_facts": GPUS_580}
    values.update(extra)
    return values


def test_device_plugin_is_the_default_and_needs_nothing():
    assert dra_host_problems({}) == []
    assert dra_host_problems({"gpufleet_gpu_backend": "device-plugin", "gpu_operator_values": {"cdi": {"enabled": False}}}) == []


def test_a_dra_host_with_what_it_needs_has_no_problem():
    assert dra_host_problems(dra()) == []


@pytest.mark.parametrize("value", ["DRA", "both", "", None, 1])
def test_unknown_backend_is_named(value):
    assert backend_problem(value) == "gpufleet_gpu_backend must be 'device-plugin' or 'dra', got %r" % (value,)


def test_both_backends_on_one_node_is_refused():
    problem = dra_host_problems({"gpufleet_gpu_backend": ["dra", "device-plugin"]})
    assert len(problem) == 1 and "names both backends" in problem[0] and "never both" in problem[0]


def test_old_driver_is_named_with_the_minimum():
    facts = {"gpufleet_gpus": [{"driver_version": "560.35.03"}, {"driver_version": "560.35.03"}]}
    assert dra_host_problems(dra(ansible_facts=facts)) == [
        "NVIDIA driver 560.35.03 is too old for the DRA driver: 565 or newer is required"]


def test_cdi_off_in_the_operator_values_is_refused():
    problems = dra_host_problems(dra(gpu_operator_values={"cdi": {"enabled": False}}))
    assert len(problems) == 1 and problems[0].startswith("CDI is off (gpu_operator_values.cdi.enabled: false)")


@pytest.mark.parametrize("strategy,gate", [("time-slicing", "TimeSlicingSettings"), ("mps", "MPSSupport")])
def test_sharing_through_dra_names_its_alpha_gate(strategy, gate):
    config = {"name": "shared", "strategy": strategy}
    problems = dra_host_problems(dra(gpu_sharing_config=config))
    assert problems == ["sharing config 'shared': %s through DRA needs the driver's alpha feature gate %s "
                        "(gpufleet_dra_feature_gates: {%s: true})" % (strategy, gate, gate)]
    assert dra_host_problems(dra(gpu_sharing_config=config, gpufleet_dra_feature_gates={gate: True})) == []


def test_gates_the_driver_refuses_together():
    merged, problems = gate_values({"DynamicMIG": True, "MPSSupport": True, "DeviceMetadata": True})
    assert problems == []
    assert gate_problems(merged) == [
        "gpufleet_dra_feature_gates: DynamicMIG and MPSSupport are mutually exclusive in the DRA driver",
        "gpufleet_dra_feature_gates: DeviceMetadata requires PassthroughSupport to be enabled too"]
    assert alpha_gates(merged) == ["DeviceMetadata", "DynamicMIG", "MPSSupport"]


def test_unknown_or_non_boolean_gates():
    problems = gate_values({"DynamicMig": True, "MPSSupport": "yes"})[1]
    assert problems[0].startswith("gpufleet_dra_feature_gates: unknown gate 'DynamicMig'")
    assert problems[1] == "gpufleet_dra_feature_gates: MPSSupport must be true or false, got 'yes'"
    assert gate_values([])[1] == ["gpufleet_dra_feature_gates must be a mapping of gate name to true/false, got []"]


def test_dynamic_mig_is_refused_with_or_without_a_host_layout():
    for config in ("all-1g.10gb", "all-disabled"):
        problems = dra_host_problems(dra(gpufleet_dra_feature_gates={"DynamicMIG": True},
                                         mig_selection={"config": config}))
        assert len(problems) == 1 and "DynamicMIG is not supported" in problems[0]


@pytest.mark.parametrize("text,parsed", [("v1.34.2", (1, 34)), ("v1.35.0-gke.1", (1, 35)), ("v1.33+", (1, 33)),
                                         ("garbage", (0, 0))])
def test_kubernetes_versions(text, parsed):
    assert parse_kubernetes_version(text) == parsed


def test_cluster_without_resource_v1_is_named():
    assert cluster_problems("v1.34.2", ["resource.k8s.io/v1", "resource.k8s.io/v1beta2"]) == []
    assert cluster_problems("v1.33.4", ["resource.k8s.io/v1beta1"]) == [
        "Kubernetes v1.33.4 is too old for DRA: 1.34 or newer is required (resource.k8s.io/v1 is GA from 1.34)",
        "the API server does not serve resource.k8s.io/v1 (it serves resource.k8s.io/v1beta1): DRA is not available "
        "on this cluster"]
    problem = cluster_problems("v1.34.2", [])[0]
    assert problem.endswith("(it serves no resource.k8s.io version): DRA is not available on this cluster")

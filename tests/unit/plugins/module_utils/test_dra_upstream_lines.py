"""The DRA driver's release lines as upstream has them (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0, v0.4.1,
main 9593204 = chart 0.5.0-dev): order, chart name, selector, tolerations, gates per version, DynamicMIG, driver
root, prerequisites (issue 42)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _dra_versions as versions
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import (
    cluster_problems,
    dra_host_problems,
    gate_values,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_values import DraValuesError, driver_values

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
OURS = {"key": "gpufleet.sharing/maintenance", "operator": "Exists", "effect": "NoSchedule"}


def dra(**extra):
    values = {"gpufleet_gpu_backend": "dra", "ansible_facts": {"gpufleet_gpus": [{"driver_version": "580.65.06"}]}}
    values.update(extra)
    return values


@pytest.mark.parametrize("older,newer", [("25.12.0", "0.4.1"), ("25.12.0", "0.5.0"), ("0.4.1", "0.5.0"),
                                         ("25.8.1", "25.12.0"), ("0.5.0-rc.1", "0.5.0"), ("v25.3.2", "25.8.0")])
def test_releases_are_ordered_as_upstream(older, newer):
    assert versions.version_key(older) < versions.version_key(newer)


def test_an_unknown_line_is_not_guessed():
    with pytest.raises(ValueError, match="not a release line"):
        versions.version_key("24.9.0")
    with pytest.raises(ValueError, match="not a DRA driver version"):
        versions.version_key("latest")


def test_chart_name_selector_and_the_first_upgrade():
    assert versions.chart_name("25.12.0") == "nvidia-dra-driver-gpu"
    assert versions.chart_name("0.4.1") == versions.chart_name("0.5.0") == "dra-driver-nvidia-gpu"
    assert versions.selector("dra-driver-nvidia-gpu") == "dra-driver-nvidia-gpu-component=kubelet-plugin"
    assert versions.upgrade_name_override("nvidia-dra-driver-gpu", {}, "dra-driver-nvidia-gpu") == "nvidia-dra-driver-gpu"
    assert versions.upgrade_name_override("dra-driver-nvidia-gpu", {"nameOverride": "nvidia-dra-driver-gpu"},
                                          "dra-driver-nvidia-gpu") == "nvidia-dra-driver-gpu"
    assert versions.upgrade_name_override("dra-driver-nvidia-gpu", {}, "dra-driver-nvidia-gpu") == ""


def test_tolerations_are_written_only_when_they_add_to_the_chart_defaults():
    assert "tolerations" not in driver_values({}, [], chart_tolerations=[GPU_TAINT])["kubeletPlugin"]
    assert "tolerations" not in driver_values({}, [GPU_TAINT], chart_tolerations=[GPU_TAINT])["kubeletPlugin"]
    assert driver_values({}, [OURS], chart_tolerations=[GPU_TAINT])["kubeletPlugin"]["tolerations"] == [GPU_TAINT, OURS]


@pytest.mark.parametrize("version,known", [("25.12.0", False), ("0.4.1", True), ("0.5.0", True)])
def test_device_metadata_is_known_from_0_4(version, known):
    gates = {"DeviceMetadata": True, "PassthroughSupport": True}
    problems = gate_values(gates, version)[1]
    assert (problems == []) is known, problems
    if not known:
        assert problems == ["gpufleet_dra_feature_gates: DeviceMetadata is unknown to the DRA driver 25.12.0 "
                            "(the plugin exits 'unrecognized feature gate'); it is known from 0.4.0"]
        with pytest.raises(DraValuesError):
            driver_values(gates, [], version="25.12.0")


def test_gates_new_in_0_5_and_the_exclusion_added_in_0_4():
    assert gate_values({"ConsumableShares": True}, "0.5.0")[1] == []
    assert "unknown to the DRA driver 0.4.1" in gate_values({"ConsumableShares": True}, "0.4.1")[1][0]
    assert driver_values({"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}, [], version="25.12.0")
    with pytest.raises(DraValuesError, match="PassthroughSupport and NVMLDeviceHealthCheck"):
        driver_values({"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}, [], version="0.4.1")


@pytest.mark.parametrize("config", ["all-disabled", "all-1g.10gb", None])
def test_dynamic_mig_is_refused_naming_why(config):
    problems = dra_host_problems(dra(gpufleet_dra_feature_gates={"DynamicMIG": True}, mig_config=config))
    assert len(problems) == 1 and problems[0].startswith("gpufleet_dra_feature_gates: DynamicMIG is not supported")
    assert "every possible MIG placement" in problems[0] and "DestroyUnknownMIGDevices" in problems[0]


def test_driver_root_follows_the_driver_mode():
    assert driver_values({}, [], driver_root="/run/nvidia/driver")["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert driver_values({}, [], driver_root="/")["nvidiaDriverRoot"] == "/"
    with pytest.raises(DraValuesError, match="nvidiaDriverRoot"):
        driver_values({}, [], {"nvidiaDriverRoot": "/"}, driver_root="/run/nvidia/driver")


def test_preflight_says_when_it_cannot_know_the_driver_root():
    assert dra_host_problems(dra(gpu_operator_driver_enabled=True)) == []
    problems = dra_host_problems(dra(gpu_operator_driver_enabled="{{ later }}"))
    assert len(problems) == 1 and "cannot tell where the NVIDIA driver is" in problems[0]
    assert dra_host_problems(dra(gpu_operator_driver_enabled="maybe",
                                 dra_driver_values={"nvidiaDriverRoot": "/opt/nvidia"})) == []


def test_prerequisites_are_upstreams():
    assert dra_host_problems(dra(ansible_facts={"gpufleet_gpus": [{"driver_version": "565.57.01"}]})) == []
    assert dra_host_problems(dra(ansible_facts={"gpufleet_gpus": [{"driver_version": "560.35.03"}]})) == [
        "NVIDIA driver 560.35.03 is too old for the DRA driver: 565 or newer is required"]
    assert cluster_problems("v1.34.2", ["resource.k8s.io/v1"]) == []
    assert cluster_problems("v1.34.1", ["resource.k8s.io/v1"]) == [
        "Kubernetes v1.34.1 is too old for the DRA driver: 1.34.2 or newer is required"]


def test_the_rollout_restart_finds_the_plugin_pods_of_every_release():
    """roles/dra rollout_node restarts the kubelet plugin by dra_driver_kubelet_plugin_selectors: it must match the
    pods of a fresh 0.4+/0.5 install (new chart name) and of a release upgraded from 25.12.0 (nameOverride)."""
    import os

    import yaml

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(root, "roles", "dra", "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    selectors = defaults["dra_driver_kubelet_plugin_selectors"]
    for version in ("25.12.0", "0.4.1", "0.5.0"):
        assert versions.selector(versions.chart_name(version)) in selectors
    upgraded = versions.upgrade_name_override(versions.OLD_CHART, {}, versions.NEW_CHART)
    assert versions.selector(upgraded) in selectors
    with open(os.path.join(root, "roles", "dra", "tasks", "rollout_node.yml"), encoding="utf-8") as handle:
        assert "pod_selectors: \"{{ dra_driver_kubelet_plugin_selectors }}\"" in handle.read()


def test_the_modules_chart_version_check_is_the_drivers_order():
    assert versions.chart_version_problems("0.5.0") == versions.chart_version_problems(None) == []
    assert versions.chart_version_problems("v25.12.0") == []
    assert versions.chart_version_problems("24.9.0") == [
        "invalid chart_version: '24.9.0' is not a release line of the DRA driver (calendar lines: 25.3, 25.8, 25.12)"]
    assert versions.chart_version_problems("0.5")[0].startswith("invalid chart_version: '0.5' is not a DRA driver version")

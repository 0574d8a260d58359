"""_dra_values: the DRA driver's chart values and each backend's node labels."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_values import (
    BACKEND_LABEL,
    DEVICE_PLUGIN_LABEL,
    DraValuesError,
    driver_values,
    node_labels,
    split_nodes,
)

OURS = {"key": "gpufleet.sharing/maintenance", "operator": "Exists", "effect": "NoSchedule"}


def test_values_select_the_dra_nodes_and_keep_the_chart_toleration():
    values = driver_values({}, [OURS], chart_tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                                           "effect": "NoSchedule"}])
    assert values["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert values["gpuResourcesEnabledOverride"] is True
    assert values["kubeletPlugin"]["nodeSelector"] == {BACKEND_LABEL: "dra"}
    assert values["kubeletPlugin"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, OURS]
    assert "featureGates" not in values


def test_gates_are_passed_as_asked_and_refused_when_the_driver_would():
    assert driver_values({"MPSSupport": True}, [])["featureGates"] == {"MPSSupport": True}
    with pytest.raises(DraValuesError) as err:
        driver_values({"DynamicMIG": True, "PassthroughSupport": True}, [])
    assert err.value.problems == ["gpufleet_dra_feature_gates: DynamicMIG and PassthroughSupport are mutually "
                                  "exclusive in the DRA driver"]


def test_extra_values_merge_but_may_not_contradict():
    values = driver_values({}, [], {"logVerbosity": "6", "image": {"tag": "v25.8.1"}})
    assert values["logVerbosity"] == "6" and values["image"] == {"tag": "v25.8.1"}
    with pytest.raises(DraValuesError) as err:
        driver_values({}, [], {"resources": {"gpus": {"enabled": False}}})
    assert err.value.problems == ["values.resources.gpus.enabled is False but the DRA backend needs True"]


def test_node_labels_for_each_backend():
    assert node_labels("dra", {DEVICE_PLUGIN_LABEL: "true"}) == {DEVICE_PLUGIN_LABEL: "false", BACKEND_LABEL: "dra"}
    assert node_labels("dra", {DEVICE_PLUGIN_LABEL: "false", BACKEND_LABEL: "dra"}) == {}
    assert node_labels("device-plugin", {DEVICE_PLUGIN_LABEL: "false", BACKEND_LABEL: "dra"}) == {
        DEVICE_PLUGIN_LABEL: "true", BACKEND_LABEL: None}
    assert node_labels("device-plugin", {DEVICE_PLUGIN_LABEL: "false"}) == {}


def test_a_node_on_both_backends_is_refused():
    assert split_nodes(["b", "a"], ["c"]) == (["a", "b"], ["c"])
    with pytest.raises(DraValuesError) as err:
        split_nodes(["a", "b"], ["b"])
    assert err.value.problems[0].startswith("node b: asked on both backends")


def test_no_toleration_asked_keeps_the_chart_default():
    assert "tolerations" not in driver_values({}, [])["kubeletPlugin"]

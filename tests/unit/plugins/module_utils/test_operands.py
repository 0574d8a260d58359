"""_operands: what a pause records and changes, what a restore puts back (pure)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _operands as ops

DP = "nvidia.com/gpu.deploy.device-plugin"
GFD = "nvidia.com/gpu.deploy.gpu-feature-discovery"
DCGMX = "nvidia.com/gpu.deploy.dcgm-exporter"
DCGM = "nvidia.com/gpu.deploy.dcgm"
NVSM = "nvidia.com/gpu.deploy.nvsm"


def test_pause_records_every_label_and_pauses_only_the_true_ones():
    labels = {DP: "true", GFD: "true", DCGMX: "false"}
    record, changes = ops.plan_pause(labels, ops.DEFAULT_OPERANDS, None)
    assert record == {DP: "true", GFD: "true", DCGMX: "false", DCGM: None, NVSM: None}
    assert changes == {DP: ops.PAUSED, GFD: ops.PAUSED}


def test_a_second_pause_keeps_the_first_record():
    labels = {DP: ops.PAUSED, GFD: ops.PAUSED, DCGMX: "false"}
    earlier = {DP: "true", GFD: "true", DCGMX: "false", DCGM: None, NVSM: None}
    record, changes = ops.plan_pause(labels, ops.DEFAULT_OPERANDS, earlier)
    assert record == earlier
    assert changes == {}


def test_restore_puts_back_previous_values_only_where_still_paused():
    record = {DP: "true", GFD: "true", DCGMX: "false", DCGM: None, NVSM: "true"}
    labels = {DP: ops.PAUSED, GFD: "false", DCGMX: "false", NVSM: ops.PAUSED}
    assert ops.plan_restore(labels, record) == {DP: "true", NVSM: "true"}
    assert ops.plan_restore({DP: ops.PAUSED}, {DP: None}) == {DP: None}


def test_apps_to_wait_follows_the_true_values():
    record = {DP: "true", DCGMX: "false", NVSM: "true"}
    assert ops.apps_to_wait(record, record, ops.OPERAND_APPS) == [
        "nvidia-device-plugin-daemonset", "nvidia-device-plugin-mps-control-daemon"]
    assert ops.apps_to_wait(record, {DP: "true"}, ops.READY_APPS) == ["nvidia-device-plugin-daemonset"]


def test_unknown_operands_and_a_bad_record():
    assert ops.unknown_operands(["device-plugin", "drivr"]) == ["drivr"]
    assert ops.node_record({"metadata": {}}) is None
    good = {"metadata": {"annotations": {ops.PAUSED_ANNOTATION: ops.encode_record({DP: "true", DCGM: None})}}}
    assert ops.node_record(good) == {DP: "true", DCGM: None}
    for text in ("{", json.dumps(["x"]), json.dumps({"other": "true"}), json.dumps({DP: 1})):
        with pytest.raises(ValueError, match=ops.PAUSED_ANNOTATION):
            ops.node_record({"metadata": {"annotations": {ops.PAUSED_ANNOTATION: text}}})


CLIENT = "nvidia.com/gpu.deploy.client"


def test_client_label_paused_only_when_the_node_carries_it():
    """mig-parted v0.15.0 pauses nvidia.com/gpu.deploy.client only when present; false stays false."""
    record = {DP: "true"}
    assert ops.plan_client_pause({DP: "true"}, record) == ({DP: "true"}, {})
    assert ops.plan_client_pause({CLIENT: ""}, record) == ({DP: "true"}, {})
    assert ops.plan_client_pause({CLIENT: "true"}, record) == ({DP: "true", CLIENT: "true"}, {CLIENT: ops.PAUSED})
    assert ops.plan_client_pause({CLIENT: "false"}, {}) == ({CLIENT: "false"}, {})
    assert ops.plan_client_pause({CLIENT: "agents"}, {}) == ({CLIENT: "agents"}, {CLIENT: ops.PAUSED})
    # A re-run after an interrupted pause keeps the first record and changes nothing.
    assert ops.plan_client_pause({CLIENT: ops.PAUSED}, {CLIENT: "true"}) == ({CLIENT: "true"}, {})
    assert ops.plan_restore({CLIENT: ops.PAUSED}, {CLIENT: "agents"}) == {CLIENT: "agents"}


def _pod(name, namespace, selector, kind="DaemonSet", controller=True):
    return {"metadata": {"name": name, "namespace": namespace,
                         "ownerReferences": [{"kind": kind, "name": "x", "controller": controller}]},
            "spec": {"nodeName": "n1", "nodeSelector": selector}}


def test_client_pods_are_daemonset_pods_whose_node_selector_uses_the_key():
    pods = [_pod("agent-1", "monitoring", {CLIENT: "true"}),
            _pod("agent-2", "health", {CLIENT: "paused-for-mig-change", "x": "y"}),
            _pod("rs-1", "monitoring", {CLIENT: "true"}, kind="ReplicaSet"),
            _pod("loose", "monitoring", {CLIENT: "true"}, controller=False),
            _pod("plugin", "gpu-operator", {DP: "true"}),
            {"metadata": {"name": "bare", "namespace": "default"}, "spec": {}}]
    assert ops.client_pods(pods) == ["health/agent-2", "monitoring/agent-1"]

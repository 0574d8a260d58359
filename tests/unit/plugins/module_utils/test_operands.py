"""_operands: what a pause records and changes, what a restore puts back (pure)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils import _operands as ops

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

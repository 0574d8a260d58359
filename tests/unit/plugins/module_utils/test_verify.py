# -*- coding: utf-8 -*-
"""Unit tests for _verify: comparison, pod log judgement, pod manifest, user checks, reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _sharing as s
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _expected
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _node_gpus
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof import _verify as v

H100 = "NVIDIA H100 80GB HBM3"


def ts(replicas=4, **extra):
    raw = {"name": "ts", "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    raw.update(extra)
    return s.parse_config(raw)


def expected_h100(replicas=4, count=8, **extra):
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "count": count, "product": H100}])
    return _expected.expected_node("gpu-a", gpus, "none", ts(replicas, **extra), labelled=True)


def node_obj(capacity, labels, allocatable=None, name="gpu-a"):
    return {
        "metadata": {"name": name, "labels": dict(labels)},
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity if allocatable is None else allocatable)},
    }


GOOD_LABELS = {
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.replicas": "4",
    "nvidia.com/gpu.sharing-strategy": "time-slicing",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
    "nvidia.com/mps.capable": "false",
    "nvidia.com/device-plugin.config": "ts",
    "kubernetes.io/hostname": "gpu-a",
}


def test_matching_node_is_all_green():
    checks = v.compare_node(expected_h100(), node_obj({"nvidia.com/gpu": "32", "cpu": "64"}, GOOD_LABELS))
    assert checks and all(c.ok for c in checks)
    kinds = {c.kind for c in checks}
    assert kinds == {"capacity", "allocatable", "label"}


def test_capacity_and_allocatable_mismatch_are_reported():
    checks = v.compare_node(expected_h100(), node_obj({"nvidia.com/gpu": "8"}, GOOD_LABELS, allocatable={}))
    failed = [c for c in checks if not c.ok]
    assert [(c.kind, c.name, c.expected, c.actual) for c in failed] == [
        ("capacity", "nvidia.com/gpu", "32", "8"),
        ("allocatable", "nvidia.com/gpu", "32", "absent"),
    ]
    assert failed[0].message == "capacity nvidia.com/gpu is 8, the plan says 32"


def test_label_mismatch_and_absence():
    labels = dict(GOOD_LABELS)
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    del labels["nvidia.com/gpu.replicas"]
    checks = v.compare_node(expected_h100(), node_obj({"nvidia.com/gpu": "32"}, labels))
    failed = {c.name: c for c in checks if not c.ok}
    assert set(failed) == {"nvidia.com/gpu.product", "nvidia.com/gpu.replicas"}
    assert failed["nvidia.com/gpu.replicas"].actual == "absent"
    assert "'NVIDIA-H100-80GB-HBM3-SHARED'" in failed["nvidia.com/gpu.product"].message


def test_unexpected_nvidia_resource_is_a_mismatch_but_zero_or_other_vendors_are_not():
    capacity = {"nvidia.com/gpu": "32", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-2g.20gb": "0", "example.com/foo": "3"}
    checks = v.compare_node(expected_h100(), node_obj(capacity, GOOD_LABELS))
    failed = [(c.kind, c.name) for c in checks if not c.ok]
    assert failed == [("capacity", "nvidia.com/mig-1g.10gb"), ("allocatable", "nvidia.com/mig-1g.10gb")]


def test_expected_zero_matches_absent_or_zero():
    exp = expected_h100(rename_by_default=True)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 32}
    labels = dict(GOOD_LABELS, **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    for capacity in ({"nvidia.com/gpu.shared": "32"}, {"nvidia.com/gpu.shared": "32", "nvidia.com/gpu": "0"}):
        assert all(c.ok for c in v.compare_node(exp, node_obj(capacity, labels)))
    failed = [c for c in v.compare_node(exp, node_obj({"nvidia.com/gpu.shared": "32", "nvidia.com/gpu": "8"}, labels)) if not c.ok]
    assert [c.name for c in failed] == ["nvidia.com/gpu", "nvidia.com/gpu"]


def test_product_suffix_checks_when_base_unknown():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 8}])
    exp = _expected.expected_node("gpu-a", gpus, "none", ts())
    labels = dict(GOOD_LABELS)
    assert all(c.ok for c in v.compare_node(exp, node_obj({"nvidia.com/gpu": "32"}, labels)))
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    failed = [c for c in v.compare_node(exp, node_obj({"nvidia.com/gpu": "32"}, labels)) if not c.ok]
    assert [(c.name, c.expected) for c in failed] == [("nvidia.com/gpu.product", "<product>-SHARED")]


def test_missing_node():
    checks = v.compare_node(expected_h100(), None)
    assert len(checks) == 1 and not checks[0].ok and "not in the cluster" in checks[0].message


def test_non_integer_quantity_is_a_mismatch():
    checks = v.compare_node(expected_h100(), node_obj({"nvidia.com/gpu": "32k"}, GOOD_LABELS))
    assert any(not c.ok and c.actual == "32k" for c in checks)


# ---------------------------------------------------------------------------------------------
# pods


def test_pods_for_one_per_resource_type_with_capacity():
    gpus = _node_gpus.node_gpus_from_plan([
        {"model": "H100-80GB", "count": 1, "product": H100},
        {"model": "H100-80GB", "count": 1, "mig": {"1g.10gb+me": 1, "3g.40gb": 1}, "product": H100},
    ])
    exp = _expected.expected_node("n", gpus, "mixed", None)
    wanted = v.pods_for(exp)
    assert [(w.resource, w.device_kind, w.mig_profile) for w in wanted] == [
        ("nvidia.com/gpu", "gpu", None),
        ("nvidia.com/mig-1g.10gb.me", "mig", "1g.10gb.me"),
        ("nvidia.com/mig-3g.40gb", "mig", "3g.40gb"),
    ]


def test_pods_for_renamed_and_single():
    assert [(w.resource, w.device_kind) for w in v.pods_for(expected_h100(rename_by_default=True))] == [("nvidia.com/gpu.shared", "gpu")]
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}])
    single = v.pods_for(_expected.expected_node("n", gpus, "single", None))
    assert [(w.resource, w.device_kind, w.mig_profile) for w in single] == [("nvidia.com/gpu", "mig", "1g.10gb")]


GPU_LOG = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)\n"
MIG_LOG = GPU_LOG + "  MIG 1g.10gb       Device  0: (UUID: MIG-9d14fb21-4ae1-546f-a636-011582899c39)\n"
MIG_ME_LOG = GPU_LOG + "  MIG 1g.10gb+me    Device  0: (UUID: MIG-9d14fb21-4ae1-546f-a636-011582899c39)\n"


@pytest.mark.parametrize("wanted, log, ok, seen", [
    (v.PodSpecWanted("n", "nvidia.com/gpu", "gpu"), GPU_LOG, True, "1 GPU"),
    (v.PodSpecWanted("n", "nvidia.com/gpu", "gpu"), MIG_LOG, False, "MIG device(s) 1g.10gb instead of a full GPU"),
    (v.PodSpecWanted("n", "nvidia.com/gpu", "gpu"), "No devices were found\n", False, "no GPU line in the log"),
    (v.PodSpecWanted("n", "nvidia.com/mig-1g.10gb", "mig", "1g.10gb"), MIG_LOG, True, "MIG 1g.10gb"),
    (v.PodSpecWanted("n", "nvidia.com/mig-1g.10gb.me", "mig", "1g.10gb.me"), MIG_ME_LOG, True, "MIG 1g.10gb+me"),
    (v.PodSpecWanted("n", "nvidia.com/mig-2g.20gb", "mig", "2g.20gb"), MIG_LOG, False, "MIG devices 1g.10gb"),
    (v.PodSpecWanted("n", "nvidia.com/mig-2g.20gb", "mig", "2g.20gb"), GPU_LOG, False, "no MIG device in the log (1 full GPU line(s))"),
    (v.PodSpecWanted("n", "nvidia.com/mig-1g.10gb", "mig", "1g.10gb"), MIG_LOG + MIG_LOG.splitlines()[1] + "\n", False,
     "MIG devices 1g.10gb, 1g.10gb"),
])
def test_judge_pod_log(wanted, log, ok, seen):
    assert v.judge_pod_log(wanted, log) == (ok, seen)


def test_pod_check_outcomes():
    wanted = v.PodSpecWanted("n", "nvidia.com/gpu", "gpu")
    assert v.pod_check(wanted, "Succeeded", GPU_LOG).ok
    timeout = v.pod_check(wanted, "Timeout", reason="FailedScheduling: 0/3 nodes are available")
    assert not timeout.ok and timeout.actual == "timeout" and "FailedScheduling: 0/3" in timeout.message
    failed = v.pod_check(wanted, "Failed", log="boom\n")
    assert not failed.ok and failed.actual == "failed" and "boom" in failed.message


def test_pending_reason_prefers_failed_scheduling():
    events = [
        {"type": "Normal", "reason": "Scheduled", "message": "x"},
        {"type": "Warning", "reason": "FailedScheduling", "message": "0/5 nodes are available: 5 Insufficient nvidia.com/mig-7g.80gb."},
    ]
    assert v.pending_reason({}, events) == "FailedScheduling: 0/5 nodes are available: 5 Insufficient nvidia.com/mig-7g.80gb."
    assert v.pending_reason({}, [{"type": "Warning", "reason": "BackOff", "message": "pulling"}]) == "BackOff: pulling"
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no node"}
    pod = {"status": {"phase": "Pending", "conditions": [condition]}}
    assert v.pending_reason(pod, []) == "Unschedulable: no node"
    pod = {"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ErrImagePull"}}}]}}
    assert v.pending_reason(pod, []) == "ErrImagePull: "
    assert v.pending_reason(None, []) == "phase unknown"


def test_pod_manifest_is_restricted_and_labelled():
    wanted = v.PodSpecWanted("gpu-a", "nvidia.com/mig-1g.10gb", "mig", "1g.10gb")
    name = v.pod_name("r1", "gpu-a.example.com", "nvidia.com/mig-1g.10gb", 3)
    assert name == "gpufleet-verify-r1-3-gpu-a-example-com-mig-1g-10gb" and len(name) <= 63
    body = v.pod_manifest(wanted, name, "gpufleet-verify", "r1", "busybox:1", ["nvidia-smi", "-L"], hostname="gpu-a-host")
    meta, spec = body["metadata"], body["spec"]
    assert meta["labels"][v.MANAGED_BY_LABEL] == "gpufleet.sharing"
    assert meta["labels"][v.RUN_ID_LABEL] == "r1"
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "gpu-a-host"}
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]
    assert container["command"] == ["nvidia-smi", "-L"]
    assert container["resources"] == {"limits": {"nvidia.com/mig-1g.10gb": 1}}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    long_name = v.pod_name("abcdef12", "x" * 80, "nvidia.com/gpu", 12)
    assert len(long_name) <= 63 and not long_name.endswith("-")


# ---------------------------------------------------------------------------------------------
# user checks


def test_user_checks():
    obj = node_obj({"nvidia.com/gpu": "32"}, GOOD_LABELS)
    obj["spec"] = {"unschedulable": True}
    checks = v.user_checks("gpu-a", obj, [
        {"name": "replicas label", "expression": "metadata.labels.\"nvidia.com/gpu.replicas\"", "equals": "4"},
        {"name": "schedulable", "expression": "!spec.unschedulable"},
        {"name": "has gpu", "expression": "status.capacity.\"nvidia.com/gpu\""},
        {"name": "broken", "expression": "metadata.[["},
        {"name": "wrong", "expression": "metadata.name", "equals": "gpu-b"},
    ])
    result = {c.name: c for c in checks}
    assert result["replicas label"].ok
    assert not result["schedulable"].ok and result["schedulable"].expected == "truthy"
    assert result["has gpu"].ok
    assert not result["broken"].ok and "bad JMESPath" in result["broken"].message
    assert not result["wrong"].ok and result["wrong"].actual == '"gpu-a"'
    assert v.user_checks("gpu-a", obj, []) == []


# ---------------------------------------------------------------------------------------------
# reports


def sample_checks():
    good = v.compare_node(expected_h100(), node_obj({"nvidia.com/gpu": "32"}, GOOD_LABELS))
    bad_node = node_obj({"nvidia.com/gpu": "8"}, dict(GOOD_LABELS, **{"nvidia.com/gpu.replicas": "1"}), name="gpu-b")
    exp_b = _expected.expected_node("gpu-b", _node_gpus.node_gpus_from_plan([{"count": 8, "product": H100}]), "none", ts(), labelled=True)
    bad = v.compare_node(exp_b, bad_node)
    pods = [v.pod_check(v.PodSpecWanted("gpu-a", "nvidia.com/gpu", "gpu"), "Succeeded", GPU_LOG),
            v.pod_check(v.PodSpecWanted("gpu-b", "nvidia.com/gpu", "gpu"), "Timeout", reason="FailedScheduling: <no & fit>")]
    return good + bad + pods, [expected_h100(), exp_b]


def test_summary_and_table():
    checks = sample_checks()[0]
    summary = v.summarize(checks)
    assert summary["ok"] is False and summary["failed_nodes"] == ["gpu-b"] and summary["nodes"] == 2
    table = v.render_table(checks)
    lines = table.splitlines()
    assert lines[0].split() == ["NODE", "RESULT", "ADVERTISED", "PODS", "PROBLEMS"]
    assert lines[1].startswith("gpu-a") and " OK " in lines[1] and "gpu=32" in lines[1] and "1/1" in lines[1]
    assert lines[2].startswith("gpu-b") and " FAIL " in lines[2] and "capacity nvidia.com/gpu is 8, the plan says 32" in lines[2]
    assert "(+" in lines[2]  # more than three problems are summarised
    assert lines[-1].startswith("FAILED:")
    green = [c for c in checks if c.node == "gpu-a"]
    assert v.render_table(green).splitlines()[-1].startswith("PASSED:")


def test_json_report_round_trips():
    checks, expected = sample_checks()
    report = v.build_report(checks, expected, "r1", extra={"pods": []})
    doc = json.loads(v.render_json(report))
    assert doc["run_id"] == "r1" and doc["summary"]["failed"] == report["summary"]["failed"]
    assert [n["node"] for n in doc["nodes"]] == ["gpu-a", "gpu-b"]
    assert doc["nodes"][0]["resources"] == {"nvidia.com/gpu": 32}
    assert doc["pods"] == []


def test_junit_is_valid_xml_with_failures():
    checks = sample_checks()[0]
    root = ET.fromstring(v.render_junit(checks, elapsed=1.5))
    suite = root.find("testsuite")
    assert int(suite.get("tests")) == len(checks)
    failures = suite.findall("testcase/failure")
    assert len(failures) == sum(1 for c in checks if not c.ok)
    messages = [f.get("message") for f in failures]
    assert any("<no & fit>" in m for m in messages)  # escaped and parsed back
    assert {tc.get("classname") for tc in suite.findall("testcase")} == {"gpu-a", "gpu-b"}


def test_config_checks_compare_what_the_plugin_loads():
    """docs/reference/specs.md §9.11: the allocation policy is part of what is verified (the ConfigMap
    key read back must hold what the plan renders); node choices and keys not written yet are not."""
    planned = s.parse_config({"name": "ts", "resources": [{"name": "gpu", "replicas": 4}], "nodes": ["a"],
                              "shared_devices_allocation_policy": "packed"})
    live_same = s.parse_rendered_config("ts", s.render_config(planned))
    live_other = s.parse_config({"name": "ts", "resources": [{"name": "gpu", "replicas": 4}]})
    [same] = v.config_checks({"ts": planned, "new": planned}, {"ts": live_same}, "cm")
    assert same.ok and same.kind == "config"
    [other] = v.config_checks({"ts": planned}, {"ts": live_other}, "cm")
    assert not other.ok
    assert "ConfigMap cm key ts differs from the plan in shared_devices_allocation_policy" in other.message
    assert "None, the plan says 'packed'" in other.message

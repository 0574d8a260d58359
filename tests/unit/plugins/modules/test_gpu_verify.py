# -*- coding: utf-8 -*-
"""gpu_verify against an in-memory API: comparison, pods (parallel, cleaned up), check mode, reports."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import parse_config, render_config  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.modules import gpu_verify  # noqa: E402

GPU_LOG = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)\n"
MIG_LOG = GPU_LOG + "  MIG 1g.10gb       Device  0: (UUID: MIG-9d14fb21-4ae1-546f-a636-011582899c39)\n"
TS4 = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": ["gpu-a"]}


def cluster():
    fake = FakeK8s()
    fake.add("ClusterPolicy", "cluster-policy", spec={"mig": {"strategy": "mixed"},
                                                      "devicePlugin": {"config": {"name": "dp", "default": ""}}})
    fake.add("ConfigMap", "dp", "gpu-operator", data={"ts4": render_config(parse_config(TS4))})
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a", "labels": {
        "kubernetes.io/hostname": "gpu-a", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED", "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/mps.capable": "false", "nvidia.com/mig.strategy": "mixed", "nvidia.com/device-plugin.config": "ts4"}},
        status={"capacity": {"nvidia.com/gpu": "32"}, "allocatable": {"nvidia.com/gpu": "32"}})
    fake.add("Node", "gpu-m", metadata={"name": "gpu-m", "labels": {
        "kubernetes.io/hostname": "gpu-m", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mps.capable": "false", "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none", "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}},
        status={"capacity": {"nvidia.com/mig-1g.10gb": "7"}, "allocatable": {"nvidia.com/mig-1g.10gb": "7"}})
    fake.add("Node", "cpu-1", metadata={"name": "cpu-1", "labels": {}})

    def behaviour(pod):
        resource = list(pod["spec"]["containers"][0]["resources"]["limits"])[0]
        return "Succeeded", MIG_LOG if "mig" in resource else GPU_LOG
    fake.pod_behaviour = behaviour
    return fake


PLAN = {"gpu-a": [{"model": "H100-80GB", "count": 8, "product": "NVIDIA H100 80GB HBM3"}],
        "gpu-m": {"gpus": [{"model": "H100-80GB", "mig": {"1g.10gb": 7}, "product": "NVIDIA H100 80GB HBM3"}]}}


def test_green_cluster_with_pods_cleaned_up(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "junit": True, "run_id": "t1"}, fake, monkeypatch)
    assert not failed, result["msg"] if failed else None
    assert result["ok"] is True and result["changed"] is False
    pods = result["report"]["pods"]
    assert sorted((p["node"], p["resource"], p["outcome"]) for p in pods) == [
        ("gpu-a", "nvidia.com/gpu", "Succeeded"), ("gpu-m", "nvidia.com/mig-1g.10gb", "Succeeded")]
    assert not [k for k in fake.objects if k[0] == "Pod"]  # deleted
    assert ("Namespace", None, "gpufleet-verify") in fake.objects
    assert "gpu-a  OK" in result["report_table"] and result["report_table"].splitlines()[-1].startswith("PASSED")
    assert ET.fromstring(result["report_junit"]).find("testsuite").get("failures") == "0"
    # nodes + ClusterPolicy + ConfigMap, namespace, 2 creates, 1 pod list, 2 logs, 1 delete-collection
    # (+1: the list of earlier runs' leftover pods; +1: the pods that hold devices now, issue 38)
    assert result["api_requests"] == 3 + 1 + 1 + 2 + 1 + 2 + 1 + 1


def test_cluster_read_back_without_plan(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, {"pods": False}, fake, monkeypatch)
    assert not failed and result["ok"]
    nodes = {n["node"]: n for n in result["report"]["nodes"]}
    assert sorted(nodes) == ["gpu-a", "gpu-m"]  # GPU nodes only
    assert nodes["gpu-a"]["config"] == "ts4" and nodes["gpu-a"]["resources"] == {"nvidia.com/gpu": 32}


def test_mismatch_is_red_and_pods_still_cleaned(monkeypatch):
    fake = cluster()
    fake.obj("Node", "gpu-a")["status"]["capacity"]["nvidia.com/gpu"] = "8"

    def behaviour(pod):
        return "Succeeded", MIG_LOG  # the gpu pod gets a MIG device: wrong kind
    fake.pod_behaviour = behaviour
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "configs": [TS4]}, fake, monkeypatch)
    assert failed and result["ok"] is False
    assert "capacity nvidia.com/gpu is 8, the plan says 32" in result["msg"]
    assert "MIG device(s) 1g.10gb instead of a full GPU" in result["msg"]
    assert result["report"]["summary"]["failed_nodes"] == ["gpu-a"]
    assert not [k for k in fake.objects if k[0] == "Pod"]


def test_pending_pod_times_out_with_the_scheduler_reason(monkeypatch):
    fake = cluster()

    def behaviour(pod):
        return "Pending", ""
    fake.pod_behaviour = behaviour
    fake.events = [{"involvedObject": {"kind": "Pod", "name": "gpufleet-verify-t2-0-gpu-a-gpu"}, "type": "Warning",
                    "reason": "FailedScheduling", "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]
    result, failed = run(gpu_verify, {"nodes": ["gpu-a"], "node_gpus": PLAN, "run_id": "t2", "pod_timeout": 1,
                                      "poll_interval": 0.2, "fail_on_mismatch": False}, fake, monkeypatch)
    assert not failed and result["ok"] is False
    pod = result["report"]["pods"][0]
    assert pod["outcome"] == "Timeout"
    assert pod["reason"] == "FailedScheduling: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert not [k for k in fake.objects if k[0] == "Pod"]


def test_check_mode_only_compares(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN}, fake, monkeypatch, check_mode=True)
    assert not failed and result["ok"] and result["report"]["pods"] == []
    assert fake.writes == []


def test_user_checks_and_bad_plan_are_reported(monkeypatch):
    fake = cluster()
    plan = dict(PLAN, **{"gpu-m": [{"model": "H100-80GB", "mig": {"7g.80gb": 2}}]})
    checks = [{"name": "is gpu-a", "expression": "metadata.name", "equals": "gpu-a"}]
    result, failed = run(gpu_verify, {"nodes": ["gpu-a", "gpu-m", "ghost"], "node_gpus": plan, "checks": checks,
                                      "pods": False, "fail_on_mismatch": False}, fake, monkeypatch)
    assert not failed
    by = {(c["node"], c["kind"]): c for c in result["report"]["checks"]}
    assert by[("gpu-a", "user")]["ok"]
    assert ("gpu-m", "user") not in by  # no expectation, so only the plan problem is reported
    assert not by[("gpu-m", "plan")]["ok"] and "invalid for H100-80GB" in by[("gpu-m", "plan")]["message"]
    assert not by[("ghost", "node")]["ok"]


def test_bad_run_id(monkeypatch):
    result, failed = run(gpu_verify, {"run_id": "Not_Valid"}, cluster(), monkeypatch)
    assert failed and "run_id" in result["msg"]


def test_wait_timeout_polls_until_the_node_matches(monkeypatch):
    fake = cluster()
    node = fake.obj("Node", "gpu-a")
    node["status"]["capacity"]["nvidia.com/gpu"] = "8"
    calls = {"n": 0}
    original = fake.list

    def listing(kind, **kwargs):
        if kind == "Node":
            calls["n"] += 1
            if calls["n"] == 3:  # the device plugin publishes on the third look
                node["status"]["capacity"]["nvidia.com/gpu"] = "32"
        return original(kind, **kwargs)
    monkeypatch.setattr(fake, "list", listing)
    monkeypatch.setattr(gpu_verify.time, "sleep", lambda _s: None)
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "wait_timeout": 30, "pods": False}, fake, monkeypatch)
    assert not failed and result["ok"] and calls["n"] == 3
    # without waiting the same state is red
    node["status"]["capacity"]["nvidia.com/gpu"] = "8"
    calls["n"] = -100
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "pods": False, "fail_on_mismatch": False}, fake, monkeypatch)
    assert not result["ok"]


# ------------------------------------------------------------------ the sharing probe (issue 15)

PROBE_LINE = ('{"probe": "gpufleet-probe", "ok": true, "backend": "torch", "dtype": "bf16", '
              '"device": {"name": "NVIDIA H100 80GB HBM3", "smi": "GPU 0: NVIDIA H100 80GB HBM3", "mig": %s}, '
              '"small": {"n": 1024, "tflops": %s, "ms": %s}, "large": {"n": 8192, "tflops": %s, "ms": 2.0}, '
              '"copy_gbps": 2000.0, "memory": {"total_mib": 81559, "allocatable_mib": 80000}}\n')
PROGRAM = "print('gpufleet-probe')"


def probe_cluster():
    fake = cluster()

    def behaviour(pod):
        phase = pod["metadata"]["labels"].get("gpufleet.sharing/probe-phase")
        mig = "nvidia.com/mig-1g.10gb" in pod["spec"]["containers"][0]["resources"]["limits"]
        if phase == "contended":
            return "Succeeded", PROBE_LINE % ("false", 10.0, 0.4, 150.0)
        return "Succeeded", PROBE_LINE % ("true" if mig else "false", 60.0, 0.04, 90.0 if mig else 600.0)
    fake.pod_behaviour = behaviour
    return fake


def test_probe_runs_exclusive_then_contended_pods_and_reports(monkeypatch):
    fake = probe_cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "pods": False, "probe": True, "probe_program": PROGRAM,
                                      "probe_min_share": 0.5, "junit": True, "run_id": "p1",
                                      "fail_on_mismatch": False}, fake, monkeypatch)
    assert not failed, result.get("msg")
    created = [w for w in fake.writes if w[:2] == ("create", "Pod")]
    assert len(created) == 1 + 4 + 1  # gpu-a alone, gpu-a's 4 sharers at once, gpu-m's slice alone
    rows = {r["node"]: r for r in result["report"]["probe"]}
    assert rows["gpu-a"]["sharing"] == "time-slicing" and rows["gpu-a"]["replicas"] == 4
    assert rows["gpu-a"]["aggregate_tflops"] == 600.0 and rows["gpu-a"]["share"] == 0.67  # small: 10 / (60 / 4)
    assert rows["gpu-a"]["inflation"] == 10.0 and rows["gpu-a"]["isolation"] == "no"
    assert rows["gpu-m"]["sharing"] == "mig" and rows["gpu-m"]["expected_fraction"] == 0.143
    assert fake.obj("ConfigMap", "gpufleet-probe", "gpufleet-verify")["data"] == {"gpufleet_probe.py": PROGRAM}
    assert not [k for k in fake.objects if k[0] == "Pod"]  # deleted
    assert result["ok"] is True and "PER-REPLICA" in result["report_table"]
    assert 'name="probe.gpu-a.nvidia.com/gpu.share" value="0.67"' in result["report_junit"]


def test_probe_in_check_mode_runs_nothing(monkeypatch):
    fake = probe_cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "probe": True, "probe_program": PROGRAM}, fake, monkeypatch,
                         check_mode=True)
    assert not failed and result["report"]["probe"] == [] and fake.writes == []


def test_probe_bad_options_fail_before_any_request(monkeypatch):
    fake = probe_cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "probe": True, "probe_seconds": 0,
                                      "probe_max_inflation": -2.0}, fake, monkeypatch)
    assert failed and result["problems"] == [
        "probe_seconds must be an integer from 1 to 3600, got 0",
        "probe_max_inflation must be a number from 1 to 1000 (or 0: only report), got -2.0: contended time / time "
        "alone; below 1 can never pass",
        "probe_program must hold the probe's source (the verify role reads roles/verify/files/gpufleet_probe.py)"]
    assert fake.writes == []


def test_the_report_carries_each_nodes_gpus_and_mig_placements(monkeypatch):
    """Issue 24: the HTML report draws the GPUs from the report data (one source with the JSON)."""
    fake = cluster()
    result, failed = run(gpu_verify, {"node_gpus": PLAN, "run_id": "t5"}, fake, monkeypatch)
    assert not failed
    gpus = result["report"]["gpus"]
    assert sorted(gpus) == ["gpu-a", "gpu-m"] and len(gpus["gpu-a"]) == 8
    assert not any(g["mig"] or g["instances"] for g in gpus["gpu-a"])
    mig, = gpus["gpu-m"]
    assert (mig["model"], mig["memory_slices"], mig["layout"]) == ("H100-80GB", 8, {"1g.10gb": 7})
    assert sorted(i["start"] for i in mig["instances"]) == list(range(7))  # where the planner places them

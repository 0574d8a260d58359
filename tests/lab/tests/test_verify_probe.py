"""The sharing probe end to end on the lab (issue 15): gpu_verify with probe=true delivers the
collection's probe program through a ConfigMap, starts one probe pod alone per node and resource,
then as many at once as a shared resource has replicas; the lab kubelet runs the real program with
its lab CPU backend. The report gets a probe section (rows, table, JUnit properties) for MIG,
time-sliced and MPS resources; thresholds fail verification; unusable output fails with a message
naming the node and the pod. No SSH hosts: the API server runs in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from labtools import BUILD, REPO, run_module, wait_until
from test_cluster_modules_sharing import install_operator, start_lab

from report_dom import disagreements  # (the HTML report's reader, shared with the unit tests)

PROBE = os.path.join(REPO, "roles", "verify", "files", "gpufleet_probe.py")
TS3 = {"name": "ts3", "strategy": "time-slicing", "resources": [{"name": "nvidia.com/gpu", "replicas": 3}], "nodes": ["ts-1"]}
MPS2 = {"name": "mps2", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}], "nodes": ["mps-1"]}
# The ClusterPolicy leaves the MIG strategy to each node's config (MPS2 is refused under mixed, issue 25
# part 2): mig-1 needs a config that says mixed for its MIG devices to be advertised.
MIGX = {"name": "mig-mixed", "strategy": "none", "mig_strategy": "mixed", "nodes": ["mig-1"]}
NODE_GPUS = {
    "ts-1": [{"model": "H100-80GB", "count": 1, "product": "NVIDIA H100 80GB HBM3"}],
    "mps-1": [{"model": "H200", "count": 1, "product": "NVIDIA H200"}],
    "gpu-1": [{"model": "H200", "count": 1, "product": "NVIDIA H200"}],
    "mig-1": [{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}],
}


def program():
    with open(PROBE, encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("probe"))
    running = start_lab(lab_dir, [("ts-1", "H100-80GB", 1), ("mps-1", "H200", 1), ("gpu-1", "H200", 1),
                                  ("mig-1", "A100-40GB", 1)])
    running.tmp = lab_dir
    try:
        install_operator(running)
        store = running.store
        store.patch("v1/nodes", None, "mig-1", {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}},
                    "application/merge-patch+json")
        wait_until("MIG all-balanced on mig-1", lambda: (store.get("v1/nodes", None, "mig-1")["metadata"].get("labels") or {})
                   .get("nvidia.com/mig.config.state") == "success", timeout=60)
        result = run_module("gpu_sharing", {"kubeconfig": running.kubeconfig, "configs": [TS3, MPS2, MIGX], "node_gpus": NODE_GPUS,
                                            "wait_timeout": 60, "wait_interval": 0.5}, lab_dir)
        assert not result.get("failed"), result.get("msg")
        wait_until("mig-1 advertises its MIG devices", lambda: (store.get("v1/nodes", None, "mig-1").get("status") or {})
                   .get("capacity", {}).get("nvidia.com/mig-3g.20gb") == "1", timeout=60)
        yield running
    finally:
        running.stop()


def probe_args(lab, **extra):
    args = {"kubeconfig": lab.kubeconfig, "configs": [TS3, MPS2, MIGX], "node_gpus": NODE_GPUS, "pods": False, "probe": True,
            "probe_program": program(), "probe_seconds": 1, "pod_timeout": 60, "poll_interval": 0.3, "junit": True}
    args.update(extra)
    return args


def leftovers(lab):
    return [p for p in lab.store.items("v1/pods", "gpufleet-verify") if not p["metadata"].get("deletionTimestamp")]


def test_probe_section_for_time_sliced_mps_and_mig(lab):
    result = run_module("gpu_verify", probe_args(lab), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    rows = {(r["node"], r["resource"]): r for r in result["report"]["probe"]}
    assert sorted(rows) == [("gpu-1", "nvidia.com/gpu"), ("mig-1", "nvidia.com/mig-1g.5gb"), ("mig-1", "nvidia.com/mig-2g.10gb"),
                            ("mig-1", "nvidia.com/mig-3g.20gb"), ("mps-1", "nvidia.com/gpu"), ("ts-1", "nvidia.com/gpu")]
    assert {r["backend"] for r in rows.values()} == {"lab CPU backend"}
    ts, mps = rows[("ts-1", "nvidia.com/gpu")], rows[("mps-1", "nvidia.com/gpu")]
    assert (ts["sharing"], ts["replicas"], ts["isolation"]) == ("time-slicing", 3, "no")
    assert (mps["sharing"], mps["replicas"], mps["isolation"]) == ("mps", 2, "yes")
    assert mps["memory_allocatable_mib"] == mps["memory_total_mib"] // 2
    assert ts["aggregate_tflops"] > 0 and ts["share"] > 0 and ts["inflation"] > 0
    assert "NVIDIA H100 80GB HBM3" in ts["smi"] and ts["device"] == "NVIDIA H100 80GB HBM3"
    slices = {r["resource"]: r for r in rows.values() if r["node"] == "mig-1"}
    assert [slices["nvidia.com/mig-%s" % p]["expected_fraction"] for p in ("1g.5gb", "2g.10gb", "3g.20gb")] == [0.143, 0.286, 0.429]
    assert all(r["isolation"] == "hardware (MIG)" and r["mig"] for r in slices.values())
    assert slices["nvidia.com/mig-3g.20gb"]["share"] == 1.0
    table = result["report_table"]
    assert "SHARING" in table and "lab CPU backend" in table and "time-slicing" in table
    properties = {p.get("name"): p.get("value") for p in ET.fromstring(result["report_junit"]).iter("property")}
    assert properties["probe.ts-1.nvidia.com/gpu.isolation"] == "no"
    assert properties["probe.mps-1.nvidia.com/gpu.backend"] == "lab CPU backend"
    wait_until("probe pods removed", lambda: not leftovers(lab), timeout=20)
    configmap = lab.store.get("v1/configmaps", "gpufleet-verify", "gpufleet-probe")
    assert configmap["data"] == {"gpufleet_probe.py": program()}  # left in place, like the namespace


def test_mps_is_judged_against_a_share_of_the_whole_gpu(lab):
    """Issue 25: the control daemon caps a lone MPS client too (thread percentage 100/N), so the
    exclusive run of an MPS resource is already about 1/N of the GPU. Judged against that run / N,
    two sharers that each got their half looked like 2x their fair share (2.65 in the lab before
    the fix); judged against the whole H200 next door (gpu-1, unshared) / N, they get about their
    half. The lab's figures come from this machine's busy CPU, phases seconds apart: the share is
    checked as the formula on the row's own figures, not as a number."""
    result = run_module("gpu_verify", probe_args(lab, nodes=["mps-1", "gpu-1"], probe_seconds=2), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    rows = {r["node"]: r for r in result["report"]["probe"]}
    mps, whole = rows["mps-1"], rows["gpu-1"]
    assert (mps["sharing"], mps["replicas"], whole["sharing"]) == ("mps", 2, "none")
    # measured side by side in the exclusive phase: the lone client computes half the time only
    assert mps["exclusive_tflops"] < 0.8 * whole["exclusive_tflops"], (mps, whole)
    assert mps["baseline"] == "whole GPU on node gpu-1" and mps["baseline_tflops"] == whole["exclusive_tflops"]
    share = min(mps["shared_tflops"] / (whole["exclusive_tflops"] / 2),
                mps["shared_small_tflops"] / (whole["exclusive_small_tflops"] / 2))
    assert mps["share"] == pytest.approx(share, abs=0.011), mps
    assert "(of %.4g/2)" % whole["exclusive_tflops"] in result["report_table"]


def test_thresholds_fail_verification(lab):
    # the strictest values the bounds allow (issue 21: above 1 / below 1 could never pass and are refused)
    result = run_module("gpu_verify", probe_args(lab, nodes=["ts-1"], probe_min_share=1.0, probe_max_inflation=1.0,
                                                 fail_on_mismatch=False), lab.tmp)
    assert result["ok"] is False
    checks = {c["name"]: c for c in result["report"]["checks"] if c["kind"] == "probe" and c["node"] == "ts-1"}
    share, latency = checks["nvidia.com/gpu share"], checks["nvidia.com/gpu latency"]
    # Sharing always costs latency (the lab's time-slicing interleaves), so 1.0x can never pass.
    assert not latency["ok"] and "probe nvidia.com/gpu on node ts-1: latency" in latency["message"], latency
    # The share is judged against the exclusive run: the lab's CPU figures vary with the machine's load, so
    # the worst sharer may reach its full fair share; the verdict must follow the figure either way.
    (row,) = [r for r in result["report"]["probe"] if r["node"] == "ts-1" and r["resource"] == "nvidia.com/gpu"]
    assert share["ok"] is (row["share"] >= 1.0), (share, row)
    if not share["ok"]:
        assert ("probe nvidia.com/gpu on node ts-1: the worst sharer got" in share["message"]
                and "the minimum is 1.00" in share["message"]), share


@pytest.mark.parametrize("source, words", [
    ('print(\'{"probe": "gpufleet-probe", "ok": tr\')\n', "truncated or malformed JSON"),
    ("# gpufleet-probe that prints nothing\n", "the probe printed nothing"),
    ('print(\'{"probe": "gpufleet-probe", "ok": false, "error": "no GPU: none here"}\')\nraise SystemExit(2)\n',
     "the probe failed: no GPU: none here"),
])
def test_unusable_output_names_node_and_pod(lab, source, words):
    result = run_module("gpu_verify", probe_args(lab, nodes=["mps-1"], probe_program=source, fail_on_mismatch=False), lab.tmp)
    assert result["ok"] is False and result["report"]["probe"] == []
    failed = [c["message"] for c in result["report"]["checks"] if not c["ok"]]
    assert failed and all(m.startswith("probe pod gpufleet-verify-") and " on node mps-1 (nvidia.com/gpu, " in m
                          and words in m for m in failed), failed
    assert len(failed) == 3  # the exclusive pod and both sharers


def test_a_probe_that_never_finishes_is_reported_with_its_pod(lab):
    hangs = "import time  # gpufleet-probe that hangs\ntime.sleep(60)\n"
    result = run_module("gpu_verify", probe_args(lab, nodes=["ts-1"], probe_program=hangs, pod_timeout=2,
                                                 fail_on_mismatch=False), lab.tmp)
    failed = [c["message"] for c in result["report"]["checks"] if not c["ok"]]
    assert len(failed) == 4 and all(" on node ts-1 (nvidia.com/gpu, " in m and ": did not finish: " in m
                                    and "after 2s" in m for m in failed), failed
    wait_until("the hanging probe pods are stopped and removed", lambda: not leftovers(lab), timeout=20)


def test_probe_without_its_program_is_refused_and_changes_nothing(lab):
    result = run_module("gpu_verify", probe_args(lab, probe_program=None, probe_seconds=0), lab.tmp)
    assert result.get("failed")
    assert "probe_program must hold the probe's source" in result["msg"] and "probe_seconds must be an integer from 1" in result["msg"]
    assert leftovers(lab) == []


def test_the_verify_role_with_verify_probe_writes_the_probe_section(lab, tmp_path):
    """verify_probe: true through the role: the program comes from the role's files/, the reports
    on disk carry the probe section (JSON), the probe table (text) and JUnit properties."""
    reports = tmp_path / "reports"
    playbook = tmp_path / "verify-probe.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Verify with the probe", "hosts": "localhost", "gather_facts": False,
        "roles": [{"role": "gpufleet.sharing.verify", "vars": {
            "verify_kubeconfig": lab.kubeconfig, "verify_from_inventory": False, "verify_nodes": ["mps-1"],
            "verify_node_gpus": NODE_GPUS, "verify_configs": [TS3, MPS2, MIGX], "verify_pods": False,
            "verify_probe": True, "verify_probe_seconds": 1, "verify_pod_timeout": 60, "verify_junit": True,
            "verify_report_dir": str(reports)}}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                          capture_output=True, text=True, check=False, env=env, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    report = json.loads((reports / "gpufleet-verify.json").read_text())
    assert [(r["node"], r["sharing"], r["replicas"], r["backend"]) for r in report["probe"]] == [
        ("mps-1", "mps", 2, "lab CPU backend")]
    assert "ISOLATED" in (reports / "gpufleet-verify.txt").read_text()
    assert 'name="probe.mps-1.nvidia.com/gpu.isolation" value="yes"' in (reports / "gpufleet-verify.xml").read_text()
    # the HTML report beside them (issue 24), every figure the JSON's, the probe drawn
    html = (reports / "fleet-report.html").read_text()
    problems, shown = disagreements(html, report)
    assert problems == [] and "/probe/0/shared_tflops" in shown and 'data-node="mps-1"' in html

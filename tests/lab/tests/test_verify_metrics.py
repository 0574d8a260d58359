"""Per-pod GPU metrics check of gpu_verify on the lab (issue 13 part 5): with metrics=true the verification
pods hold for metrics_hold seconds after their command, and while they run each node's DCGM exporter is
scraped through the API server's pod proxy; every verification pod must have a series of its own. Without
per-pod attribution (KUBERNETES_VIRTUAL_GPUS) the time-sliced and MPS pods have none and the check fails
naming them; with it, time-sliced, MPS and MIG pods all pass. No SSH hosts: the API server runs in this process."""

from __future__ import annotations

import os

import yaml

from gpulab.cluster import access
from labtools import REPO, run_module, wait_until
# The probe tests' lab (three nodes: time-sliced, MPS, MIG all-balanced; sharing configs applied), one per module.
from test_verify_probe import MIGX, MPS2, NODE_GPUS, TS3, lab  # noqa: F401 pylint: disable=unused-import

PER_POD_ENV = [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"},
               {"name": "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "value": "true"}]


def verify_args(lab, **extra):
    args = {"kubeconfig": lab.kubeconfig, "configs": [TS3, MPS2, MIGX], "node_gpus": NODE_GPUS, "metrics": True,
            "metrics_hold": 3, "pod_timeout": 60, "poll_interval": 0.3, "fail_on_mismatch": False}
    args.update(extra)
    return args


def metrics_checks(result):
    return [c for c in result["report"]["checks"] if c["kind"] == "metrics"]


def exporters_with(lab, env_names):
    pods = [p for p in lab.store.items("v1/pods", "gpu-operator", label_selector="app=nvidia-dcgm-exporter")
            if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    names = [{e["name"] for e in p["spec"]["containers"][0].get("env") or []} for p in pods]
    return len(pods) == 3 and all(set(env_names) <= n for n in names)


def test_metrics_needs_pods(lab):
    result = run_module("gpu_verify", verify_args(lab, pods=False), lab.tmp)
    assert result.get("failed") and "metrics needs pods=true" in result["msg"]
    assert not lab.store.items("v1/pods", "gpufleet-verify")


def test_without_per_pod_attribution_the_shared_pods_fail(lab):
    result = run_module("gpu_verify", verify_args(lab), lab.tmp)
    assert result["ok"] is False
    checks = metrics_checks(result)
    failed = {c["node"] for c in checks if not c["ok"]}
    assert failed == {"ts-1", "mps-1"}, checks
    pods = {p["node"]: p["name"] for p in result["report"]["pods"]}
    for check in checks:
        if not check["ok"]:
            assert pods[check["node"]] in check["message"] and "nvidia.com/gpu" in check["message"]
    assert all(c["ok"] for c in checks if c["node"] == "mig-1") and len([c for c in checks if c["node"] == "mig-1"]) == 3


def test_with_per_pod_attribution_every_pod_has_a_series(lab):
    lab.store.patch("nvidia.com/v1/clusterpolicies", None, "cluster-policy", {"spec": {"dcgmExporter": {"env": PER_POD_ENV}}},
                    "application/merge-patch+json")
    wait_until("exporters with the per-pod env", lambda: exporters_with(lab, ["KUBERNETES_VIRTUAL_GPUS"]), timeout=60)
    result = run_module("gpu_verify", verify_args(lab, fail_on_mismatch=True), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    checks = metrics_checks(result)
    assert sorted({c["node"] for c in checks}) == ["gpu-1", "mig-1", "mps-1", "ts-1"] and all(c["ok"] for c in checks)
    assert not [p for p in lab.store.items("v1/pods", "gpufleet-verify") if not p["metadata"].get("deletionTimestamp")]


def rbac_documents(name):
    with open(os.path.join(REPO, "rbac", name), encoding="utf-8") as handle:
        return access.documents(yaml.safe_load_all(handle))


def test_the_shipped_role_allows_the_scrape_and_without_pods_proxy_the_pods_fail_naming_it(lab):
    access.apply(lab.tmp, rbac_documents("gpufleet-sharing.yml") + rbac_documents("bindings.yml"))
    kubeconfig = os.path.join(lab.tmp, "kubeconfig-gpufleet")
    access.service_account_kubeconfig(lab.tmp, "gpufleet", "gpufleet-sharing", kubeconfig)
    result = run_module("gpu_verify", verify_args(lab, kubeconfig=kubeconfig, fail_on_mismatch=True), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    role = rbac_documents("gpufleet-sharing.yml")[0]
    role["rules"] = [rule for rule in role["rules"] if rule["resources"] != ["pods/proxy"]]
    access.apply(lab.tmp, [role])
    try:
        result = run_module("gpu_verify", verify_args(lab, kubeconfig=kubeconfig), lab.tmp)
    finally:
        access.apply(lab.tmp, rbac_documents("gpufleet-sharing.yml"))
    failed = [c for c in metrics_checks(result) if not c["ok"]]
    # every verification pod's scrape is refused (six pods since the probe lab gained the unshared gpu-1)
    assert len(failed) == 6 and all('cannot get resource "pods/proxy"' in c["message"] for c in failed), failed

"""gpu_claim_templates and gpu_verify under DRA against the lab (resource.k8s.io/v1 served, the simulated
DRA kubelet plugin publishing ResourceSlices, the scheduler allocating claims with CEL, the kubelet
showing the allocated devices in `nvidia-smi -L`). Real modules; the tests run in file order.

Nodes: dm with two H100-80GB in 1g.10gb x 7 (14 MIG devices), df with one H100-80GB, MIG off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict

import pytest
from kubernetes import client, config

from dra_lab import CLASS_EXPR, DRIVER_NS, IMAGE, mig_layout
from labtools import BUILD, run_module, serve_lab, wait_until
from test_cluster_modules_sharing import auth, store_get

RESOURCE = "/apis/resource.k8s.io/v1"
PLANS = [{"node": "dm", "gpus": [{"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}}]},
         {"node": "df", "gpus": [{"model": "H100-80GB", "count": 1}]}]
KINDS = ["gpu-nvidia-h100-80gb-hbm3", "mig-1g-10gb"]


def slice_devices(lab: Any, node: str) -> int:
    items = (store_get(lab, RESOURCE + "/resourceslices") or {}).get("items") or []
    return sum(len(s["spec"].get("devices") or []) for s in items if s["spec"].get("nodeName") == node)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("dra-claims"))
    running, states = serve_lab(lab_dir, [("dm", "H100-80GB", 2), ("df", "H100-80GB", 1)])
    running.tmp = lab_dir
    try:
        mig_layout(states["dm"], {0: {"1g.10gb": 7}, 1: {"1g.10gb": 7}})
        api = config.new_client_from_config(config_file=running.kubeconfig)
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        for ns in (DRIVER_NS, "vision", "nlp"):
            core.create_namespace({"metadata": {"name": ns}})
        custom = client.CustomObjectsApi(api)
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):  # the driver chart's DeviceClasses
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", {
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": CLASS_EXPR % kind}}]}})
        labels = {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}
        apps.create_namespaced_daemon_set(DRIVER_NS, {
            "metadata": {"name": "nvidia-dra-driver-gpu-kubelet-plugin", "namespace": DRIVER_NS},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "gpus", "image": IMAGE, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}]}}}})
        wait_until("the plugins' slices", lambda: slice_devices(running, "dm") == 14 and slice_devices(running, "df") == 1,
                   timeout=60)
        yield running
    finally:
        running.stop()


def args(lab: Any, **extra: Any) -> Dict[str, Any]:
    result = dict(auth(lab), claim_templates=[{"namespaces": ["vision", "nlp"]}], node_plans=PLANS,
                  dra_nodes=["dm", "df"], configs=[])
    result.update(extra)
    return result


def test_a_profile_the_plan_does_not_have_changes_nothing(lab):
    result = run_module("gpu_claim_templates", args(lab, claim_templates=[{"namespaces": ["vision"], "kinds": ["3g.40gb"]}]),
                        lab.tmp)
    assert result.get("failed")
    assert "'3g.40gb' is not a device kind of the plan (the planned nodes have: %s)" % ", ".join(KINDS) in result["msg"]
    assert not (store_get(lab, RESOURCE + "/namespaces/vision/resourceclaimtemplates") or {}).get("items")


def test_check_mode_dry_runs_then_apply_then_changed_0(lab):
    checked = run_module("gpu_claim_templates", args(lab), lab.tmp, check_mode=True, diff=True)
    assert not checked.get("failed"), checked.get("msg")
    assert checked["changed"] and not (store_get(lab, RESOURCE + "/deviceclasses/mig-1g-10gb.gpufleet.sharing"))
    applied = run_module("gpu_claim_templates", args(lab), lab.tmp)
    assert applied["changed"] and applied["templates"] == checked["templates"]
    template = store_get(lab, RESOURCE + "/namespaces/vision/resourceclaimtemplates/mig-1g-10gb")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "mig-1g-10gb.gpufleet.sharing"
    again = run_module("gpu_claim_templates", args(lab), lab.tmp)
    assert not again.get("failed") and not again["changed"], again


def test_a_team_pod_asking_with_the_template_gets_one_mig_device(lab):
    core = client.CoreV1Api(config.new_client_from_config(config_file=lab.kubeconfig))
    core.create_namespaced_pod("vision", {"metadata": {"name": "train"}, "spec": {
        "restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "mig-1g-10gb"}],
        "containers": [{"name": "main", "image": "cuda", "command": ["nvidia-smi", "-L"],
                        "resources": {"claims": [{"name": "gpu"}]}}]}})
    wait_until("the pod finished", lambda: (core.read_namespaced_pod("train", "vision").status.phase or "") == "Succeeded",
               timeout=60)
    log = core.read_namespaced_pod_log("train", "vision")
    assert log.count("MIG 1g.10gb") == 1, log


def _claims(lab: Any) -> Dict[str, Any]:
    items = (store_get(lab, RESOURCE + "/namespaces/vision/resourceclaims") or {}).get("items") or []
    return {c["metadata"]["name"]: c for c in items}


def test_a_changed_count_re_creates_the_template_and_the_claims_made_from_it_stay(lab):
    """Issue 43 #1: the lab refuses a template's spec update (422 field is immutable), as the API server does;
    the module deletes and creates it again; the claim the pod "train" got from the old one keeps its spec."""
    two = [{"namespaces": ["vision", "nlp"], "kinds": ["1g.10gb"], "count": 2},
           {"namespaces": ["vision", "nlp"], "kinds": ["gpu-nvidia-h100-80gb-hbm3"]}]
    path = RESOURCE + "/namespaces/vision/resourceclaimtemplates/mig-1g-10gb"
    old = store_get(lab, path)
    claims = _claims(lab)
    assert len(claims) == 1
    planned = run_module("gpu_claim_templates", args(lab, claim_templates=two), lab.tmp, check_mode=True, diff=True)
    assert not planned.get("failed"), planned.get("msg")
    assert planned["changed"] and planned["replaced"] == ["nlp/mig-1g-10gb", "vision/mig-1g-10gb"]
    assert store_get(lab, path)["metadata"]["uid"] == old["metadata"]["uid"]
    applied = run_module("gpu_claim_templates", args(lab, claim_templates=two), lab.tmp)
    assert not applied.get("failed"), applied.get("msg")
    new = store_get(lab, path)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert _claims(lab) == claims  # the claim made from the old template is untouched
    core = client.CoreV1Api(config.new_client_from_config(config_file=lab.kubeconfig))
    core.create_namespaced_pod("vision", {"metadata": {"name": "train-two"}, "spec": {
        "restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "mig-1g-10gb"}],
        "containers": [{"name": "main", "image": "cuda", "command": ["nvidia-smi", "-L"],
                        "resources": {"claims": [{"name": "gpu"}]}}]}})
    wait_until("the pod finished", lambda: (core.read_namespaced_pod("train-two", "vision").status.phase or "") == "Succeeded",
               timeout=60)
    assert core.read_namespaced_pod_log("train-two", "vision").count("MIG 1g.10gb") == 2
    again = run_module("gpu_claim_templates", args(lab, claim_templates=two), lab.tmp)
    assert not again.get("failed") and not again["changed"], again
    back = run_module("gpu_claim_templates", args(lab), lab.tmp)  # count 1 again, for the tests after this one
    assert not back.get("failed") and back["replaced"] == ["nlp/mig-1g-10gb", "vision/mig-1g-10gb"], back


def test_verify_under_dra_slices_and_claim_bound_pods(lab):
    result = run_module("gpu_verify", dict(auth(lab), node_plans=PLANS, dra_nodes=["dm", "df"], configs=[], run_id="dra1",
                                           pod_timeout=60, poll_interval=0.3, junit=True), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    rows = {(c["node"], c["kind"], c["name"]): c for c in result["report"]["checks"]}
    assert rows[("dm", "slice", "gpu-0 mig 1g.10gb")]["actual"] == "7"
    pods = sorted((p["node"], p["resource"], p["ok"]) for p in result["report"]["pods"])
    assert pods == [("df", KINDS[0], True), ("dm", KINDS[1], True)]
    assert not (store_get(lab, RESOURCE + "/namespaces/gpufleet-verify/resourceclaims") or {}).get("items")


def test_verify_check_mode_creates_nothing(lab):
    result = run_module("gpu_verify", dict(auth(lab), node_plans=PLANS, dra_nodes=["dm", "df"], configs=[],
                                           namespace="gpufleet-verify-check"), lab.tmp, check_mode=True)
    assert not result.get("failed") and result["report"]["pods"] == []
    assert store_get(lab, "/api/v1/namespaces/gpufleet-verify-check") is None


PLAYBOOK = """
- name: Claim templates, quotas' mappings and the proof through the roles
  hosts: gpu_hosts
  gather_facts: false
  roles:
    - role: gpufleet.sharing.claim_templates
    - role: gpufleet.sharing.verify
  tasks:
    - name: Keep what the roles returned
      ansible.builtin.copy:
        content: "{{ {'templates': claim_templates_result.templates, 'checks': verify_result.report.checks,
                      'pods': verify_result.report.pods} | to_json }}"
        dest: "{{ result_file }}"
        mode: "0600"
      delegate_to: localhost
      run_once: true
"""


def test_the_roles_find_the_dra_hosts_from_gpufleet_gpu_backend(lab):
    tmp = lab.tmp
    gpus = {p["node"]: p["gpus"] for p in PLANS}
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "gpufleet_kubeconfig": lab.kubeconfig, "gpufleet_gpu_backend": "dra",
                                  "gpufleet_dra_claim_templates": [{"namespaces": ["nlp"], "kinds": ["1g.10gb"]}],
                                  "claim_templates_node_gpus": gpus, "verify_node_gpus": gpus, "verify_pod_timeout": 60,
                                  "verify_report_dir": os.path.join(tmp, "reports"),
                                  "result_file": os.path.join(tmp, "roles.json")},
                         "children": {"gpu_hosts": {"hosts": {"dm": {}, "df": {}}}}}}
    for name, text in (("inventory.json", json.dumps(inventory)), ("play.yml", PLAYBOOK)):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1")
    # The venv's ansible-playbook (beside this Python), not whichever one PATH finds first.
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([playbook, "-i", os.path.join(tmp, "inventory.json"), os.path.join(tmp, "play.yml")],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    with open(os.path.join(tmp, "roles.json"), encoding="utf-8") as handle:
        found = json.load(handle)
    assert found["templates"] == ["nlp/mig-1g-10gb"]
    assert {(c["node"], c["kind"]) for c in found["checks"]} >= {("dm", "slice"), ("df", "slice"), ("dm", "pod")}
    assert all(c["ok"] for c in found["checks"]), [c for c in found["checks"] if not c["ok"]]
    assert sorted(p["resource"] for p in found["pods"]) == KINDS

"""gpu_operator, node_maintenance, mig_operator_config and mig_node_config against the lab cluster.

The modules run as Ansible runs them (``python -m`` with an args file) and talk HTTPS to the lab's
virtual API server; the real helm 4 binary (gpulab.tools.ensure_helm) installs the lab stand-in
chart tests/lab/charts/gpu-operator-standin. The lab's operator controllers (not the collection)
decide when the ClusterPolicy is ready and what the MIG manager does, and faults are injected
through the lab's fault registry.

"Nothing changed" is checked with the store's cluster-wide resourceVersion, which moves on every
write (and only then).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from gpulab import gpustate
from gpulab.cluster import faults
from labtools import REPO, run_module, serve_lab, wait_settled, wait_until

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient

CHART = os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin")


# -- harness ---------------------------------------------------------------------------------------

class Lab(object):
    def __init__(self, tmp_path, hosts: List[Tuple[str, str, int]]):
        self.dir = str(tmp_path / "lab")
        os.makedirs(self.dir)
        self.tmp = str(tmp_path)
        self.registry = faults.FaultRegistry()
        self.server, self.state_files = serve_lab(self.dir, hosts, fault_registry=self.registry)
        self.kubeconfig = self.server.kubeconfig
        self.store = self.server.store
        self.k8s = K8sClient.connect({"kubeconfig": self.kubeconfig}, backoff_base=0.05)

    def rv(self) -> int:
        return self.store.resource_version()

    def run(self, module: str, args: Dict[str, Any], check: bool = False, diff: bool = False,
            env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return run_module(module, args, self.tmp, check_mode=check, diff=diff, env=env)

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def lab(tmp_path):
    running = Lab(tmp_path, [("gpu-a", "A100-40GB", 1), ("gpu-b", "H100-80GB", 1)])
    yield running
    running.stop()


@pytest.fixture
def helm(helm_binary, tmp_path):
    """A recording wrapper around the real helm (argv logged) with a private helm home."""
    log = tmp_path / "helm-argv.log"
    wrapper = tmp_path / "helm-recording"
    wrapper.write_text("#!%s\nimport json, os, sys\nwith open(%r, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
                       "os.execv(%r, [%r] + sys.argv[1:])\n" % (sys.executable, str(log), helm_binary, helm_binary))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "helm-home"
    env = {"HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_DATA_HOME": str(home / "data")}

    class Helm(object):
        binary = str(wrapper)
        environment = env

        @staticmethod
        def calls() -> List[List[str]]:
            if not log.exists():
                return []
            return [json.loads(line) for line in log.read_text().splitlines()]
    return Helm


def operator_args(lab, helm, **extra):
    args = {"chart_ref": CHART, "helm_binary": helm.binary, "kubeconfig": lab.kubeconfig,
            "mig_strategy": "mixed", "mig_manager_enabled": False, "driver_enabled": False,
            "wait_timeout": 60, "wait_interval": 0.5}
    args.update(extra)
    return args


def bumped_chart(tmp_path, version: str) -> str:
    """A copy of the stand-in chart with another version and one more CRD printer column."""
    target = str(tmp_path / ("chart-" + version))
    shutil.copytree(CHART, target)
    chart_yaml = os.path.join(target, "Chart.yaml")
    with open(chart_yaml, encoding="utf-8") as handle:
        text = handle.read().replace("version: 0.1.0", "version: %s" % version)
    with open(chart_yaml, "w", encoding="utf-8") as handle:
        handle.write(text)
    crd = os.path.join(target, "crds", "clusterpolicies.nvidia.com.yaml")
    with open(crd, encoding="utf-8") as handle:
        text = handle.read().replace(
            "        - name: Age\n",
            "        - name: Strategy\n          type: string\n          jsonPath: .spec.mig.strategy\n        - name: Age\n")
    with open(crd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return target


# -- gpu_operator -----------------------------------------------------------------------------------

def test_gpu_operator_lifecycle(lab, helm, tmp_path):
    env = helm.environment
    before = lab.rv()
    planned = lab.run("gpu_operator", operator_args(lab, helm), check=True, diff=True, env=env)
    assert planned["changed"] and planned["action"] == "installed", planned
    assert planned["diff"]["after"]["values"] == {"mig": {"strategy": "mixed"}, "migManager": {"enabled": False},
                                                  "driver": {"enabled": False}}
    assert lab.rv() == before, "check mode wrote to the cluster"
    assert lab.k8s.get("Namespace", "gpu-operator") is None

    installed = lab.run("gpu_operator", operator_args(lab, helm), env=env)
    assert installed["changed"] and installed["action"] == "installed", installed
    assert installed["cluster_policy_state"] == "ready"
    assert installed["crds"] == [{"name": "clusterpolicies.nvidia.com", "action": "created"}]
    namespace = lab.k8s.get("Namespace", "gpu-operator")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    policy = lab.k8s.get("ClusterPolicy", "cluster-policy")
    assert policy["spec"]["mig"] == {"strategy": "mixed"}
    assert policy["spec"]["migManager"]["enabled"] is False and policy["spec"]["driver"]["enabled"] is False
    assert installed["release"]["chart_version"] == "0.1.0" and installed["release"]["revision"] == 1

    # Values reach helm only through a file that is gone afterwards; never --set.
    upgrade_calls = [argv for argv in helm.calls() if argv[:2] == ["upgrade", "--install"]]
    assert len(upgrade_calls) == 1
    values_file = upgrade_calls[0][upgrade_calls[0].index("-f") + 1]
    assert not os.path.exists(values_file)
    assert not any(arg.startswith("--set") or "mixed" in arg for arg in upgrade_calls[0])

    assert installed["helm_version"].count(".") == 2  # helm ran, after its version check
    rv_installed = lab.rv()
    helm_runs = len(helm.calls())
    again = lab.run("gpu_operator", operator_args(lab, helm), env=env)
    assert not again["changed"] and again["action"] == "unchanged", again
    # Nothing to change, a local chart: the release from its records, the chart and its CRDs from its
    # files - no helm at all (issue 26).
    assert helm.calls()[helm_runs:] == [] and "helm_version" not in again
    assert again["crds"] == [{"name": "clusterpolicies.nvidia.com", "action": "unchanged"}]
    assert lab.rv() == rv_installed, "an unchanged run wrote to the cluster"

    planned = lab.run("gpu_operator", operator_args(lab, helm, mig_strategy="single"), check=True, env=env)
    assert planned["changed"] and planned["action"] == "upgraded"
    assert planned["values_changes"] == ["mig.strategy: 'mixed' -> 'single'"]
    assert lab.rv() == rv_installed, "check mode wrote to the cluster"

    # New chart version: its CRDs are applied first (Helm would not), then the release upgraded.
    chart_v2 = bumped_chart(tmp_path, "0.2.0")
    upgraded = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_v2, mig_strategy="single"), env=env)
    assert upgraded["changed"] and upgraded["action"] == "upgraded", upgraded
    assert upgraded["crds"] == [{"name": "clusterpolicies.nvidia.com", "action": "updated"}]
    columns = lab.k8s.get("CustomResourceDefinition", "clusterpolicies.nvidia.com")["spec"]["versions"][0][
        "additionalPrinterColumns"]
    assert "Strategy" in [c["name"] for c in columns]
    assert upgraded["release"]["chart_version"] == "0.2.0" and upgraded["release"]["revision"] == 2
    assert lab.k8s.get("ClusterPolicy", "cluster-policy")["spec"]["mig"]["strategy"] == "single"
    assert not lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_v2, mig_strategy="single"),
                       env=env)["changed"]

    rv = lab.rv()
    planned = lab.run("gpu_operator", {"state": "absent", "helm_binary": helm.binary, "kubeconfig": lab.kubeconfig},
                      check=True, env=env)
    assert planned["changed"] and planned["action"] == "uninstalled" and lab.rv() == rv
    removed = lab.run("gpu_operator", {"state": "absent", "helm_binary": helm.binary, "kubeconfig": lab.kubeconfig},
                      env=env)
    assert removed["changed"] and removed["action"] == "uninstalled"
    wait_until("ClusterPolicy deleted", lambda: lab.k8s.get("ClusterPolicy", "cluster-policy") is None)
    assert lab.k8s.get("CustomResourceDefinition", "clusterpolicies.nvidia.com") is not None  # CRDs stay
    gone = lab.run("gpu_operator", {"state": "absent", "helm_binary": helm.binary, "kubeconfig": lab.kubeconfig},
                   env=env)
    assert not gone["changed"] and gone["action"] == "absent"


def test_gpu_operator_bad_input_changes_nothing(lab, helm):
    rv = lab.rv()
    contradiction = lab.run("gpu_operator", operator_args(lab, helm, values={"mig": {"strategy": "single"}}),
                            env=helm.environment)
    assert contradiction["failed"]
    assert contradiction["msg"] == "invalid values: mig_strategy='mixed' contradicts values.mig.strategy='single'"
    wrong_version = lab.run("gpu_operator", operator_args(lab, helm, chart_version="9.9.9"), env=helm.environment)
    assert wrong_version["failed"] and "does not match the chart" in wrong_version["msg"]
    unpinned = lab.run("gpu_operator", operator_args(lab, helm, chart_ref="nvidia/gpu-operator"), env=helm.environment)
    assert unpinned["failed"] and "chart_version is required" in unpinned["msg"]
    assert lab.rv() == rv
    assert not [argv for argv in helm.calls() if argv[:1] in (["upgrade"], ["install"], ["uninstall"])]


def test_gpu_operator_never_ready_reports_diagnosis(lab, helm):
    lab.registry.add("named", condition="clusterpolicy-never-ready", count=None)
    result = lab.run("gpu_operator", operator_args(lab, helm, wait_timeout=4, wait_interval=0.5),
                     env=helm.environment)
    assert result["failed"] and result["changed"], result
    assert "timed out after" in result["msg"] and "ClusterPolicy cluster-policy to be ready" in result["msg"]
    assert result["diagnosis"][0] == "ClusterPolicy cluster-policy: state notReady"
    assert result["cluster_policy_state"] == "notReady"


def test_gpu_operator_survives_api_500s(lab, helm):
    assert lab.run("gpu_operator", operator_args(lab, helm), env=helm.environment)["changed"]
    # The module's own reads (namespace, CRD, ClusterPolicy) fail with 500s: retried with backoff.
    for resource in ("namespaces", "customresourcedefinitions", "clusterpolicies"):
        lab.registry.add("error", verb="get", resource=resource, count=2, status=500)
    result = lab.run("gpu_operator", operator_args(lab, helm), env=helm.environment)
    assert not result.get("failed") and not result["changed"], result
    assert result["cluster_policy_state"] == "ready"
    assert not [f for f in lab.registry.list() if f["kind"] == "error"], "the injected 500s were not all hit"


# -- _k8s against the real REST layer -------------------------------------------------------------

def test_k8s_retries_5xx_and_rereads_on_409(lab):
    k8s = lab.k8s
    lab.registry.add("error", verb="get", resource="nodes", count=2, status=503)
    start = k8s.request_count
    assert k8s.get("Node", "gpu-a")["metadata"]["name"] == "gpu-a"
    assert k8s.request_count - start == 3

    lab.registry.add("conflict", verb="update", resource="nodes", name="gpu-a", count=1)
    start = k8s.request_count
    changed, node = k8s.set_node_labels("gpu-a", {"example.com/team": "ml"})
    assert changed and node["metadata"]["labels"]["example.com/team"] == "ml"
    assert k8s.request_count - start == 4  # GET, PUT (409), GET, PUT
    assert lab.store.get("v1/nodes", None, "gpu-a")["metadata"]["labels"]["example.com/team"] == "ml"

    rv = lab.rv()
    k8s.set_node_labels("gpu-a", {"example.com/team": "other"}, dry_run=True)
    assert lab.rv() == rv


# -- node_maintenance --------------------------------------------------------------------------------

def _pod(name, node, labels=None, volumes=None, owner=None, annotations=None):
    meta = {"name": name, "namespace": "work", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    if annotations:
        meta["annotations"] = annotations
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/app:1"}]}
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _running(lab, names):
    def ready():
        pods = dict((p["metadata"]["name"], p) for p in lab.k8s.list("Pod", namespace="work"))
        return all(any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (pods.get(n, {}).get("status") or {}).get("conditions") or []) for n in names)
    wait_until("pods running", ready)


def test_node_maintenance_drain_with_pdb_then_uncordon(lab):
    k8s = lab.k8s
    k8s.ensure_namespace("work")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-rs", "uid": "rs-uid-1", "controller": True}
    k8s.create({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "node-agent", "namespace": "work"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}},
                         "template": {"metadata": {"labels": {"app": "agent"}},
                                      "spec": {"containers": [{"name": "a", "image": "registry.example/agent:1"}]}}}})
    for name in ("trainer-0", "trainer-1"):
        k8s.create(_pod(name, "gpu-a", {"app": "trainer"}, owner=owner))
    k8s.create(_pod("scratch", "gpu-a", owner=owner, volumes=[{"name": "tmp", "emptyDir": {}}]))
    k8s.create(_pod("static-web", "gpu-a", annotations={"kubernetes.io/config.mirror": "abc"}))
    k8s.create(_pod("elsewhere", "gpu-b", owner=owner))
    k8s.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "trainers", "namespace": "work"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "trainer"}}}})
    _running(lab, ["trainer-0", "trainer-1", "scratch"])
    wait_until("daemonset pod on gpu-a",
               lambda: [p for p in k8s.pods_on_node("gpu-a") if p["metadata"]["name"].startswith("node-agent")])
    base = {"node": "gpu-a", "kubeconfig": lab.kubeconfig, "poll_interval": 0.3}

    rv = lab.rv()
    blocked = lab.run("node_maintenance", dict(base, state="drain"))
    assert blocked["failed"] and not blocked["changed"]
    assert [b["pod"] for b in blocked["blocking"]] == ["work/scratch"]
    assert "delete_emptydir_data" in blocked["msg"]
    assert lab.rv() == rv and not lab.k8s.get("Node", "gpu-a")["spec"].get("unschedulable")

    planned = lab.run("node_maintenance", dict(base, state="drain", delete_emptydir_data=True), check=True)
    assert planned["changed"] and planned["would_evict"] == ["work/scratch", "work/trainer-0", "work/trainer-1"]
    reasons = dict((s["pod"], s["reason"]) for s in planned["left_on_node"])
    assert reasons["work/static-web"].startswith("mirror pod")
    assert [r for p, r in reasons.items() if p.startswith("work/node-agent")] == ["DaemonSet pod"]
    assert lab.rv() == rv

    # The budget refuses every eviction (429) until it is relaxed a little later.
    def relax():
        time.sleep(2.0)
        k8s.patch("PodDisruptionBudget", "trainers", {"spec": {"maxUnavailable": 2}}, namespace="work")
    relaxer = threading.Thread(target=relax)
    relaxer.start()
    started = time.monotonic()
    drained = lab.run("node_maintenance", dict(base, state="drain", delete_emptydir_data=True, timeout=60,
                                               annotations={"gpufleet.sharing/maintenance-reason": "lab test"}))
    relaxer.join()
    assert drained["changed"] and not drained.get("failed"), drained
    assert time.monotonic() - started >= 2.0
    # Evictions refused by the budget are retried, so the order in which they succeed is not fixed.
    assert sorted(drained["evicted"]) == ["work/scratch", "work/trainer-0", "work/trainer-1"]
    node = lab.k8s.get("Node", "gpu-a")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["gpufleet.sharing/maintenance-reason"] == "lab test"
    remaining = sorted(p["metadata"]["name"] for p in k8s.pods_on_node("gpu-a"))
    assert "trainer-0" not in remaining and "static-web" in remaining
    assert lab.k8s.get("Pod", "elsewhere", "work") is not None

    rv = lab.rv()
    again = lab.run("node_maintenance", dict(base, state="drain", delete_emptydir_data=True,
                                             annotations={"gpufleet.sharing/maintenance-reason": "lab test"}))
    assert not again["changed"] and again["evicted"] == [] and lab.rv() == rv

    back = lab.run("node_maintenance", dict(base, state="uncordon",
                                            annotations={"gpufleet.sharing/maintenance-reason": None}), diff=True)
    assert back["changed"] and back["diff"]["before"]["unschedulable"] is True
    node = lab.k8s.get("Node", "gpu-a")
    assert not node["spec"].get("unschedulable")
    assert "gpufleet.sharing/maintenance-reason" not in (node["metadata"].get("annotations") or {})
    assert not lab.run("node_maintenance", dict(base, state="uncordon"))["changed"]


def test_node_maintenance_drain_times_out_on_pdb(lab):
    k8s = lab.k8s
    k8s.ensure_namespace("work")
    k8s.create(_pod("solo", "gpu-b", {"app": "solo"}))
    k8s.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "solo", "namespace": "work"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "solo"}}}})
    _running(lab, ["solo"])
    result = lab.run("node_maintenance", {"node": "gpu-b", "state": "drain", "force": True, "timeout": 3,
                                          "poll_interval": 0.5, "kubeconfig": lab.kubeconfig})
    assert result["failed"] and "timed out" in result["msg"] and "disruption budget" in result["msg"]
    assert result["blocking"][0]["pod"] == "work/solo"
    assert lab.k8s.get("Pod", "solo", "work") is not None


def test_node_maintenance_unknown_node(lab):
    result = lab.run("node_maintenance", {"node": "nope", "state": "cordon", "kubeconfig": lab.kubeconfig})
    assert result["failed"] and result["msg"] == "node nope not found"


# -- operator-managed MIG ------------------------------------------------------------------------------

CUSTOM = {"lab-two-halves": [{"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
                              "mig-devices": {"3g.20gb": 2}}]}


def _mig_profiles(lab, host):
    state = gpustate.load(lab.state_files[host])
    return sorted(gi.profile for gpu in state.gpus for gi in gpu.gpu_instances)


def test_operator_managed_mig(lab, helm):
    base = {"kubeconfig": lab.kubeconfig}
    # ConfigMap first (before the operator exists), then the operator pointing at it.
    rv = lab.rv()
    planned = lab.run("mig_operator_config", dict(base, configs_by_host={"gpu-a": CUSTOM},
                                                  selected={"gpu-a": "lab-two-halves", "gpu-b": "all-balanced"}),
                      check=True)
    assert planned["changed"] and lab.rv() == rv
    made = lab.run("mig_operator_config", dict(base, configs_by_host={"gpu-a": CUSTOM},
                                               selected={"gpu-a": "lab-two-halves", "gpu-b": "all-balanced"}))
    assert made["changed"] and made["action"] == "created" and not made["cluster_policy_found"], made
    assert "lab-two-halves" in made["config_names"] and "all-balanced" in made["config_names"]
    installed = lab.run("gpu_operator", operator_args(lab, helm, mig_manager_enabled=True,
                                                      mig_manager_config="gpufleet-mig-parted-config"),
                        env=helm.environment)
    assert installed["changed"] and installed["cluster_policy_state"] == "ready", installed
    again = lab.run("mig_operator_config", dict(base, configs_by_host={"gpu-a": CUSTOM},
                                                selected={"gpu-a": "lab-two-halves"}))
    assert not again["changed"] and again["cluster_policy_found"], again

    bad = lab.run("mig_operator_config", dict(base, configs_by_host={"gpu-a": CUSTOM}, selected={"gpu-b": "nope"}))
    assert bad["failed"] and "host gpu-b: MIG config 'nope' is not defined" in bad["msg"]

    node_args = dict(base, node="gpu-a", config="lab-two-halves", config_map="gpufleet-mig-parted-config",
                     poll_interval=0.3, timeout=60)
    k8s = lab.k8s
    k8s.ensure_namespace("work")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-2", "controller": True}
    k8s.create(_pod("inference", "gpu-a", owner=owner))
    _running(lab, ["inference"])
    rv = lab.rv()
    planned = lab.run("mig_node_config", node_args, check=True, diff=True)
    assert planned["changed"] and planned["would_evict"] == ["work/inference"]
    assert planned["diff"]["after"]["nvidia.com/mig.config"] == "lab-two-halves"
    assert lab.rv() == rv

    done = lab.run("mig_node_config", node_args)
    assert done["changed"] and done["state"] == "success" and done["uncordoned"], done
    assert done["evicted"] == ["work/inference"]
    assert done["state_history"][-1]["state"] == "success"
    assert _mig_profiles(lab, "gpu-a") == ["3g.20gb", "3g.20gb"]
    node = lab.k8s.get("Node", "gpu-a")
    assert not node["spec"].get("unschedulable")
    assert "gpufleet.sharing/cordoned-for" not in (node["metadata"].get("annotations") or {})

    # After a MIG change the lab's operator still re-runs its validator and updates the ClusterPolicy's
    # status once mig_node_config has returned (it waits for the node's state, not the validator's).
    rv = wait_settled("the lab's controllers settled", lab.rv)
    again = lab.run("mig_node_config", node_args)
    assert not again["changed"] and again["state"] == "success"
    assert lab.rv() == rv

    unknown = lab.run("mig_node_config", dict(node_args, config="all-7g.99gb"))
    assert unknown["failed"] and "is not defined in ConfigMap gpu-operator/gpufleet-mig-parted-config" in unknown["msg"]
    assert lab.rv() == rv

    # The MIG manager fails: the module says why and keeps the node cordoned; a re-run after the
    # cause is gone finishes the job and lifts its own cordon.
    lab.registry.add("named", condition="mig-manager-fails", count=None,
                     params={"message": "lab: GPU 0 is busy"})
    failed = lab.run("mig_node_config", dict(node_args, config="all-balanced"))
    assert failed["failed"] and "failed to apply 'all-balanced' on gpu-a" in failed["msg"], failed
    assert "stays cordoned" in failed["msg"] and failed["reason"]
    assert lab.k8s.get("Node", "gpu-a")["spec"]["unschedulable"] is True
    lab.registry.clear(condition="mig-manager-fails")
    fixed = lab.run("mig_node_config", dict(node_args, config="all-balanced"))
    assert fixed["changed"] and fixed["state"] == "success" and fixed["uncordoned"], fixed
    assert fixed["restarted_mig_manager"]
    assert _mig_profiles(lab, "gpu-a") == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert not lab.k8s.get("Node", "gpu-a")["spec"].get("unschedulable")

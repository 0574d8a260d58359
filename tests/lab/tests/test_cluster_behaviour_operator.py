"""GPU Operator, device plugin, GFD, MIG manager, scheduler and kubelet of the virtual cluster.

In-process: a Store, GPU state files and the controller loop (no HTTP); one test at the end goes
through the lab's HTTPS server with the kubernetes client. Delays are shortened to keep it fast.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import pytest

from gpulab import gpustate
from gpulab.cluster import faults as faultsmod
from gpulab.cluster import manager
from gpulab.cluster.daemonsets import RESTARTED_AT
from gpulab.cluster.operator.common import MIG_FAILURE_ANNOTATION, PLUGIN_CONFIG_ANNOTATION
from gpulab.cluster.server import add_nodes
from gpulab.cluster.errors import ApiError
from gpulab.cluster.store import Store

FAST = manager.Settings(resync_seconds=0.2, operand_start_delay=0.05, pod_start_delay=0.02, pod_stop_delay=0.02,
                        default_runtime=0.05, crash_backoff=0.1, mig_apply_delay=0.01, mig_pause_timeout=5)
NS = "gpu-operator"

TS = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: {replicas}
"""


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = probe()
        except ApiError as exc:  # not created yet
            last = exc
        if last and not isinstance(last, ApiError):
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Lab:
    def __init__(self, tmp_path, layout: Dict[str, List], extra_nodes: Optional[List[str]] = None):
        self.store = Store()
        self.paths: Dict[str, str] = {}
        hosts = []
        for name, gpus in layout.items():
            path = str(tmp_path / f"{name}.json")
            gpustate.create(path, name, gpus)
            self.paths[name] = path
            hosts.append({"name": name, "state_file": path})
        hosts += [{"name": name} for name in extra_nodes or []]
        add_nodes(self.store, hosts)
        self.store.create("v1/namespaces", {"metadata": {"name": NS}})  # as `helm install --create-namespace`
        self.faults = faultsmod.FaultRegistry()
        self.controllers = manager.start_controllers(self.store, hosts, settings=FAST, faults=self.faults)

    def stop(self) -> None:
        self.controllers.stop()

    # -------------------------------------------------------------- helpers

    def policy(self, spec: Optional[Dict[str, Any]] = None) -> None:
        self.store.create("nvidia.com/v1/clusterpolicies", {"metadata": {"name": "cluster-policy"}, "spec": spec or {}})

    def patch_policy(self, patch: Dict[str, Any]) -> None:
        self.store.patch("nvidia.com/v1/clusterpolicies", None, "cluster-policy", {"spec": patch}, "merge")

    def policy_state(self) -> Optional[str]:
        return (self.store.get("nvidia.com/v1/clusterpolicies", None, "cluster-policy").get("status") or {}).get("state")

    def wait_ready(self) -> None:
        wait_for("ClusterPolicy ready", lambda: self.policy_state() == "ready")

    def node(self, name: str) -> Dict[str, Any]:
        return self.store.get("v1/nodes", None, name)

    def labels(self, name: str) -> Dict[str, str]:
        return self.node(name)["metadata"].get("labels") or {}

    def allocatable(self, name: str) -> Dict[str, str]:
        status = self.node(name)["status"]
        return {k: v for k, v in status["allocatable"].items() if k.startswith("nvidia.com/")}

    def capacity(self, name: str) -> Dict[str, str]:
        status = self.node(name)["status"]
        return {k: v for k, v in status["capacity"].items() if k.startswith("nvidia.com/")}

    def label(self, node: str, key: str, value: Optional[str]) -> None:
        self.store.patch("v1/nodes", None, node, {"metadata": {"labels": {key: value}}}, "merge")

    def configmap(self, name: str, data: Dict[str, str], namespace: str = NS) -> None:
        body = {"metadata": {"name": name, "namespace": namespace}, "data": data}
        try:
            self.store.get("v1/configmaps", namespace, name)
        except Exception:  # pylint: disable=broad-except
            self.store.create("v1/configmaps", body)
            return
        self.store.patch("v1/configmaps", namespace, name, {"data": data}, "merge")

    def operand_pods(self, ds_name: str, node: Optional[str] = None) -> List[Dict[str, Any]]:
        pods = self.store.items("v1/pods", NS)
        return [p for p in pods
                if any(r.get("name") == ds_name for r in p["metadata"].get("ownerReferences") or [])
                and (node is None or p["spec"].get("nodeName") == node)
                and not p["metadata"].get("deletionTimestamp")]

    def pod(self, name: str, resources: Optional[Dict[str, int]] = None, command: Optional[List[str]] = None,
            restart: str = "Never", annotations: Optional[Dict[str, str]] = None, **spec: Any) -> Dict[str, Any]:
        container: Dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                     "command": command or ["nvidia-smi", "-L"]}
        if resources:
            container["resources"] = {"limits": {k: str(v) for k, v in resources.items()}}
        body = {"metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
                "spec": dict({"containers": [container], "restartPolicy": restart}, **spec)}
        return self.store.create("v1/pods", body)

    def get_pod(self, name: str, namespace: str = "default") -> Dict[str, Any]:
        return self.store.get("v1/pods", namespace, name)

    def phase(self, name: str) -> Optional[str]:
        return (self.get_pod(name).get("status") or {}).get("phase")

    def events(self, name: str, reason: Optional[str] = None) -> List[Dict[str, Any]]:
        return [e for e in self.store.items("v1/events")
                if e["involvedObject"].get("name") == name and (reason is None or e["reason"] == reason)]


@pytest.fixture
def make_lab(tmp_path):
    labs: List[Lab] = []

    def factory(layout: Dict[str, List], extra_nodes: Optional[List[str]] = None) -> Lab:
        lab = Lab(tmp_path, layout, extra_nodes)
        labs.append(lab)
        return lab
    yield factory
    for lab in labs:
        lab.stop()


# ------------------------------------------------------------------------------ deployment


def test_clusterpolicy_deploys_operands_and_labels_nodes(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 2)], "gpu-b": [("A10", 1)]}, extra_nodes=["cpu-1"])
    lab.label("gpu-a", "nvidia.com/gpu.workload.config", "container")  # a user label GFD must keep
    lab.policy({"mig": {"strategy": "single"}})  # what the chart renders from its default value
    lab.wait_ready()
    names = {ds["metadata"]["name"] for ds in lab.store.items("apps/v1/daemonsets", NS)}
    assert {"nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-mig-manager",
            "nvidia-operator-validator"} <= names
    plugin = lab.operand_pods("nvidia-device-plugin-daemonset", "gpu-a")
    assert len(plugin) == 1 and plugin[0]["metadata"]["name"].startswith("nvidia-device-plugin-daemonset-")
    assert len(plugin[0]["metadata"]["name"]) == len("nvidia-device-plugin-daemonset-") + 5
    assert lab.operand_pods("nvidia-mig-manager", "gpu-b") == []  # A10: not MIG-capable
    assert len(lab.operand_pods("nvidia-mig-manager", "gpu-a")) == 1
    assert lab.operand_pods("nvidia-device-plugin-daemonset", "cpu-1") == []

    labels = lab.labels("gpu-a")
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert labels["nvidia.com/mig.config"] == "all-disabled"  # migManager.config.default
    wait_for("mig.config.state", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success")
    assert lab.labels("gpu-b")["nvidia.com/mig.capable"] == "false"
    assert "nvidia.com/mig.config" not in lab.labels("gpu-b")
    assert "nvidia.com/gpu.present" not in lab.labels("cpu-1")

    wait_for("allocatable", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "2"})
    wait_for("allocatable gpu-b", lambda: lab.allocatable("gpu-b") == {"nvidia.com/gpu": "1"})
    gfd = wait_for("GFD labels", lambda: lab.labels("gpu-a").get("nvidia.com/gpu.product"))
    assert gfd == "NVIDIA-H100-80GB-HBM3"
    assert lab.labels("gpu-a")["nvidia.com/mig.strategy"] == "single"  # the chart's default (docs/reference/specs.md §7.2)
    assert lab.labels("gpu-a")["nvidia.com/gpu.workload.config"] == "container"
    lab.store.create("nvidia.com/v1/clusterpolicies", {"metadata": {"name": "second"}, "spec": {}})
    wait_for("second ignored", lambda: (lab.store.get("nvidia.com/v1/clusterpolicies", None, "second").get("status") or {})
             .get("state") == "ignored")
    lab.store.delete("nvidia.com/v1/clusterpolicies", None, "second")
    cm = lab.store.get("v1/configmaps", NS, "default-mig-parted-config")
    assert "all-balanced" in cm["data"]["config.yaml"]
    # The loop goes quiet once everything converged (event driven, no write storms).
    time.sleep(0.3)
    before = lab.controllers.passes
    time.sleep(0.5)
    assert lab.controllers.passes - before <= 4


def test_fault_clusterpolicy_never_ready(make_lab):
    lab = make_lab({"gpu-a": [("A100-40GB", 1)]})
    lab.faults.add("named", condition="clusterpolicy-never-ready", count=None)
    lab.policy()
    wait_for("operands running", lambda: lab.store.get("apps/v1/daemonsets", NS, "nvidia-device-plugin-daemonset")
             .get("status", {}).get("numberReady") == 1)
    time.sleep(0.3)
    assert lab.policy_state() == "notReady"
    lab.faults.clear(condition="clusterpolicy-never-ready")
    lab.wait_ready()


# ------------------------------------------------------------------------------ sharing


def test_time_slicing_configmap_edit_needs_a_restart(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 8)]})
    lab.configmap("ts", {"any": TS.format(replicas=4), "two": TS.format(replicas=2)})
    lab.policy({"devicePlugin": {"config": {"name": "ts", "default": "any"}}, "mig": {"strategy": "none"}})
    lab.wait_ready()
    wait_for("32 replicas", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "32"})
    wait_for("GFD", lambda: lab.labels("gpu-a").get("nvidia.com/gpu.replicas") == "4")
    assert lab.labels("gpu-a")["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    wait_for("config annotation", lambda: lab.node("gpu-a")["metadata"]["annotations"].get(PLUGIN_CONFIG_ANNOTATION) == "any")

    lab.configmap("ts", {"any": TS.format(replicas=3)})
    time.sleep(0.5)
    assert lab.allocatable("gpu-a") == {"nvidia.com/gpu": "32"}  # not watched (docs/reference/specs.md §9.5)

    old = lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"]
    lab.store.patch("apps/v1/daemonsets", NS, "nvidia-device-plugin-daemonset",
                    {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "2026-11-30T05:00:00Z"}}}}},
                    "strategic")
    wait_for("24 after rollout restart", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "24"})
    assert lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"] != old
    # GFD has its own copy of the config: stale until it restarts too.
    assert lab.labels("gpu-a")["nvidia.com/gpu.replicas"] == "4"
    lab.store.delete("v1/pods", NS, lab.operand_pods("gpu-feature-discovery")[0]["metadata"]["name"])
    wait_for("GFD relabels", lambda: lab.labels("gpu-a").get("nvidia.com/gpu.replicas") == "3")

    # The node label is followed at once by the config-manager sidecar (no restart).
    uid = lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"]
    lab.label("gpu-a", "nvidia.com/device-plugin.config", "two")
    wait_for("label switch", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "16"})
    assert lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"] == uid
    # Unknown key: skipped, the current config stays.
    lab.label("gpu-a", "nvidia.com/device-plugin.config", "nope")
    time.sleep(0.4)
    assert lab.allocatable("gpu-a") == {"nvidia.com/gpu": "16"}


def test_rename_by_default_zeroes_the_old_resource(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 2)]})
    lab.policy({"mig": {"strategy": "none"}})
    lab.wait_ready()
    wait_for("plain", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "2"})
    lab.configmap("ts", {"any": TS.format(replicas=4).replace("timeSlicing:", "timeSlicing:\n    renameByDefault: true")})
    lab.patch_policy({"devicePlugin": {"config": {"name": "ts", "default": "any"}}})
    wait_for("renamed", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8"})
    assert lab.capacity("gpu-a") == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8"}


def test_invalid_plugin_config_crash_loops(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 1)]})
    lab.configmap("ts", {"any": TS.format(replicas=1)})
    lab.policy({"devicePlugin": {"config": {"name": "ts", "default": "any"}}, "mig": {"strategy": "none"}})

    def crash_looping():
        pods = lab.operand_pods("nvidia-device-plugin-daemonset")
        statuses = (pods[0].get("status") or {}).get("containerStatuses") or [] if pods else []
        return statuses and statuses[0]["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" and pods[0]
    pod = wait_for("CrashLoopBackOff", crash_looping)
    status = pod["status"]["containerStatuses"][0]
    assert "number of replicas must be >= 2" in status["lastState"]["terminated"]["message"]
    log = lab.store.get_pod_log(NS, pod["metadata"]["name"])
    assert "number of replicas must be >= 2" in log and "level=error" in log
    assert lab.policy_state() == "notReady"
    assert lab.allocatable("gpu-a").get("nvidia.com/gpu", "0") == "0"
    # Fixing the ConfigMap is picked up by the next container restart (the volume is updated).
    lab.configmap("ts", {"any": TS.format(replicas=2)})
    wait_for("recovered", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "2"})
    lab.wait_ready()
    restarts = lab.operand_pods("nvidia-device-plugin-daemonset")[0]["status"]["containerStatuses"][0]["restartCount"]
    assert restarts >= 1


# ------------------------------------------------------------------------------ MIG manager


def test_mig_manager_all_balanced_mixed_and_a_pod_gets_its_mig_device(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 1)]})
    lab.policy({"mig": {"strategy": "mixed"}})
    lab.wait_ready()
    wait_for("initial success", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success")
    old_plugin = lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"]
    lab.label("gpu-a", "nvidia.com/mig.config", "all-balanced")
    wait_for("pending", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") in ("pending", "success"))
    wait_for("success", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success"
             and lab.labels("gpu-a").get("nvidia.com/gpu.deploy.device-plugin") == "true", timeout=15)
    expected = {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1", "nvidia.com/mig-3g.40gb": "1"}
    wait_for("MIG resources", lambda: {k: v for k, v in lab.allocatable("gpu-a").items() if v != "0"} == expected)
    assert lab.operand_pods("nvidia-device-plugin-daemonset")[0]["metadata"]["uid"] != old_plugin
    wait_for("GFD MIG labels", lambda: lab.labels("gpu-a").get("nvidia.com/mig-1g.10gb.count") == "2")
    assert lab.labels("gpu-a")["nvidia.com/gpu.replicas"] == "0"
    state = gpustate.load(lab.paths["gpu-a"])
    assert sorted(gi.profile for gi in state.gpus[0].gpu_instances) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    mig_log = lab.store.get_pod_log(NS, lab.operand_pods("nvidia-mig-manager")[0]["metadata"]["name"])
    assert "Updating to MIG config: all-balanced" in mig_log
    assert "Changing the 'nvidia.com/mig.config.state' node label to 'success'" in mig_log

    lab.pod("smi", {"nvidia.com/mig-2g.20gb": 1})
    wait_for("Succeeded", lambda: lab.phase("smi") == "Succeeded")
    log = lab.store.get_pod_log("default", "smi")
    lines = log.splitlines()
    gpu = state.gpus[0]
    mig_uuid = next(ci.uuid for gi in gpu.gpu_instances if gi.profile == "2g.20gb" for ci in gi.compute_instances)
    assert lines == [f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu.uuid})",
                     f"  MIG 2g.20gb     Device  0: (UUID: {mig_uuid})"]
    # Scheduled event, and the allocation annotation names the device.
    assert lab.events("smi", "Scheduled")
    assert mig_uuid in lab.get_pod("smi")["metadata"]["annotations"]["lab.gpufleet.io/allocated-devices"]


def test_mig_manager_unknown_config_fails(make_lab):
    lab = make_lab({"gpu-a": [("A100-40GB", 1)]})
    lab.policy({"mig": {"strategy": "single"}})
    lab.wait_ready()
    wait_for("initial success", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success")
    lab.label("gpu-a", "nvidia.com/mig.config", "all-wrong")
    wait_for("failed", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "failed")
    note = lab.node("gpu-a")["metadata"]["annotations"][MIG_FAILURE_ANNOTATION]
    assert "all-wrong" in note
    assert any("all-wrong" in e["message"] for e in lab.events("gpu-a", "MigConfigFailed"))
    assert lab.labels("gpu-a")["nvidia.com/gpu.deploy.device-plugin"] == "true"  # never paused
    # A later good label succeeds and clears the failure note.
    lab.label("gpu-a", "nvidia.com/mig.config", "all-1g.5gb")
    wait_for("success", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success", timeout=15)
    assert MIG_FAILURE_ANNOTATION not in (lab.node("gpu-a")["metadata"].get("annotations") or {})
    wait_for("single strategy resources", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "7"})
    wait_for("GFD single labels", lambda: lab.labels("gpu-a").get("nvidia.com/gpu.product") == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")


def test_mig_manager_refuses_a_busy_gpu(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 1)]})
    lab.policy({"mig": {"strategy": "mixed"}})
    lab.wait_ready()
    wait_for("allocatable", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "1"})
    lab.pod("server", {"nvidia.com/gpu": 1}, command=["sleep", "infinity"], restart="Always")
    wait_for("Running", lambda: lab.phase("server") == "Running")
    wait_for("GPU process", lambda: gpustate.load(lab.paths["gpu-a"]).gpus[0].processes)
    lab.label("gpu-a", "nvidia.com/mig.config", "all-1g.10gb")
    wait_for("failed", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "failed", timeout=15)
    assert lab.node("gpu-a")["metadata"]["annotations"][MIG_FAILURE_ANNOTATION]
    assert gpustate.load(lab.paths["gpu-a"]).gpus[0].gpu_instances == []
    assert lab.phase("server") == "Running"
    # Deleting the workload frees the GPU; a pod restart of the MIG manager retries.
    lab.store.delete("v1/pods", "default", "server")
    wait_for("gone", lambda: not lab.store.items("v1/pods", "default"))
    assert gpustate.load(lab.paths["gpu-a"]).gpus[0].processes == []
    lab.store.delete("v1/pods", NS, lab.operand_pods("nvidia-mig-manager")[0]["metadata"]["name"])
    wait_for("success", lambda: lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success", timeout=15)
    wait_for("7 MIG devices", lambda: lab.allocatable("gpu-a").get("nvidia.com/mig-1g.10gb") == "7")


# ------------------------------------------------------------------------------ scheduler + kubelet


def test_scheduler_reasons_and_no_double_allocation(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 1)], "gpu-b": [("H100-80GB", 1)], "gpu-c": [("H100-80GB", 1)]})
    lab.configmap("ts", {"any": TS.format(replicas=2)})
    lab.policy({"devicePlugin": {"config": {"name": "ts", "default": "any"}}, "mig": {"strategy": "none"}})
    lab.wait_ready()
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        wait_for("replicas", lambda name=name: lab.allocatable(name) == {"nvidia.com/gpu": "2"})

    lab.pod("mig", {"nvidia.com/mig-1g.10gb": 1})
    wait_for("FailedScheduling", lambda: lab.events("mig", "FailedScheduling"))
    message = lab.events("mig", "FailedScheduling")[0]["message"]
    assert message.startswith("0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.10gb.")
    condition = [c for c in lab.get_pod("mig")["status"]["conditions"] if c["type"] == "PodScheduled"][0]
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"

    lab.store.patch("v1/nodes", None, "gpu-c", {"spec": {"unschedulable": True}}, "merge")
    lab.store.patch("v1/nodes", None, "gpu-b", {"spec": {"taints": [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]}}, "merge")
    for index in range(2):
        lab.pod(f"w{index}", {"nvidia.com/gpu": 1}, command=["sleep", "1d"], restart="Always")
    wait_for("both running", lambda: all(lab.phase(f"w{i}") == "Running" for i in range(2)))
    assert {lab.get_pod(f"w{i}")["spec"]["nodeName"] for i in range(2)} == {"gpu-a"}
    devices = [lab.get_pod(f"w{i}")["metadata"]["annotations"]["lab.gpufleet.io/allocated-devices"] for i in range(2)]
    assert len(set(devices)) == 2 and all("::" in d for d in devices)

    lab.pod("w2", {"nvidia.com/gpu": 1}, command=["sleep", "1d"])
    wait_for("w2 unschedulable", lambda: lab.events("w2", "FailedScheduling"))
    message = lab.events("w2", "FailedScheduling")[0]["message"]
    assert message.startswith("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
                              "1 node(s) had untolerated taint {dedicated: infer}, 1 node(s) were unschedulable.")

    lab.store.delete("v1/pods", "default", "w0")
    wait_for("w2 runs after w0 left", lambda: lab.phase("w2") == "Succeeded", timeout=10)
    assert lab.get_pod("w2")["spec"]["nodeName"] == "gpu-a"


def test_kubelet_admission_and_pod_logs(make_lab):
    lab = make_lab({"gpu-a": [("H100-80GB", 2)]})
    lab.configmap("ts", {"any": TS.format(replicas=2).replace("timeSlicing:", "timeSlicing:\n    failRequestsGreaterThanOne: true")})
    lab.policy({"devicePlugin": {"config": {"name": "ts", "default": "any"}}, "mig": {"strategy": "none"}})
    lab.wait_ready()
    wait_for("replicas", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "4"})

    lab.pod("two", {"nvidia.com/gpu": 2})
    wait_for("rejected", lambda: lab.phase("two") == "Failed")
    status = lab.get_pod("two")["status"]
    assert status["reason"] == "UnexpectedAdmissionError"
    assert "request for 'nvidia.com/gpu: 2' too large: maximum request size for shared resources is 1" in status["message"]

    lab.pod("one", {"nvidia.com/gpu": 1}, annotations={"lab.gpufleet.io/runtime-seconds": "0.2"})
    wait_for("one done", lambda: lab.phase("one") == "Succeeded")
    assert lab.store.get_pod_log("default", "one").startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    assert lab.get_pod("one")["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

    lab.pod("nogpu", None)
    wait_for("nogpu done", lambda: lab.phase("nogpu") in ("Succeeded", "Failed"))
    assert lab.store.get_pod_log("default", "nogpu") == "No devices were found\n"
    assert lab.phase("nogpu") == "Failed"

    lab.pod("quiet", None, command=["sh", "-c", "echo hi"])
    wait_for("quiet done", lambda: lab.phase("quiet") == "Succeeded")
    assert lab.store.get_pod_log("default", "quiet") == ""

    # nodeName set directly: the kubelet's admission checks the resources.
    lab.pod("direct", {"nvidia.com/gpu": 5}, nodeName="gpu-a")
    wait_for("direct rejected", lambda: lab.phase("direct") == "Failed")
    assert lab.get_pod("direct")["status"]["reason"] == "OutOfnvidia.com/gpu"


def test_clusterpolicy_strategy_change_restarts_plugin(make_lab):
    lab = make_lab({"gpu-a": [("A30", 1)]})
    lab.policy({"mig": {"strategy": "single"}})
    lab.wait_ready()
    first = wait_for("plugin", lambda: lab.operand_pods("nvidia-device-plugin-daemonset"))[0]["metadata"]["uid"]
    lab.patch_policy({"mig": {"strategy": "mixed"}})
    wait_for("new plugin pod", lambda: [p for p in lab.operand_pods("nvidia-device-plugin-daemonset")
                                        if p["metadata"]["uid"] != first and p.get("status", {}).get("phase") == "Running"])
    wait_for("label", lambda: lab.labels("gpu-a").get("nvidia.com/mig.strategy") == "mixed")
    lab.wait_ready()


def test_deleting_the_clusterpolicy_removes_operands(make_lab):
    lab = make_lab({"gpu-a": [("H200", 1)]})
    lab.policy()
    lab.wait_ready()
    lab.store.delete("nvidia.com/v1/clusterpolicies", None, "cluster-policy")
    wait_for("operands gone", lambda: not lab.store.items("v1/pods", NS) and not lab.store.items("apps/v1/daemonsets", NS))
    wait_for("allocatable zero", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "0"})
    assert lab.capacity("gpu-a") == {"nvidia.com/gpu": "1"}  # the kubelet keeps capacity, allocatable drops


def test_host_reboot_restarts_containers_and_mig_manager_reapplies(make_lab):
    """Hopper loses MIG mode at reboot (docs/reference/specs.md §4.1); the restarted MIG manager applies its label again."""
    lab = make_lab({"gpu-a": [("H100-80GB", 1)]})
    lab.policy({"mig": {"strategy": "mixed"}})
    lab.wait_ready()
    lab.label("gpu-a", "nvidia.com/mig.config", "all-3g.40gb")
    wait_for("MIG", lambda: lab.allocatable("gpu-a").get("nvidia.com/mig-3g.40gb") == "2", timeout=15)
    gpustate.reboot(lab.paths["gpu-a"])

    def restarted():
        pods = lab.operand_pods("nvidia-device-plugin-daemonset")
        return pods and pods[0]["status"]["containerStatuses"][0]["restartCount"] >= 1
    wait_for("plugin restarted", restarted)
    wait_for("re-applied", lambda: len(gpustate.load(lab.paths["gpu-a"]).gpus[0].gpu_instances) == 2, timeout=15)
    wait_for("resources back", lambda: lab.allocatable("gpu-a").get("nvidia.com/mig-3g.40gb") == "2"
             and lab.labels("gpu-a").get("nvidia.com/mig.config.state") == "success", timeout=15)
    log = lab.store.get_pod_log(NS, lab.operand_pods("nvidia-mig-manager")[0]["metadata"]["name"])
    assert log.count("Updating to MIG config: all-3g.40gb") == 2


def test_mps_sharing_runs_the_control_daemon(make_lab):
    lab = make_lab({"gpu-a": [("A100-80GB", 2)]})
    lab.configmap("mps", {"any": "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"})
    lab.policy({"devicePlugin": {"config": {"name": "mps", "default": "any"}}, "mig": {"strategy": "none"}})
    wait_for("MPS replicas", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "8"})
    wait_for("mps.capable", lambda: lab.labels("gpu-a").get("nvidia.com/mps.capable") == "true")
    assert lab.labels("gpu-a")["nvidia.com/gpu.sharing-strategy"] == "mps"
    wait_for("control daemon", lambda: [p for p in lab.operand_pods("nvidia-device-plugin-mps-control-daemon", "gpu-a")
                                        if p.get("status", {}).get("phase") == "Running"])
    lab.wait_ready()
    lab.pod("two", {"nvidia.com/gpu": 2})
    wait_for("rejected", lambda: lab.phase("two") == "Failed")
    assert lab.get_pod("two")["status"]["reason"] == "UnexpectedAdmissionError"


def test_powered_off_host_makes_the_node_not_ready(make_lab):
    lab = make_lab({"gpu-a": [("A30", 1)]})
    gpustate.power_off(lab.paths["gpu-a"])

    def ready_status():
        conditions = lab.node("gpu-a")["status"]["conditions"]
        return next(c["status"] for c in conditions if c["type"] == "Ready")
    wait_for("Unknown", lambda: ready_status() == "Unknown")
    assert {t["effect"] for t in lab.node("gpu-a")["spec"]["taints"]} == {"NoSchedule", "NoExecute"}
    lab.pod("waits", None, command=["sleep", "1"])
    wait_for("FailedScheduling", lambda: lab.events("waits", "FailedScheduling"))
    assert "untolerated taint {node.kubernetes.io/unreachable: }" in lab.events("waits", "FailedScheduling")[0]["message"]
    gpustate.reboot(lab.paths["gpu-a"])  # powered on again
    wait_for("Ready", lambda: ready_status() == "True")
    assert "taints" not in lab.node("gpu-a")["spec"]
    wait_for("scheduled", lambda: lab.phase("waits") == "Succeeded")

"""Helpers of the DRA lab tests (test_dra_*.py): an in-process store with the controllers, the
DeviceClasses and the kubelet plugin DaemonSet as NVIDIA's chart v25.12.0 names them."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from gpulab import gpustate, migparted
from gpulab.cluster import manager
from gpulab.cluster.dra import api as dra_api
from gpulab.cluster.errors import ApiError
from gpulab.cluster.server import add_nodes
from gpulab.cluster.store import Store

FAST = manager.Settings(resync_seconds=0.2, operand_start_delay=0.05, pod_start_delay=0.02, pod_stop_delay=0.02,
                        default_runtime=0.05, crash_backoff=0.1, mig_apply_delay=0.01, mig_pause_timeout=5)
DRIVER_NS = "nvidia-dra-driver-gpu"
PLUGIN_DS = "nvidia-dra-driver-gpu-kubelet-plugin"
IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
IMAGE_0_5 = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
CLASS_EXPR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '%s'"


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.time() + timeout
    last: Any = None
    while time.time() < deadline:
        try:
            last = probe()
        except (ApiError, AssertionError) as exc:  # not there yet
            last = exc
        if last and not isinstance(last, (ApiError, AssertionError)):
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def mig_layout(path: str, per_gpu: Dict[int, Optional[Dict[str, int]]]) -> None:
    """GPU index -> MIG devices (None: MIG off), applied with the lab's mig-parted."""
    items = [{"devices": [index], "mig-enabled": devices is not None, **({"mig-devices": devices} if devices else {})}
             for index, devices in per_gpu.items()]
    ok, message = migparted.apply_config(path, {"version": "v1", "mig-configs": {"lab": items}}, "lab")
    assert ok, message


class DraLab:
    def __init__(self, tmp_path: Any, layout: Dict[str, List[Any]], plugin: bool = True, gates: str = "",
                 image: str = IMAGE, env: Optional[Dict[str, str]] = None):
        self.store = Store()
        assert dra_api.install(self.store, (1, 36, 0))
        self.paths: Dict[str, str] = {}
        hosts = []
        for name, gpus in layout.items():
            path = str(tmp_path / f"{name}.json")
            gpustate.create(path, name, gpus)
            self.paths[name] = path
            hosts.append({"name": name, "state_file": path})
        add_nodes(self.store, hosts)
        self.store.create("v1/namespaces", {"metadata": {"name": DRIVER_NS}})
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
            self.store.create(dra_api.DEVICECLASSES, {"metadata": {"name": name},
                                                      "spec": {"selectors": [{"cel": {"expression": CLASS_EXPR % kind}}]}})
        self.hosts = hosts
        self.gates = gates
        self.image = image
        self.env = dict(env or {})
        self.controllers: Any = None
        if plugin:
            self.deploy_plugin()

    def start(self) -> "DraLab":
        self.controllers = manager.start_controllers(self.store, self.hosts, settings=FAST)
        return self

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()

    def deploy_plugin(self) -> None:
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
        if self.gates:
            env.append({"name": "FEATURE_GATES", "value": self.gates})
        env += [{"name": key, "value": value} for key, value in sorted(self.env.items())]
        labels = {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}
        self.store.create("apps/v1/daemonsets", {
            "metadata": {"name": PLUGIN_DS, "namespace": DRIVER_NS},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "gpus", "image": self.image, "env": env}]}}}})

    def plugin_pod(self, node: str) -> Dict[str, Any]:
        pods = [p for p in self.store.items("v1/pods", DRIVER_NS, field_selector=f"spec.nodeName={node}")
                if not p["metadata"].get("deletionTimestamp")]
        assert len(pods) == 1, pods
        return pods[0]

    def plugin_running(self, node: str) -> bool:
        try:
            pod = self.plugin_pod(node)
        except AssertionError:
            return False
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)

    def restart_plugin(self, node: str) -> None:
        """Delete the node's plugin pod; the DaemonSet starts a new one (what a rollout restart does)."""
        old = self.plugin_pod(node)["metadata"]["uid"]
        self.store.delete("v1/pods", DRIVER_NS, self.plugin_pod(node)["metadata"]["name"])
        wait_for("a new plugin pod", lambda: self.plugin_running(node) and self.plugin_pod(node)["metadata"]["uid"] != old)

    def slice_devices(self, node: str) -> Dict[str, Dict[str, Any]]:
        found = [s for s in self.store.items(dra_api.RESOURCESLICES) if s["spec"]["nodeName"] == node]
        return {d["name"]: d for s in found for d in s["spec"]["devices"]}

    def template(self, name: str, requests: List[Dict[str, Any]], constraints: Optional[List[Dict[str, Any]]] = None,
                 namespace: str = "default") -> None:
        devices: Dict[str, Any] = {"requests": requests}
        if constraints:
            devices["constraints"] = constraints
        self.store.create(dra_api.RESOURCECLAIMTEMPLATES, {"metadata": {"name": name, "namespace": namespace},
                                                           "spec": {"spec": {"devices": devices}}})

    def pod(self, name: str, claims: Dict[str, str], command: str = "nvidia-smi -L", always: bool = False,
            namespace: str = "default") -> None:
        """claims: pod claim name -> "template:<name>" or "claim:<name>"."""
        entries = []
        for claim, ref in claims.items():
            kind, _sep, target = ref.partition(":")
            entries.append({"name": claim, ("resourceClaimTemplateName" if kind == "template" else "resourceClaimName"): target})
        self.store.create("v1/pods", {"metadata": {"name": name, "namespace": namespace}, "spec": {
            "restartPolicy": "Always" if always else "Never", "resourceClaims": entries,
            "containers": [{"name": "main", "image": "cuda", "command": command.split(),
                            "resources": {"claims": [{"name": claim} for claim in claims]}}]}})

    def phase(self, name: str, namespace: str = "default") -> str:
        return (self.store.get("v1/pods", namespace, name).get("status") or {}).get("phase", "")

    def claims(self, namespace: str = "default") -> List[Dict[str, Any]]:
        return self.store.items(dra_api.RESOURCECLAIMS, namespace)


def request(name: str, device_class: str, selector: str = "", count: Optional[int] = None, mode: str = "") -> Dict[str, Any]:
    exactly: Dict[str, Any] = {"deviceClassName": device_class}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if count is not None:
        exactly["count"] = count
    if mode:
        exactly["allocationMode"] = mode
    return {"name": name, "exactly": exactly}


def profile_is(profile: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"

"""The kubelet's registration of its Node (a test instrument).

At start the kubelet creates its Node object (``registerWithAPIServer``, pkg/kubelet/kubelet_node_status.go,
kubernetes v1.31.0), then only updates its status. A Node deleted while the kubelet runs stays deleted:
``registrationCompleted`` is never reset (kubernetes/kubernetes#71398 and #115761, both closed unfixed; PR
#123535, which would re-register, was closed unmerged); the next kubelet start (a reboot, ``systemctl
restart kubelet``) creates it again: schedulable, with the kubelet's labels, without what others had added
(annotations, taints, the cordon). ``KubeletRegistration`` models that from the hosts' state files.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Dict, List, Optional

from gpulab.cluster.errors import ApiError

LOG = logging.getLogger("gpulab.cluster.registration")

NODE_STATE_ANNOTATION = "gpulab.io/state-file"
KUBELET_VERSION = "v1.36.0-gpulab"
KUBELET_STARTS = ("start", "restart", "reload-or-restart", "try-restart")


def node_object(host: Dict[str, Any], boot: str) -> Dict[str, Any]:
    name = host["name"]
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "beta.kubernetes.io/arch": "amd64"}
    labels.update(host.get("labels") or {})
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    if host.get("state_file"):
        annotations[NODE_STATE_ANNOTATION] = os.path.abspath(host["state_file"])
    cpu, memory = str(host.get("cpu", 64)), str(host.get("memory", "527958560Ki"))
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1843217296Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    condition = {"lastHeartbeatTime": boot, "lastTransitionTime": boot}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {},
        "status": {
            "capacity": dict(capacity), "allocatable": dict(capacity),
            "conditions": [
                dict(condition, type="MemoryPressure", status="False",
                     reason="KubeletHasSufficientMemory", message="kubelet has sufficient memory"),
                dict(condition, type="DiskPressure", status="False",
                     reason="KubeletHasNoDiskPressure", message="kubelet has no disk pressure"),
                dict(condition, type="PIDPressure", status="False",
                     reason="KubeletHasSufficientPID", message="kubelet has sufficient PID"),
                dict(condition, type="Ready", status="True", reason="KubeletReady",
                     message="kubelet is posting ready status (gpulab)"),
            ],
            "addresses": [{"type": "InternalIP", "address": host.get("address", "127.0.0.1")},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64",
                         "osImage": "gpulab simulated host", "kernelVersion": "6.8.0-gpulab",
                         "containerRuntimeVersion": "gpulab://1.0", "machineID": "",
                         "systemUUID": "", "bootID": ""},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def add_nodes(store: Any, hosts: List[Dict[str, Any]]) -> None:
    """The lab's start: every host's kubelet registers its Node."""
    now = time.time()
    for host in hosts:
        if not host.get("name"):
            raise ValueError("every cluster host needs a 'name': %r" % (host,))
        register_node(store, host, now)


def register_node(store: Any, host: Dict[str, Any], now: Optional[float] = None) -> None:
    """Create the host's Node and post its status, as a starting kubelet does."""
    boot = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now if now is not None else time.time()))
    node = node_object(host, boot)
    status = node.pop("status")
    store.create("v1/nodes", node)
    store.controller_update("v1/nodes", None, host["name"], lambda obj: obj.__setitem__("status", status),
                            subresource="status")


def kubelet_start(state: Any) -> str:
    """Which start of the host's kubelet this is: its boot, and the ``systemctl`` starts of the unit since."""
    starts = [event for event in getattr(state, "events", None) or []
              if event.get("actor") == "systemctl" and event.get("action") in KUBELET_STARTS
              and (event.get("detail") or {}).get("unit") in ("kubelet", "kubelet.service")
              and event.get("boot_id") == state.boot_id]
    return "%s/%d" % (state.boot_id, len(starts))


class KubeletRegistration:
    """Per host with a state file: a Node missing when its kubelet (re)starts is registered again."""

    def __init__(self, store: Any, hosts: List[Dict[str, Any]], host_state: Callable[[str], Any]):
        self.store = store
        self.hosts = [host for host in hosts if host.get("name") and host.get("state_file")]
        self.host_state = host_state
        self._seen: Dict[str, str] = {}

    def run_once(self) -> None:
        names = {node["metadata"]["name"] for node in self.store.items("v1/nodes")}
        for host in self.hosts:
            state = self.host_state(host["name"])
            if state is None or not getattr(state, "powered_on", True):
                continue
            start = kubelet_start(state)
            previous = self._seen.get(host["name"])
            self._seen[host["name"]] = start
            if previous is None or previous == start or host["name"] in names:
                continue
            LOG.info("kubelet of %s started (%s): registering its deleted Node", host["name"], start)
            try:
                register_node(self.store, host)
            except ApiError:
                LOG.exception("cannot register node %s", host["name"])


__all__ = ["KUBELET_VERSION", "NODE_STATE_ANNOTATION", "KubeletRegistration", "add_nodes", "kubelet_start",
           "node_object", "register_node"]

"""The lab's floor for each step of a MIG change (issue 26 #2), measured alone.

For one node of a running lab (cluster + SSH hosts, converged by site.yml), each step's own work
done directly, without Ansible or a module process: the API requests it needs (one Python
process with the ``kubernetes`` client, connections kept), the simulated tools over the host's
SSH connection (ControlMaster, as the lab inventory sets it), and the waits for what only the
lab's controllers can do (operand pods going and coming, a pod running), polled every 20 ms.
What a step costs above its floor is what the rollout adds: Ansible's task and module process,
the module's reads and checks, and its poll intervals.

Used by bench_mig_change.py (the "floor" column), after the change it measured. No timed assertions.
"""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
import time
from typing import Any, Callable, Dict, List, Mapping, Sequence

import yaml
from kubernetes import client, config

NAMESPACE = "gpu-operator"
# What gpufleet.sharing.gpu_operands pauses (the deploy labels) and the pods that go with them.
PAUSED = "paused-for-mig-change"
DEPLOY = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")
OPERAND_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm")
RESTARTED_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")
POLL = 0.02
RESOURCE = "nvidia.com/mig-1g.5gb"


class Lab:
    """One node of the lab: its API objects and its host."""

    def __init__(self, info: Mapping[str, Any], node: str, layouts: Sequence[str], mig_configs: Mapping[str, Any]):
        self.node = node
        self.api = client.ApiClient(configuration=self._configuration(info["cluster"]["kubeconfig"]))
        self.core = client.CoreV1Api(self.api)
        self.leases = client.CoordinationV1Api(self.api)
        with open(info["inventory"], encoding="utf-8") as handle:
            inventory = yaml.safe_load(handle)["all"]["children"]["lab_gpu_hosts"]
        host, common = inventory["hosts"][node], inventory["vars"]
        self.ssh = ["ssh", "-p", str(host["ansible_port"]), "-i", common["ansible_ssh_private_key_file"],
                    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                    "-o", "ControlMaster=no",
                    "-o", "ControlPath=%s/floor-%%C" % os.path.dirname(info["inventory"]),
                    "root@%s" % host["ansible_host"]]
        self.layouts = list(layouts)
        self.mig_configs = {"version": "v1", "mig-configs": dict(mig_configs)}
        self.turn = 0
        self.previous: Dict[str, Any] = {}
        self.running: List[str] = []
        self.before = ""

    @staticmethod
    def _configuration(kubeconfig: str) -> Any:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return configuration

    # -------------------------------------------------------------- helpers

    def connect(self) -> None:
        """The SSH master in the background (-f): a master started by a captured command would keep
        its pipes open."""
        subprocess.run(self.ssh[:-1] + ["-M", "-N", "-f", self.ssh[-1]], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=60)

    def disconnect(self) -> None:
        subprocess.run(self.ssh[:-1] + ["-O", "exit", self.ssh[-1]], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=60)

    def host(self, command: str, stdin: str = "") -> None:
        subprocess.run(self.ssh + [command], input=stdin.encode(), check=True, capture_output=True, timeout=120)

    def node_patch(self, body: Dict[str, Any]) -> None:
        self.core.patch_node(self.node, body)

    def pods(self, apps: Sequence[str]) -> List[Any]:
        found = self.core.list_namespaced_pod(NAMESPACE, field_selector="spec.nodeName=%s" % self.node).items
        return [pod for pod in found if (pod.metadata.labels or {}).get("app") in apps]

    @staticmethod
    def until(done: Callable[[], bool], timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit("floor: the lab did not get there in %.0f s" % timeout)
            time.sleep(POLL)

    @staticmethod
    def ready(pod: Any) -> bool:
        return pod.metadata.deletion_timestamp is None and any(
            c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))

    def all_ready(self, apps: Sequence[str], old: Sequence[str] = ()) -> bool:
        pods = self.pods(apps)
        return all(any(self.ready(p) and p.metadata.uid not in old for p in pods
                       if p.metadata.labels["app"] == app) for app in apps)

    # -------------------------------------------------------------- the steps, in the rollout's order

    def drain(self) -> None:
        self.node_patch({"spec": {"unschedulable": True},
                         "metadata": {"annotations": {"gpufleet.sharing/rollout": "in progress: floor"}}})
        self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % self.node)  # nothing to evict

    def operand_pause(self) -> None:
        labels = self.core.read_node(self.node).metadata.labels or {}
        self.previous = {"nvidia.com/gpu.deploy.%s" % k: labels.get("nvidia.com/gpu.deploy.%s" % k) for k in DEPLOY}
        self.running = sorted({pod.metadata.labels["app"] for pod in self.pods(OPERAND_APPS)})
        self.node_patch({"metadata": {"labels": {"nvidia.com/gpu.deploy.%s" % k: PAUSED for k in DEPLOY}}})
        self.until(lambda: not self.pods(OPERAND_APPS))

    def advertised(self) -> str:
        return (self.core.read_node(self.node).status.allocatable or {}).get(RESOURCE, "0")

    def apply(self) -> None:
        self.before = self.advertised()
        self.turn += 1
        layout = self.layouts[self.turn % len(self.layouts)]
        self.host("nvidia-mig-parted apply -f /dev/stdin -c %s" % layout, yaml.safe_dump(self.mig_configs))

    def read(self) -> None:
        self.host("nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader")

    def restart(self) -> None:
        self.node_patch({"metadata": {"labels": self.previous}})
        self.until(lambda: self.all_ready(self.running))  # the operands the lab runs (no nvidia-dcgm)

    def restart_pods(self) -> None:
        old = [p.metadata.uid for p in self.pods(RESTARTED_APPS)]
        for pod in self.pods(RESTARTED_APPS):
            self.core.delete_namespaced_pod(pod.metadata.name, NAMESPACE)
        self.until(lambda: self.all_ready(RESTARTED_APPS, old))

    def verification_pod(self) -> None:
        """The node advertises the new layout (the two layouts differ in their 1g.5gb count), then a
        pod asking for one runs there to its end."""
        self.until(lambda: self.advertised() != self.before)
        name = "floor-%d" % self.turn
        self.core.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": self.node},
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "verify", "image": "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04",
                                     "command": ["nvidia-smi", "-L"],
                                     "resources": {"limits": {RESOURCE: "1"}}}]}})
        self.until(lambda: self.core.read_namespaced_pod(name, "default").status.phase in ("Succeeded", "Failed"))
        self.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)

    def uncordon(self) -> None:
        self.node_patch({"spec": {"unschedulable": False},
                         "metadata": {"annotations": {"gpufleet.sharing/rollout": None}}})

    def lock_renewal(self) -> None:
        lease = self.leases.read_namespaced_lease("gpufleet-floor", "kube-system")
        lease.spec.renew_time = datetime.datetime.now(datetime.timezone.utc)
        self.leases.replace_namespaced_lease("gpufleet-floor", "kube-system", lease)

    def create_lease(self) -> None:
        self.leases.create_namespaced_lease("kube-system", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gpufleet-floor"},
            "spec": {"holderIdentity": "floor", "leaseDurationSeconds": 60}})


# bench step -> the lab's work for it, in the order the rollout does them
FLOOR_STEPS = [
    ("lock renewal", ("lock_renewal",)),
    ("drain", ("drain",)),
    ("operand pause", ("operand_pause",)),
    ("apply", ("read", "apply", "read")),
    ("restart", ("restart", "restart_pods")),
    ("advertise + verification pods", ("verification_pod",)),
    ("uncordon", ("uncordon",)),
]


def measure_floor(info: Mapping[str, Any], node: str, layouts: Sequence[str], mig_configs: Mapping[str, Any],
                  rounds: int = 3) -> Dict[str, float]:
    """step -> median seconds over ``rounds`` rounds of the whole sequence on ``node``."""
    lab = Lab(info, node, layouts, mig_configs)
    lab.create_lease()
    lab.connect()  # the connection is open, as Ansible's is after its first task
    seen: Dict[str, List[float]] = {}
    try:
        for _round in range(rounds):
            for step, works in FLOOR_STEPS:
                start = time.perf_counter()
                for work in works:
                    getattr(lab, work)()
                seen.setdefault(step, []).append(time.perf_counter() - start)
    finally:
        lab.disconnect()
    return {step: statistics.median(values) for step, values in seen.items()}

"""The lab's kubelet: runs the pods bound to any node of the virtual cluster (a test instrument).

What it models (and what it does not):

* admission and device allocation for extended resources (allocation.py): the device plugin of
  the node (see ``operator/deviceplugin.py``) publishes its devices;
* a pod's life: Pending/ContainerCreating -> Running -> Succeeded (or Failed) after a simulated
  runtime; ``restartPolicy: Always`` pods keep running; a failing container crash-loops;
* what a container does and prints (containers.py: ``Workload``, or the operator's programs);
* long-running pods holding GPUs show up as compute processes on the simulated GPUs, so that the
  MIG manager and mig-parted see busy GPUs like on real hosts (opt out per pod with an annotation);
  running operand pods whose program is a GPU client (``gpu_client``), and long-running pods of
  node agents that open every GPU (``NVIDIA_VISIBLE_DEVICES=all``, containers.opens_all_gpus),
  attach to the host as non-compute clients (gpuprocesses.attach_client);
* graceful deletion: terminating pods are stopped and removed (``delete(..., grace 0)``).

Images: an unparsable reference waits with ``InvalidImageName`` (imagepull.reference_problem); a private
registry without credentials gives ``ErrImagePull``. Not modelled: image contents, volumes (except the ConfigMap that holds the collection's sharing probe,
which ``probe.py`` reads and runs for real), probes, init containers (treated as done), cpu/memory
enforcement.
Lab-only pod annotations: see containers.py.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster import allocation, devicecheckpoint, gpuprocesses
from gpulab.cluster import devices as devmod
from gpulab.cluster.containers import ALLOCATED_ANNOTATION, Outcome, Program, Workload, opens_all_gpus
from gpulab.cluster.imagepull import private_hosts, pull_problems, reference_problem
from gpulab.cluster.objects import Obj, now_rfc3339
from gpulab.cluster.podstatus import conditions, container_status
from gpulab.cluster.probe import ProbeProgram

LOG = logging.getLogger("gpulab.cluster.kubelet")


@dataclasses.dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    node: str
    stage: str = "admitted"  # admitted | running | crashloop | finished | stopping
    due: Optional[float] = None
    allocations: Dict[str, List[devmod.Device]] = dataclasses.field(default_factory=dict)
    restarts: Dict[str, int] = dataclasses.field(default_factory=dict)
    failing: Dict[str, Outcome] = dataclasses.field(default_factory=dict)
    exit_codes: Dict[str, int] = dataclasses.field(default_factory=dict)
    processes: List[gpuprocesses.Process] = dataclasses.field(default_factory=list)
    client_of: Optional[str] = None  # state file of the host whose GPUs this pod holds as a client
    started_at: Optional[str] = None
    pod_ip: str = ""

    def device_ids(self) -> List[str]:
        return [device.id for found in self.allocations.values() for device in found]


def _node_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return "127.0.0.1"


class Kubelet:
    """All nodes' kubelets in one (single-threaded: `run_once` is called by the controller loop)."""

    def __init__(
        self,
        store: Any,
        settings: Any,
        node_devices: Callable[[str], Optional[devmod.NodeDevices]],
        program_for: Callable[[Obj, Obj], Optional[Program]],
        state_path_for: Callable[[str], Optional[str]],
        clock: Callable[[], float],
        claim_devices: Optional[Callable[[Obj, str], Tuple[Dict[str, List[devmod.Device]], str]]] = None,
    ):
        self.store = store
        self.settings = settings
        self.node_devices = node_devices
        self.program_for = program_for
        self.state_path_for = state_path_for
        self.clock = clock
        self.claim_devices = claim_devices  # DRA: the kubelet plugin's prepared devices (dra/claims.py)
        self._claim_waits: Dict[str, str] = {}
        self.runs: Dict[str, PodRun] = {}
        self.workload = Workload(settings.default_runtime)
        self.probe = ProbeProgram(store)  # the collection's sharing probe, run for real (probe.py)
        self._ip_counter = 10
        self._lock = threading.Lock()
        self._last_pods: List[Obj] = []  # as read by the last run_once (check_running reuses them)
        self._checkpoints: Dict[str, Dict[str, Any]] = {}  # node -> the device checkpoint last written

    # ------------------------------------------------------------------ queries

    def allocated(self, node: str) -> Dict[str, str]:
        """Device ID -> pod uid of the live allocations on a node."""
        result: Dict[str, str] = {}
        with self._lock:
            for run in self.runs.values():
                if run.node == node and run.stage not in ("finished", "stopping"):
                    for device_id in run.device_ids():
                        result[device_id] = run.uid
        return result

    def allocation_of(self, uid: str) -> Dict[str, List[devmod.Device]]:
        with self._lock:
            run = self.runs.get(uid)
            return {name: list(found) for name, found in run.allocations.items()} if run else {}

    # ------------------------------------------------------------------ the loop body

    def run_once(self) -> Optional[float]:
        """Advance every pod bound to a node; returns when it next needs to run (or None)."""
        now = self.clock()
        nodes = {node["metadata"]["name"]: node for node in self.store.items("v1/nodes")}
        self._last_pods = self.store.items("v1/pods")
        bound = [pod for pod in self._last_pods if (pod.get("spec") or {}).get("nodeName") in nodes]
        # The devices of pods gone from the API are free before any pod is admitted, as the real
        # device manager frees the devices of inactive pods before it allocates
        # (pkg/kubelet/cm/devicemanager/manager.go, UpdateAllocatedDevices): a pod bound right after
        # a forced deletion gets the device (tests/lab/tests/test_lab_kubelet_devices.py).
        seen = {pod["metadata"]["uid"] for pod in bound}
        with self._lock:
            gone = [uid for uid in self.runs if uid not in seen]
        for uid in gone:
            self._release(self.runs[uid])
            with self._lock:
                self.runs.pop(uid, None)
        for pod in bound:
            try:
                self._step(pod, nodes[pod["spec"]["nodeName"]], now)
            except Exception:  # one broken pod must not stop the node
                LOG.exception("kubelet: pod %s/%s", pod["metadata"].get("namespace"), pod["metadata"]["name"])
        self._write_checkpoints(nodes)
        with self._lock:
            dues = [run.due for run in self.runs.values() if run.due is not None]
        return min(dues) if dues else None

    def _step(self, pod: Obj, node: Obj, now: float) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        run = self.runs.get(uid)
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if meta.get("deletionTimestamp"):
            self._terminate(pod, run, now)
            return
        if run is None:
            if phase in ("Succeeded", "Failed"):
                return
            run = self._admit(pod, node, now)
            if run is None:
                return
        if run.due is None or run.due > now:
            return
        if run.stage == "admitted":
            self._start(pod, run, now)
        elif run.stage == "crashloop":
            self._restart(pod, run, now)
        elif run.stage == "running":
            self._finish(pod, run, now)

    # ------------------------------------------------------------------ admission

    def _reject(self, pod: Obj, reason: str, message: str) -> None:
        def mutate(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status.update({"phase": "Failed", "reason": reason, "message": message})
        self.store.controller_update("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"], mutate, subresource="status")
        self.store.record_event(pod, reason, message, type="Warning", component="kubelet")

    def _secret(self, namespace: str, name: str) -> Optional[Obj]:
        try:
            return self.store.get("v1/secrets", namespace, name)
        except Exception:  # pylint: disable=broad-except
            return None

    def _pull_denied(self, pod: Obj) -> bool:
        """ErrImagePull while the pod lacks credentials for a private registry (retried every pass)."""
        failures, missing = pull_problems(pod, private_hosts(getattr(self.settings, "private_registries", "")), self._secret)
        if not failures:
            return False
        message = "; ".join(failures)
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if any(((s.get("state") or {}).get("waiting") or {}).get("message") == message for s in statuses):
            return True
        if missing:
            self.store.record_event(pod, "FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (%s); "
                                    "attempting to pull the image may not succeed." % ", ".join(missing),
                                    type="Warning", component="kubelet")
        self.store.record_event(pod, "Failed", message, type="Warning", component="kubelet")

        def mutate(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = "Pending"
            status["containerStatuses"] = [
                container_status(c, {"waiting": {"reason": "ErrImagePull", "message": message}}, ready=False, restarts=0)
                for c in obj["spec"].get("containers") or []]
        self.store.controller_update("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"], mutate,
                                     subresource="status")
        return True

    def _invalid_image(self, pod: Obj) -> bool:
        """An image reference the kubelet cannot parse: the container waits with ``InvalidImageName`` and the
        pod stays Pending (pkg/kubelet/images/image_manager.go, EnsureImageExists; no retry can help)."""
        waiting = {}
        for container in pod["spec"].get("containers") or []:
            problem = reference_problem(str(container.get("image") or ""))
            if problem:
                waiting[container["name"]] = {"reason": "InvalidImageName", "message": 'Failed to apply default image tag "%s": '
                                              'couldn\'t parse image reference "%s": %s' % (container.get("image"), container.get("image"), problem)}
        if not waiting:
            return False
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if any(((s.get("state") or {}).get("waiting") or {}).get("reason") == "InvalidImageName" for s in statuses):
            return True
        for found in waiting.values():
            self.store.record_event(pod, "InspectFailed", found["message"], type="Warning", component="kubelet")
        self.store.record_event(pod, "Failed", "Error: InvalidImageName", type="Warning", component="kubelet")

        def mutate(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = "Pending"
            status["containerStatuses"] = [
                container_status(c, {"waiting": waiting.get(c["name"], {"reason": "ContainerCreating"})}, ready=False, restarts=0)
                for c in obj["spec"].get("containers") or []]
        self.store.controller_update("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"], mutate,
                                     subresource="status")
        return True

    def _admit(self, pod: Obj, node: Obj, now: float) -> Optional[PodRun]:
        meta = pod["metadata"]
        node_name = node["metadata"]["name"]
        if self._invalid_image(pod) or self._pull_denied(pod):
            return None
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        try:
            allocations = allocation.allocate(pod, allocatable, self.node_devices(node_name),
                                              self.allocated(node_name))
        except allocation.Rejected as rejected:
            self._reject(pod, rejected.reason, rejected.message)
            return None
        if self.claim_devices is not None:
            claimed, waiting = self.claim_devices(pod, node_name)
            if waiting:
                if self._claim_waits.get(meta["uid"]) != waiting:
                    self._claim_waits[meta["uid"]] = waiting
                    self.store.record_event(pod, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: "
                                            + waiting, type="Warning", component="kubelet")
                return None
            self._claim_waits.pop(meta["uid"], None)
            for name, found in claimed.items():
                allocations.setdefault(name, []).extend(found)
        run = PodRun(uid=meta["uid"], namespace=meta["namespace"], name=meta["name"], node=node_name, allocations=allocations)
        operand = self._is_operand(pod)
        run.due = now + (self.settings.operand_start_delay if operand else self.settings.pod_start_delay)
        self._ip_counter += 1
        run.pod_ip = f"10.244.{self._ip_counter // 250}.{self._ip_counter % 250 + 2}"
        with self._lock:
            self.runs[run.uid] = run
        annotation = ";".join(f"{name}={','.join(d.id for d in found)}" for name, found in allocations.items() if found)
        host_ip = _node_ip(node)

        def mutate(obj: Obj) -> None:
            if annotation:
                obj["metadata"].setdefault("annotations", {})[ALLOCATED_ANNOTATION] = annotation
            status = obj.setdefault("status", {})
            status["phase"] = "Pending"
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
            status["startTime"] = now_rfc3339(now)
            status["conditions"] = conditions(obj, scheduled=True, initialized=True, ready=False, stamp=now)
            status["containerStatuses"] = [
                container_status(c, {"waiting": {"reason": "ContainerCreating"}}, ready=False, restarts=0)
                for c in obj["spec"].get("containers") or []
            ]
        self.store.controller_update("v1/pods", run.namespace, run.name, mutate)
        return run

    def _is_operand(self, pod: Obj) -> bool:
        containers = pod["spec"].get("containers") or []
        return bool(containers) and self.program_for(pod, containers[0]) is not None

    # ------------------------------------------------------------------ running

    def _program(self, pod: Obj, container: Obj) -> Program:
        return self.program_for(pod, container) or (self.probe if self.probe.handles(pod, container) else self.workload)

    def _start(self, pod: Obj, run: PodRun, now: float) -> None:
        outcomes: Dict[str, Outcome] = {}
        for container in pod["spec"].get("containers") or []:
            allocated = run.allocations.get(container["name"], [])
            outcome = self._program(pod, container).start(pod, container, allocated)
            outcomes[container["name"]] = outcome
            if outcome.log:
                self.store.set_pod_log(run.namespace, run.name, outcome.log, container=container["name"], append=True)
        run.started_at = now_rfc3339(now)
        self._apply_outcomes(pod, run, outcomes, now)

    def _apply_outcomes(self, pod: Obj, run: PodRun, outcomes: Dict[str, Outcome], now: float) -> None:
        restart_policy = pod["spec"].get("restartPolicy", "Always")
        failed = {name: outcome for name, outcome in outcomes.items() if not outcome.ok}
        run.failing = failed
        if failed and restart_policy == "Never":
            self._write_terminal(pod, run, now, {name: (o.exit_code or 1, o.message) for name, o in outcomes.items()})
            return
        if failed:
            for name in failed:
                run.restarts[name] = run.restarts.get(name, 0) + 1
            run.stage = "crashloop"
            backoff = self.settings.crash_backoff * (2 ** min(4, max(run.restarts.values()) - 1))
            run.due = now + backoff
        else:
            run.stage = "running"
            runtimes = [o.runtime for o in outcomes.values() if o.runtime is not None]
            run.exit_codes = {name: o.exit_code for name, o in outcomes.items()}
            run.due = now + max(runtimes) if runtimes and len(runtimes) == len(outcomes) else None
            if run.due is None:
                self._hold_gpus(pod, run)
        self._write_running(pod, run, now)

    def _write_running(self, pod: Obj, run: PodRun, now: float) -> None:
        del now
        ready = not run.failing

        def mutate(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = "Running"
            status["podIP"] = run.pod_ip
            status["podIPs"] = [{"ip": run.pod_ip}]
            status["conditions"] = conditions(obj, scheduled=True, initialized=True, ready=ready, stamp=self.clock())
            statuses = []
            for container in obj["spec"].get("containers") or []:
                name = container["name"]
                failure = run.failing.get(name)
                restarts = run.restarts.get(name, 0)
                if failure is not None:
                    backoff = f"back-off restarting failed container={name} pod={run.name}_{run.namespace}({run.uid})"
                    state = {"waiting": {"reason": "CrashLoopBackOff", "message": backoff}}
                    last = {"terminated": {"exitCode": failure.exit_code or 1, "reason": "Error", "message": failure.message,
                                           "startedAt": run.started_at, "finishedAt": run.started_at}}
                    statuses.append(container_status(container, state, ready=False, restarts=restarts, last=last))
                else:
                    statuses.append(container_status(container, {"running": {"startedAt": run.started_at}}, ready=True, restarts=restarts))
            status["containerStatuses"] = statuses
        self.store.controller_update("v1/pods", run.namespace, run.name, mutate, subresource="status")

    def _restart(self, pod: Obj, run: PodRun, now: float) -> None:
        outcomes: Dict[str, Outcome] = {}
        for container in pod["spec"].get("containers") or []:
            name = container["name"]
            if name in run.failing:
                outcome = self._program(pod, container).start(pod, container, run.allocations.get(name, []))
                if outcome.log:
                    self.store.set_pod_log(run.namespace, run.name, outcome.log, container=name, append=True)
            else:
                outcome = Outcome(ok=True)
            outcomes[name] = outcome
        run.started_at = now_rfc3339(now)
        self._apply_outcomes(pod, run, outcomes, now)

    def node_rebooted(self, node: str) -> None:
        """The host rebooted: every container on it starts again (its GPU processes are gone)."""
        now = self.clock()
        for pod in self.store.items("v1/pods", field_selector=f"spec.nodeName={node}"):
            run = self.runs.get(pod["metadata"]["uid"])
            if run is None or run.stage not in ("running", "crashloop") or pod["metadata"].get("deletionTimestamp"):
                continue
            run.processes = []
            run.client_of = None  # the reboot detached every client
            outcomes: Dict[str, Outcome] = {}
            for container in pod["spec"].get("containers") or []:
                name = container["name"]
                program = self._program(pod, container)
                program.stop(pod)
                outcome = program.start(pod, container, run.allocations.get(name, []))
                if outcome.log:
                    self.store.set_pod_log(run.namespace, run.name, outcome.log, container=name, append=True)
                run.restarts[name] = run.restarts.get(name, 0) + (0 if outcome.ok is False else 1)
                outcomes[name] = outcome
            run.started_at = now_rfc3339(now)
            self._apply_outcomes(pod, run, outcomes, now)

    def check_running(self) -> None:
        """Ask long-running programs whether they still run (the operator's config-manager may
        make a device plugin exit); a crash turns into CrashLoopBackOff. A program whose every
        container exited by itself (an outcome with a runtime, e.g. the probe) finishes the pod."""
        now = self.clock()
        for pod in self._last_pods:
            run = self.runs.get(pod["metadata"]["uid"])
            if run is None or run.stage != "running" or run.due is not None or pod["metadata"].get("deletionTimestamp"):
                continue
            outcomes: Dict[str, Outcome] = {}
            crashed, exited = False, True
            for container in pod["spec"].get("containers") or []:
                result = self._program(pod, container).check(pod, container)
                outcomes[container["name"]] = result or Outcome(ok=True)
                crashed = crashed or (result is not None and not result.ok)
                exited = exited and result is not None and result.runtime is not None
            if crashed or (exited and outcomes):
                for name, outcome in outcomes.items():
                    if outcome.log:
                        self.store.set_pod_log(run.namespace, run.name, outcome.log, container=name, append=True)
                self._apply_outcomes(pod, run, outcomes, now)

    def _finish(self, pod: Obj, run: PodRun, now: float) -> None:
        self._write_terminal(pod, run, now, {name: (code, "") for name, code in run.exit_codes.items()})

    def _write_terminal(self, pod: Obj, run: PodRun, now: float, codes: Dict[str, Tuple[int, str]]) -> None:
        run.stage = "finished"
        run.due = None
        self._release(run)
        phase = "Succeeded" if all(code == 0 for code, _message in codes.values()) else "Failed"
        finished = now_rfc3339(now)

        def mutate(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = phase
            status["conditions"] = conditions(obj, scheduled=True, initialized=True, ready=False, stamp=now, reason="PodCompleted")
            statuses = []
            for container in obj["spec"].get("containers") or []:
                code, message = codes.get(container["name"], (0, ""))
                terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                              "startedAt": run.started_at or finished, "finishedAt": finished}
                if message:
                    terminated["message"] = message
                statuses.append(container_status(container, {"terminated": terminated}, ready=False, restarts=run.restarts.get(container["name"], 0)))
            status["containerStatuses"] = statuses
        self.store.controller_update("v1/pods", run.namespace, run.name, mutate, subresource="status")

    # ------------------------------------------------------------------ the device checkpoint

    def _write_checkpoints(self, nodes: Dict[str, Obj]) -> None:
        """Each host's device manager checkpoint (devicecheckpoint.py), rewritten when it changes: the
        live allocations of the node's pods and the devices its plugin registers. A device-plugin
        restart changes only the registered devices: running pods keep their entries."""
        for node_name in nodes:
            path = self.state_path_for(node_name)
            if not path:
                continue
            with self._lock:
                holders = [(run.uid, container, list(found)) for run in self.runs.values()
                           if run.node == node_name and run.stage not in ("finished", "stopping")
                           for container, found in run.allocations.items() if found]
            published = self.node_devices(node_name)
            checkpoint = devicecheckpoint.build(holders, published.devices if published else {})
            if self._checkpoints.get(node_name) != checkpoint:
                devicecheckpoint.write(path, checkpoint)
                self._checkpoints[node_name] = checkpoint

    # ------------------------------------------------------------------ GPU processes

    def _hold_gpus(self, pod: Obj, run: PodRun) -> None:
        path = self.state_path_for(run.node)
        if path and gpuprocesses.wants_gpu_processes(pod):
            run.processes.extend(gpuprocesses.start(path, run.allocations, run.name))
        if path and run.client_of is None and self._is_gpu_client(pod):
            if gpuprocesses.attach_client(path, f"{run.namespace}/{run.name}"):
                run.client_of = path

    def _is_gpu_client(self, pod: Obj) -> bool:
        long_running = pod["spec"].get("restartPolicy", "Always") == "Always"
        return any(getattr(self.program_for(pod, container), "gpu_client", False)
                   or (long_running and opens_all_gpus(container))
                   for container in pod["spec"].get("containers") or [])

    def _release(self, run: PodRun) -> None:
        if run.processes:
            gpuprocesses.stop(run.processes)
            run.processes = []
        if run.client_of:
            gpuprocesses.detach_client(run.client_of, f"{run.namespace}/{run.name}")
            run.client_of = None
        with self._lock:
            run.allocations = {}

    # ------------------------------------------------------------------ deletion

    def _terminate(self, pod: Obj, run: Optional[PodRun], now: float) -> None:
        meta = pod["metadata"]
        if run is None:
            run = PodRun(uid=meta["uid"], namespace=meta["namespace"], name=meta["name"], node=pod["spec"]["nodeName"])
            with self._lock:
                self.runs[run.uid] = run
        if run.stage != "stopping":
            for container in pod["spec"].get("containers") or []:
                self._program(pod, container).stop(pod)
            self._release(run)
            run.stage = "stopping"
            run.due = now + self.settings.pod_stop_delay
            return
        if run.due is not None and run.due <= now:
            try:
                self.store.delete("v1/pods", run.namespace, run.name, grace_period_seconds=0)
            except Exception as exc:  # pylint: disable=broad-except
                if getattr(exc, "code", None) != 404:
                    raise
            run.due = None


__all__ = ["Kubelet", "PodRun"]

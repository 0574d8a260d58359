"""The lab's kubelet: runs the pods bound to any node of the virtual cluster (a test instrument).

What it models (and what it does not):

* admission and device allocation for extended resources: the device plugin of the node (see
  ``operator.py``) publishes its devices; each container gets distinct device IDs (a MIG device or a
  time-slicing replica is never handed out twice), spread over the physical devices the way the
  plugin's preferred allocation does; `failRequestsGreaterThanOne` refuses requests > 1 (SPECS §9.3);
* a pod's life: Pending/ContainerCreating -> Running -> Succeeded (or Failed) after a simulated
  runtime; ``restartPolicy: Always`` pods keep running; a failing container crash-loops;
* what a container prints: a container whose command contains ``nvidia-smi -L`` logs exactly the
  devices it was allocated, in the real ``-L`` format (SPECS §4.7); other workloads log nothing;
* long-running pods holding GPUs show up as compute processes on the simulated GPUs, so that the
  MIG manager and mig-parted see busy GPUs like on real hosts (opt out per pod with an annotation);
* graceful deletion: terminating pods are stopped and removed (``delete(..., grace 0)``).

Not modelled: images, volumes, probes, init containers (treated as done), cpu/memory enforcement.

Lab-only pod annotations (prefix ``lab.gpufleet.io/``): ``runtime-seconds`` (how long the
container runs), ``exit-code`` (its exit code), ``gpu-process`` ("false" = hold no GPU process),
``allocated-devices`` (written by the kubelet: ``container=id,id;container=...``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import shlex
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Tuple

from gpulab.cluster import devices as devmod

LOG = logging.getLogger("gpulab.cluster.kubelet")

ANNOTATION_PREFIX = "lab.gpufleet.io/"
RUNTIME_ANNOTATION = ANNOTATION_PREFIX + "runtime-seconds"
EXIT_CODE_ANNOTATION = ANNOTATION_PREFIX + "exit-code"
GPU_PROCESS_ANNOTATION = ANNOTATION_PREFIX + "gpu-process"
ALLOCATED_ANNOTATION = ANNOTATION_PREFIX + "allocated-devices"

Obj = Dict[str, Any]


def now_rfc3339(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class Outcome:
    """What a container did when started (or noticed while running)."""

    ok: bool = True
    log: str = ""
    message: str = ""  # termination message when not ok
    exit_code: int = 0
    runtime: Optional[float] = None  # seconds until it exits by itself; None = runs until stopped


class Program(Protocol):
    """Behaviour of a container. The default one is `Workload`; the operator registers its operands."""

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome: ...

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]: ...

    def stop(self, pod: Obj) -> None: ...


def container_command(container: Mapping[str, Any]) -> List[str]:
    words: List[str] = []
    for part in list(container.get("command") or []) + list(container.get("args") or []):
        text = str(part)
        try:
            words.extend(shlex.split(text))
        except ValueError:
            words.extend(text.split())
    return words


def runs_nvidia_smi_list(container: Mapping[str, Any]) -> bool:
    words = [word.strip(";&|") for word in container_command(container)]
    for index, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "nvidia-smi":
            following = words[index + 1:index + 3]
            if "-L" in following or "--list-gpus" in following:
                return True
    return False


class Workload:
    """Any user container: `nvidia-smi -L` prints its devices; everything else prints nothing."""

    def __init__(self, default_runtime: float):
        self.default_runtime = default_runtime

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        annotations = pod["metadata"].get("annotations") or {}
        runtime = self.default_runtime
        try:
            runtime = float(annotations.get(RUNTIME_ANNOTATION, runtime))
        except ValueError:
            pass
        try:
            exit_code = int(annotations.get(EXIT_CODE_ANNOTATION, 0))
        except ValueError:
            exit_code = 0
        log = ""
        if runs_nvidia_smi_list(container):
            if allocated:
                log = devmod.render_smi_list(allocated)
            else:
                # A container without NVIDIA devices (SPECS §5 "No devices were found", rc 6).
                log, exit_code = "No devices were found\n", exit_code or 6
        long_running = pod["spec"].get("restartPolicy", "Always") == "Always"
        return Outcome(ok=True, log=log, exit_code=exit_code, runtime=None if long_running else runtime)

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        del pod


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
    processes: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    started_at: Optional[str] = None
    pod_ip: str = ""

    def device_ids(self) -> List[str]:
        return [device.id for found in self.allocations.values() for device in found]


def _requests(container: Mapping[str, Any]) -> Dict[str, int]:
    """Extended-resource requests of a container (limits are authoritative for them)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("requests") or {})
    merged.update(resources.get("limits") or {})
    result: Dict[str, int] = {}
    for name, quantity in merged.items():
        if "/" in name and not name.split("/")[0].endswith("kubernetes.io"):
            try:
                result[name] = int(float(str(quantity)))
            except ValueError:
                continue
    return result


def pod_extended_requests(pod: Mapping[str, Any]) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, count in _requests(container).items():
            total[name] = total.get(name, 0) + count
    return total


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
    ):
        self.store = store
        self.settings = settings
        self.node_devices = node_devices
        self.program_for = program_for
        self.state_path_for = state_path_for
        self.clock = clock
        self.runs: Dict[str, PodRun] = {}
        self.workload = Workload(settings.default_runtime)
        self._ip_counter = 10
        self._lock = threading.Lock()
        self._last_pods: List[Obj] = []  # as read by the last run_once (check_running reuses them)

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
        seen = set()
        self._last_pods = self.store.items("v1/pods")
        for pod in self._last_pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node not in nodes:
                continue
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            try:
                self._step(pod, nodes[node], now)
            except Exception:  # one broken pod must not stop the node
                LOG.exception("kubelet: pod %s/%s", pod["metadata"].get("namespace"), pod["metadata"]["name"])
        with self._lock:
            gone = [uid for uid in self.runs if uid not in seen]
        for uid in gone:
            self._release(self.runs[uid])
            with self._lock:
                self.runs.pop(uid, None)
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

    def _admit(self, pod: Obj, node: Obj, now: float) -> Optional[PodRun]:
        meta = pod["metadata"]
        node_name = node["metadata"]["name"]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        published = self.node_devices(node_name)
        used = self.allocated(node_name)
        # Extended resources are integers; anything not published by a plugin is checked
        # against allocatable the way the kubelet's admission predicate does.
        for resource, wanted in pod_extended_requests(pod).items():
            have = _int_quantity(allocatable.get(resource, "0"))
            in_use = sum(1 for device_id in used if self._resource_of(node_name, device_id, published) == resource)
            if wanted + in_use > have:
                self._reject(
                    pod,
                    f"OutOf{resource}",
                    f"Pod was rejected: Node didn't have enough resource: {resource}, requested: {wanted}, used: {in_use}, capacity: {have}",
                )
                return None
        allocations: Dict[str, List[devmod.Device]] = {}
        taken = set(used)
        for container in pod["spec"].get("containers") or []:
            picked: List[devmod.Device] = []
            for resource, wanted in sorted(_requests(container).items()):
                if wanted <= 0:
                    continue
                if published is None or resource not in published.devices:
                    if resource.startswith("nvidia.com/"):
                        self._reject(
                            pod,
                            "UnexpectedAdmissionError",
                            f"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices {resource}, which is unexpected",
                        )
                        return None
                    continue
                if published.max_request(resource) == 1 and wanted > 1:
                    self._reject(
                        pod,
                        "UnexpectedAdmissionError",
                        "Allocate failed due to rpc error: code = Unknown desc = request for "
                        f"'{resource}: {wanted}' too large: maximum request size for shared resources is 1, which is unexpected",
                    )
                    return None
                chosen = _spread_pick(published.devices[resource], taken, wanted)
                if chosen is None:
                    self._reject(
                        pod,
                        "UnexpectedAdmissionError",
                        f"Allocate failed due to requested number of devices unavailable for {resource}. Requested: {wanted}, Available: "
                        f"{len([d for d in published.devices[resource] if d.id not in taken])}, which is unexpected",
                    )
                    return None
                taken.update(device.id for device in chosen)
                picked.extend(chosen)
            allocations[container["name"]] = picked
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
            status["conditions"] = _conditions(obj, scheduled=True, initialized=True, ready=False, stamp=now)
            status["containerStatuses"] = [
                _container_status(c, {"waiting": {"reason": "ContainerCreating"}}, ready=False, restarts=0)
                for c in obj["spec"].get("containers") or []
            ]
        self.store.controller_update("v1/pods", run.namespace, run.name, mutate)
        return run

    def _resource_of(self, node: str, device_id: str, published: Optional[devmod.NodeDevices]) -> Optional[str]:
        del node
        if published is None:
            return None
        for resource, found in published.devices.items():
            if any(device.id == device_id for device in found):
                return resource
        return None

    def _is_operand(self, pod: Obj) -> bool:
        containers = pod["spec"].get("containers") or []
        return bool(containers) and self.program_for(pod, containers[0]) is not None

    # ------------------------------------------------------------------ running

    def _program(self, pod: Obj, container: Obj) -> Program:
        return self.program_for(pod, container) or self.workload

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
            status["conditions"] = _conditions(obj, scheduled=True, initialized=True, ready=ready, stamp=self.clock())
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
                    statuses.append(_container_status(container, state, ready=False, restarts=restarts, last=last))
                else:
                    statuses.append(_container_status(container, {"running": {"startedAt": run.started_at}}, ready=True, restarts=restarts))
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
        make a device plugin exit); a crash turns into CrashLoopBackOff."""
        now = self.clock()
        for pod in self._last_pods:
            run = self.runs.get(pod["metadata"]["uid"])
            if run is None or run.stage != "running" or run.due is not None or pod["metadata"].get("deletionTimestamp"):
                continue
            outcomes: Dict[str, Outcome] = {}
            crashed = False
            for container in pod["spec"].get("containers") or []:
                program = self.program_for(pod, container)
                result = program.check(pod, container) if program is not None else None
                outcomes[container["name"]] = result or Outcome(ok=True)
                crashed = crashed or (result is not None and not result.ok)
            if crashed:
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
            status["conditions"] = _conditions(obj, scheduled=True, initialized=True, ready=False, stamp=now, reason="PodCompleted")
            statuses = []
            for container in obj["spec"].get("containers") or []:
                code, message = codes.get(container["name"], (0, ""))
                terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                              "startedAt": run.started_at or finished, "finishedAt": finished}
                if message:
                    terminated["message"] = message
                statuses.append(_container_status(container, {"terminated": terminated}, ready=False, restarts=run.restarts.get(container["name"], 0)))
            status["containerStatuses"] = statuses
        self.store.controller_update("v1/pods", run.namespace, run.name, mutate, subresource="status")

    # ------------------------------------------------------------------ GPU processes

    def _hold_gpus(self, pod: Obj, run: PodRun) -> None:
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get(GPU_PROCESS_ANNOTATION, "true").lower() == "false":
            return
        path = self.state_path_for(run.node)
        if not path:
            return
        from gpulab import gpustate  # pylint: disable=import-outside-toplevel

        seen = set()
        for name, found in run.allocations.items():
            for device in found:
                if device.physical_id in seen:
                    continue
                seen.add(device.physical_id)
                try:
                    pid = gpustate.add_process(path, device.gpu_index, None, name[:15] or "cuda-app", 512, device.gi_id, device.ci_id)
                except gpustate.StateError as exc:  # the device vanished (e.g. MIG reconfigured under us)
                    LOG.warning("kubelet: cannot start a GPU process for %s: %s", run.name, exc)
                    continue
                run.processes.append((path, pid))

    def _release(self, run: PodRun) -> None:
        if run.processes:
            from gpulab import gpustate  # pylint: disable=import-outside-toplevel

            for path, pid in run.processes:
                try:
                    gpustate.remove_process(path, pid)
                except gpustate.StateError:
                    pass
            run.processes = []
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
                program = self.program_for(pod, container)
                if program is not None:
                    program.stop(pod)
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


def _spread_pick(candidates: Iterable[devmod.Device], taken: Iterable[str], wanted: int) -> Optional[List[devmod.Device]]:
    """Pick `wanted` free devices, preferring physical devices with the fewest replicas in use."""
    taken_set = set(taken)
    pool = list(candidates)
    usage: Dict[str, int] = {}
    for device in pool:
        if device.id in taken_set:
            usage[device.physical_id] = usage.get(device.physical_id, 0) + 1
    free = [device for device in pool if device.id not in taken_set]
    if len(free) < wanted:
        return None
    chosen: List[devmod.Device] = []
    for _round in range(wanted):
        best = min(free, key=lambda d: (usage.get(d.physical_id, 0), pool.index(d)))
        chosen.append(best)
        free.remove(best)
        usage[best.physical_id] = usage.get(best.physical_id, 0) + 1
    return chosen


def _int_quantity(value: Any) -> int:
    try:
        return int(float(str(value)))
    except ValueError:
        return 0


def _node_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return "127.0.0.1"


def _conditions(pod: Obj, scheduled: bool, initialized: bool, ready: bool, stamp: float, reason: Optional[str] = None) -> List[Obj]:
    """Pod conditions, keeping lastTransitionTime when a condition's status did not change."""
    previous = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    wanted = [
        ("PodReadyToStartContainers", True),
        ("Initialized", initialized),
        ("Ready", ready),
        ("ContainersReady", ready),
        ("PodScheduled", scheduled),
    ]
    result = []
    for kind, value in wanted:
        text = "True" if value else "False"
        old = previous.get(kind)
        condition = {"type": kind, "status": text, "lastProbeTime": None,
                     "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == text else now_rfc3339(stamp)}
        if not value and kind in ("Ready", "ContainersReady"):
            condition["reason"] = reason or "ContainersNotReady"
        result.append(condition)
    return result


def _container_status(container: Obj, state: Obj, ready: bool, restarts: int, last: Optional[Obj] = None) -> Obj:
    image = container.get("image", "")
    running = "running" in state
    status = {
        "name": container["name"],
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{'0' * 64}" if image else "",
        "ready": ready,
        "started": running,
        "restartCount": restarts,
        "state": state,
        "lastState": last or {},
    }
    if "waiting" not in state or restarts:
        status["containerID"] = "containerd://" + format(abs(hash((container["name"], image, restarts))) % (1 << 64), "016x") * 4
    return status

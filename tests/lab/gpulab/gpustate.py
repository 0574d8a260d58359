"""State of one simulated GPU host: the simulator's single source of truth (tests/lab/README.md, "Python API").

One JSON file per host. Every reader and writer goes through this module:

* ``load(path)`` takes a shared ``flock`` on ``<path>.lock`` while reading;
* ``locked(path)`` takes the exclusive lock, yields the state and saves it when the block exits
  without an exception (an exception leaves the file untouched);
* saves are atomic: a temporary file in the same directory, fsync, then ``os.replace``.

Mutations append to ``HostState.events`` (an audit log) so that tests can prove that a check-mode
or failed run changed nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from gpulab.models import ModelSpec, load_model

SCHEMA_VERSION = 1

# Services a GPU host typically runs; the systemctl shim and the mig-parted hooks act on these.
DEFAULT_SERVICES = (
    "nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "nvsm", "dcgm-exporter",
    "kubelet", "containerd",
)

# PCI bus numbers of an 8-GPU HGX board; deterministic by GPU index (the lab never needs more).
_BUS_NUMBERS = (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)


class StateError(Exception):
    """A state operation was refused (unknown GPU, bad process, missing file...)."""


@dataclass
class ComputeInstance:
    ci_id: int
    profile_id: int  # CI-profile enum (docs/reference/specs.md §1.3): 1 slice -> 0, 2 -> 1, 3 -> 2, 4 -> 3, 7 -> 4
    profile: str  # "3g.20gb" (full GI) or "1c.3g.20gb"
    uuid: str


@dataclass
class GpuInstance:
    gi_id: int
    profile_id: int  # the device-specific ID printed by `nvidia-smi mig -lgip`
    profile: str  # "3g.20gb"
    start: int
    size: int
    compute_instances: List[ComputeInstance] = field(default_factory=list)


@dataclass
class Process:
    pid: int
    name: str
    used_mib: int
    gi_id: Optional[int] = None
    ci_id: Optional[int] = None


@dataclass
class Gpu:
    index: int
    model: str
    name: str
    uuid: str
    pci_bus_id: str
    pci_device_id: str
    memory_total_mib: int
    mig_current: Optional[bool]
    mig_pending: Optional[bool]
    gpu_instances: List[GpuInstance] = field(default_factory=list)
    processes: List[Process] = field(default_factory=list)
    # Extensions of the documented contract (read-only copies of model.json values).
    pci_sub_device_id: str = ""
    vbios_version: str = ""
    compute_cap: str = ""
    architecture: str = ""

    @property
    def spec(self) -> ModelSpec:
        return load_model(self.model)

    @property
    def mig_capable(self) -> bool:
        return self.mig_current is not None

    def gpu_instance(self, gi_id: int) -> Optional[GpuInstance]:
        return next((gi for gi in self.gpu_instances if gi.gi_id == gi_id), None)

    def mig_devices(self) -> List[Tuple[GpuInstance, ComputeInstance]]:
        """MIG devices (GI, CI pairs) in the order nvidia-smi enumerates them (by GI then CI ID)."""
        pairs = [(gi, ci) for gi in self.gpu_instances for ci in gi.compute_instances]
        return sorted(pairs, key=lambda pair: (pair[0].gi_id, pair[1].ci_id))


@dataclass
class HostState:
    hostname: str
    boot_id: str
    reboots: int
    driver_version: str
    gpus: List[Gpu] = field(default_factory=list)
    services: Dict[str, str] = field(default_factory=dict)  # name -> "active" | "inactive"
    events: List[Dict[str, Any]] = field(default_factory=list)
    # Extensions of the documented contract.
    powered_on: bool = True  # False after `shutdown -h`: the host is "down"
    services_enabled: Dict[str, bool] = field(default_factory=dict)
    next_pid: int = 4100  # fake PIDs handed to simulated workloads
    # Services whose active state counts as a client holding every GPU (e.g. ["nvsm", "nvidia-dcgm"]
    # to model a DGX, docs/reference/specs.md §5); empty by default.
    gpu_client_services: List[str] = field(default_factory=list)
    # Non-compute clients holding every GPU's device files, e.g. the GPU Operator's device plugin
    # pod ("gpu-operator/nvidia-device-plugin-daemonset-x2v9q"): not listed by
    # --query-compute-apps, but a MIG mode change stays pending while one runs
    # (docs/reference/specs.md §7.6). Registered by the lab's kubelet while such a pod runs.
    gpu_client_pods: List[str] = field(default_factory=list)
    schema: int = SCHEMA_VERSION

    def gpu(self, index: int) -> Gpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise StateError(f"{self.hostname}: no GPU with index {index}")

    def record(self, actor: str, action: str, **detail: Any) -> None:
        """Append an audit event (every mutation calls this)."""
        self.events.append({
            "seq": len(self.events) + 1,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "boot_id": self.boot_id,
            "actor": actor,
            "action": action,
            "detail": detail,
        })

    def all_processes(self) -> List[Tuple[Gpu, Process]]:
        return [(gpu, proc) for gpu in self.gpus for proc in gpu.processes]

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- (de)serialisation

def _gpu_from_dict(data: Dict[str, Any]) -> Gpu:
    data = dict(data)
    data["gpu_instances"] = [
        GpuInstance(**{**gi, "compute_instances": [ComputeInstance(**ci) for ci in gi.get("compute_instances", [])]})
        for gi in data.get("gpu_instances", [])
    ]
    data["processes"] = [Process(**proc) for proc in data.get("processes", [])]
    return Gpu(**data)


def from_dict(data: Dict[str, Any]) -> HostState:
    data = dict(data)
    if data.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise StateError(f"unsupported state schema {data.get('schema')!r}")
    data["gpus"] = [_gpu_from_dict(gpu) for gpu in data.get("gpus", [])]
    return HostState(**data)


def _lock_path(path: str) -> str:
    return path + ".lock"


@contextlib.contextmanager
def _flock(path: str, mode: int) -> Iterator[None]:
    try:
        fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # a reader without write access still gets a shared lock
        fd = os.open(_lock_path(path), os.O_RDONLY)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read(path: str) -> HostState:
    try:
        with open(path, encoding="utf-8") as handle:
            return from_dict(json.load(handle))
    except FileNotFoundError:
        raise StateError(f"no GPU state file at {path}") from None


def save(path: str, state: HostState) -> None:
    """Atomic write (temp file in the same directory + os.replace). Callers hold the lock."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state.to_dict(), handle, indent=1, sort_keys=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load(path: str) -> HostState:
    """Read the state under a shared lock."""
    with _flock(path, fcntl.LOCK_SH):
        return _read(path)


@contextlib.contextmanager
def locked(path: str) -> Iterator[HostState]:
    """Exclusive access; the state is saved only if the block exits cleanly."""
    with _flock(path, fcntl.LOCK_EX):
        state = _read(path)
        yield state
        save(path, state)


# --------------------------------------------------------------------------- identifiers

def _hex_digest(*parts: Any) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()


def _uuid_text(digest: str) -> str:
    return f"{digest[0:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def gpu_uuid(hostname: str, index: int) -> str:
    return "GPU-" + _uuid_text(_hex_digest("gpu", hostname, index))


def pci_bus_id(index: int) -> str:
    bus = _BUS_NUMBERS[index] if index < len(_BUS_NUMBERS) else 0xC0 + index
    return f"00000000:{bus:02X}:00.0"


def mig_uuid(gpu_uuid_value: str, gi_id: int, ci_id: int, start: int) -> str:
    """Deterministic per (GPU, GI, CI, placement) so tests can predict MIG device UUIDs."""
    return "MIG-" + _uuid_text(_hex_digest("mig", gpu_uuid_value, gi_id, ci_id, start))


def _boot_id(hostname: str, reboots: int) -> str:
    return _uuid_text(_hex_digest("boot", hostname, reboots))


# --------------------------------------------------------------------------- whole-host operations

def new_state(hostname: str, gpus: Sequence[Tuple[str, int]],
              overrides: Optional[Dict[int, Dict[str, str]]] = None,
              services: Optional[Dict[str, str]] = None,
              enabled: Optional[Sequence[str]] = None) -> HostState:
    """Build (without writing) a host: MIG off, no processes, deterministic ids.

    ``overrides`` maps a host-wide GPU index to ``{"uuid": ..., "pci_bus_id": ...}``; when absent,
    a model's ``reference_hosts[hostname]`` entries apply (this is how the host "h200-ref" carries
    the identifiers of the real H200 capture). ``services`` maps unit name -> "active"/"inactive"
    (default: DEFAULT_SERVICES, all active); active units are enabled, plus those in ``enabled``
    (e.g. the oneshot "nvidia-mig-manager", inactive but enabled: see shims.boot_services).
    """
    gpu_list: List[Gpu] = []
    driver_version = ""
    index = 0
    per_model_position: Dict[str, int] = {}
    for model_key, count in gpus:
        spec = load_model(model_key)
        driver_version = driver_version or spec.driver_version
        for _number in range(count):
            position = per_model_position.get(model_key, 0)
            per_model_position[model_key] = position + 1
            reference = spec.reference_hosts.get(hostname, [])
            chosen: Dict[str, str] = dict(reference[position]) if position < len(reference) else {}
            chosen.update((overrides or {}).get(index, {}))
            gpu_list.append(Gpu(
                index=index, model=model_key, name=spec.name,
                uuid=chosen.get("uuid", gpu_uuid(hostname, index)),
                pci_bus_id=chosen.get("pci_bus_id", pci_bus_id(index)),
                pci_device_id=spec.pci_device_id, memory_total_mib=spec.memory_total_mib,
                mig_current=False if spec.mig_capable else None,
                mig_pending=False if spec.mig_capable else None,
                pci_sub_device_id=spec.pci_sub_device_id, vbios_version=spec.vbios_version,
                compute_cap=spec.compute_cap, architecture=spec.architecture,
            ))
            index += 1
    service_map = dict(services) if services is not None else {name: "active" for name in DEFAULT_SERVICES}
    for name in enabled or ():
        service_map.setdefault(name, "inactive")
    state = HostState(
        hostname=hostname, boot_id=_boot_id(hostname, 0), reboots=0, driver_version=driver_version,
        gpus=gpu_list, services=service_map,
        services_enabled={name: status == "active" or name in (enabled or ()) for name, status in service_map.items()},
    )
    state.record("gpustate", "create", gpus=[[key, count] for key, count in gpus])
    return state


def boot_id_path(path: str) -> str:
    """Side file holding the current boot id (what /proc/sys/kernel/random/boot_id shows on a
    real host; Ansible's reboot module compares it). Rewritten in place so a bind mount of the
    file keeps seeing updates."""
    return path + ".boot_id"


def _write_boot_id(path: str, boot_id: str) -> None:
    with open(boot_id_path(path), "a+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.truncate()
        handle.write(boot_id + "\n")


def create(path: str, hostname: str, gpus: Sequence[Tuple[str, int]],
           overrides: Optional[Dict[int, Dict[str, str]]] = None,
           services: Optional[Dict[str, str]] = None,
           enabled: Optional[Sequence[str]] = None) -> HostState:
    """Write a new host state file (replacing any previous one) and return it (see new_state)."""
    state = new_state(hostname, gpus, overrides=overrides, services=services, enabled=enabled)
    with _flock(path, fcntl.LOCK_EX):
        save(path, state)
        _write_boot_id(path, state.boot_id)
    return state


def apply_reboot(state: HostState, actor: str = "reboot") -> None:
    """In-memory reboot: processes and MIG instances are gone (docs/reference/specs.md §4.1: never persistent);
    Ampere applies a pending mode (InfoROM bit); Hopper+ loses MIG mode entirely."""
    state.gpu_client_pods = []
    for gpu in state.gpus:
        gpu.processes = []
        gpu.gpu_instances = []
        if not gpu.mig_capable:
            continue
        if load_model(gpu.model).resets_on_mig_change:
            gpu.mig_current = gpu.mig_pending
        else:
            gpu.mig_current = False
            gpu.mig_pending = False
    state.reboots += 1
    state.boot_id = _boot_id(state.hostname, state.reboots)
    state.powered_on = True
    state.services = {
        name: ("active" if state.services_enabled.get(name, False) else "inactive") for name in state.services
    }
    state.record(actor, "reboot", reboots=state.reboots)


def reboot(path: str, actor: str = "reboot") -> HostState:
    with locked(path) as state:
        apply_reboot(state, actor)
    _write_boot_id(path, state.boot_id)
    return state


def power_off(path: str, actor: str = "shutdown") -> HostState:
    """`shutdown -h`: the host is down until something (the lab) powers it on with reboot()."""
    with locked(path) as state:
        state.gpu_client_pods = []
        for gpu in state.gpus:
            gpu.processes = []
            gpu.gpu_instances = []
        state.powered_on = False
        state.services = {name: "inactive" for name in state.services}
        state.record(actor, "power-off")
    return state


# --------------------------------------------------------------------------- simulated processes

def _find_mig_device(gpu: Gpu, gi_id: Optional[int], ci_id: Optional[int]) -> Optional[GpuInstance]:
    if gi_id is None or ci_id is None:
        return None
    gi = gpu.gpu_instance(gi_id)
    if gi is None or not any(ci.ci_id == ci_id for ci in gi.compute_instances):
        raise StateError(f"GPU {gpu.index}: no MIG device with GI {gi_id} / CI {ci_id}")
    return gi


def add_process_to_state(state: HostState, gpu_index: int, pid: Optional[int], name: str, used_mib: int,
                         gi_id: Optional[int] = None, ci_id: Optional[int] = None) -> int:
    gpu = state.gpu(gpu_index)
    if not state.powered_on:
        raise StateError(f"{state.hostname} is powered off")
    if used_mib < 0:
        raise StateError("used_mib must be >= 0")
    if gpu.mig_current:
        if gi_id is None or ci_id is None:
            raise StateError(f"GPU {gpu_index} is in MIG mode: a process must run on a MIG device (gi_id, ci_id)")
        _find_mig_device(gpu, gi_id, ci_id)
    elif gi_id is not None or ci_id is not None:
        raise StateError(f"GPU {gpu_index} is not in MIG mode: gi_id/ci_id must be None")
    if gpu.memory_total_mib and sum(p.used_mib for p in gpu.processes) + used_mib > gpu.memory_total_mib:
        raise StateError(f"GPU {gpu_index}: not enough free memory for {used_mib} MiB")
    if pid is None:
        pid = state.next_pid
    if any(proc.pid == pid for _gpu, proc in state.all_processes()):
        raise StateError(f"PID {pid} already runs on {state.hostname}")
    state.next_pid = max(state.next_pid, pid + 1)
    gpu.processes.append(Process(pid=pid, name=name, used_mib=used_mib, gi_id=gi_id, ci_id=ci_id))
    state.record("workload", "process-start", gpu=gpu_index, pid=pid, name=name, used_mib=used_mib,
                 gi_id=gi_id, ci_id=ci_id)
    return pid


def add_process(path: str, gpu_index: int, pid: Optional[int], name: str, used_mib: int,
                gi_id: Optional[int] = None, ci_id: Optional[int] = None) -> int:
    """Record a (fake) compute process on a GPU or MIG device; returns its PID (allocated if None)."""
    with locked(path) as state:
        return add_process_to_state(state, gpu_index, pid, name, used_mib, gi_id, ci_id)


def remove_process(path: str, pid: int) -> bool:
    """Forget a simulated process; False (and no change) when no such PID runs."""
    with locked(path) as state:
        for gpu in state.gpus:
            for proc in gpu.processes:
                if proc.pid == pid:
                    gpu.processes.remove(proc)
                    state.record("workload", "process-stop", gpu=gpu.index, pid=pid)
                    return True
    return False


def attach_client(path: str, client: str) -> None:
    """A non-compute client (a pod holding the device files) opens every GPU of the host."""
    with locked(path) as state:
        if not state.powered_on:
            raise StateError(f"{state.hostname} is powered off")
        if client not in state.gpu_client_pods:
            state.gpu_client_pods.append(client)
            state.record("kubelet", "client-attach", client=client)


def detach_client(path: str, client: str) -> bool:
    """The client closed the device files; False (and no change) when it was not attached."""
    with locked(path) as state:
        if client not in state.gpu_client_pods:
            return False
        state.gpu_client_pods.remove(client)
        state.record("kubelet", "client-detach", client=client)
        return True

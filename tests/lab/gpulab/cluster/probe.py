"""The lab kubelet runs the collection's sharing probe for real (issue 15).

A container whose command runs ``gpufleet_probe.py`` from a mounted ConfigMap gets that program
read from the store and run as a real process (``--backend lab-cpu``): pure Python on this
machine's CPU, labelled "lab CPU backend" in its JSON line. Probes started at the same moment run
at the same time, so they contend for the CPU as sharers contend for a GPU. The program refuses
that backend on a host with an NVIDIA driver; the lab never offers it to anything but the probe.

What the lab models and hands to the program through its environment (docs/sharing.md; modelling
choices, README.md): the device it was allocated (the ``nvidia-smi -L`` lines, the model's name),
the device memory (the GPU's, or the MIG profile's) and the memory one sharer can allocate: all of
it with time-slicing, 1/replicas with MPS (the MPS daemon's per-client limit, specs.md §9.6), the
slice's with MIG. A container that was allocated no device gets "no GPU" from the program.

MPS caps every client, a lone one too (issue 25): NVIDIA's control daemon sets the default active
thread percentage to 100 / replicas and the pinned device memory limit to memory / replicas for
every client (k8s-device-plugin v0.20.0, ``cmd/mps-control-daemon/mps/daemon.go``: ``Start``,
``activeThreadPercentage``, ``perDevicePinnedDeviceMemoryLimits``; the same since v0.17.0), and a
client can only lower them (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). The daemon also puts the GPU in
EXCLUSIVE_PROCESS compute mode, so no pod gets round the cap. The lab hands that percentage to the
program (GPUFLEET_PROBE_LAB_THREAD_PERCENTAGE): its CPU backend then computes for that share of the
time only, so a probe pod alone under MPS gets about 1/replicas of what an unshared device gives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

from gpulab.cluster import devices as devmod
from gpulab.cluster.containers import Outcome, container_command
from gpulab.cluster.objects import Obj
from gpulab.models import available_models, load_model

PROGRAM = "gpufleet_probe.py"


def probe_script(pod: Obj, container: Obj) -> Optional[str]:
    """The ConfigMap key the container runs (path of the mounted program), or None."""
    words = container_command(container)
    script = next((w for w in words if w.endswith("/" + PROGRAM)), None)
    if script is None:
        return None
    mounts = {m.get("mountPath", "").rstrip("/"): m.get("name") for m in container.get("volumeMounts") or []}
    if mounts.get(os.path.dirname(script)) is None:
        return None
    del pod
    return script


def _model(gpu_name: str) -> Any:
    for key in available_models():
        spec = load_model(key)
        if spec.name == gpu_name:
            return spec
    return None


def device_memory_mib(device: devmod.Device) -> int:
    """The memory of the device: the MIG profile's, else the whole GPU's (the model's)."""
    spec = _model(device.gpu_name)
    if spec is None:
        return 1024
    if device.mig_profile:
        profile = spec.profile(device.mig_profile)
        if profile is not None:
            return int(float(profile.memory_gib) * 1024)
    return int(spec.memory_total_mib)


def lab_environment(allocated: List[devmod.Device], node: Optional[Obj]) -> Dict[str, str]:
    """What the probe sees of its device in the lab (see the module docstring)."""
    env = {"GPUFLEET_PROBE_LAB": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if not allocated:
        env["GPUFLEET_PROBE_LAB_NO_GPU"] = "1"
        return env
    device = allocated[0]
    total = device_memory_mib(device)
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    base = device.resource[: -len(".shared")] if device.resource.endswith(".shared") else device.resource
    limit = total
    if device.replica is not None and labels.get(base + ".sharing-strategy") == "mps":
        replicas = max(1, int(labels.get(base + ".replicas", "1") or 1))
        limit = total // replicas
        env["GPUFLEET_PROBE_LAB_THREAD_PERCENTAGE"] = str(100 // replicas)
    env.update(GPUFLEET_PROBE_LAB_MEMORY_MIB=str(total), GPUFLEET_PROBE_LAB_LIMIT_MIB=str(limit),
               GPUFLEET_PROBE_LAB_DEVICE=device.gpu_name,
               GPUFLEET_PROBE_LAB_SMI=" | ".join(line.strip() for line in devmod.render_smi_list(allocated).splitlines()))
    return env


class ProbeProgram:
    """Runs the probe from its ConfigMap as a real process; ``check`` reports when it exited."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.running: Dict[str, subprocess.Popen] = {}
        self.scripts: Dict[str, str] = {}
        self.workdir: Optional[str] = None  # made at the first probe, removed by shutdown()

    def handles(self, pod: Obj, container: Obj) -> bool:
        return probe_script(pod, container) is not None

    def _source(self, pod: Obj, container: Obj, script: str) -> Optional[str]:
        mount = next(m for m in container.get("volumeMounts") or [] if m.get("mountPath", "").rstrip("/") == os.path.dirname(script))
        volume = next((v for v in pod["spec"].get("volumes") or [] if v.get("name") == mount.get("name")), {})
        name = (volume.get("configMap") or {}).get("name")
        configmap = self.store.get("v1/configmaps", pod["metadata"]["namespace"], name) if name else None
        return ((configmap or {}).get("data") or {}).get(os.path.basename(script))

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        script = probe_script(pod, container) or ""
        try:
            source = self._source(pod, container, script)
        except Exception:  # pylint: disable=broad-except
            source = None
        if source is None:
            return Outcome(ok=False, exit_code=1, message="MountVolume.SetUp failed: configmap for %s not found" % script)
        self.workdir = self.workdir or tempfile.mkdtemp(prefix="gpulab-probe-")
        path = os.path.join(self.workdir, "%s-%s" % (pod["metadata"]["uid"], PROGRAM))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        self.scripts[pod["metadata"]["uid"]] = path
        words = container_command(container)
        args = words[words.index(script) + 1:] + ["--backend", "lab-cpu"]
        node = self.store.get("v1/nodes", None, pod["spec"]["nodeName"])
        self.running[pod["metadata"]["uid"]] = subprocess.Popen(  # noqa: S603 (the lab runs the probe for real)
            [sys.executable, "-I", path] + args, env=lab_environment(allocated, node), cwd=self.workdir,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return Outcome(ok=True, runtime=None)

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del container
        process = self.running.get(pod["metadata"]["uid"])
        if process is None or process.poll() is None:
            return None
        output = process.stdout.read() if process.stdout else ""
        self._forget(pod["metadata"]["uid"])
        return Outcome(ok=True, log=output, exit_code=process.returncode, runtime=0.0)

    def stop(self, pod: Obj) -> None:
        process = self.running.get(pod["metadata"]["uid"])
        if process is not None and process.poll() is None:
            process.kill()  # the process this program started for this pod, by its handle
            process.wait(timeout=10)
        self._forget(pod["metadata"]["uid"])

    def _forget(self, uid: str) -> None:
        process = self.running.pop(uid, None)
        if process is not None and process.stdout and process.poll() is not None and not process.stdout.closed:
            process.stdout.close()
        path = self.scripts.pop(uid, None)
        if path and os.path.exists(path):
            os.unlink(path)

    def shutdown(self) -> None:
        """Stop every probe process still running (the lab is going down) and remove the work directory."""
        for uid, process in list(self.running.items()):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            self._forget(uid)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


__all__ = ["ProbeProgram", "device_memory_mib", "lab_environment", "probe_script"]

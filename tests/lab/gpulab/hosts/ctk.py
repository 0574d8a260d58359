"""``nvidia-ctk`` of a lab host: the two commands NVIDIA's MIG manager runs after a MIG change
(docs/reference/specs.md §7.7), writing only into the host's own directory.

    nvidia-ctk system create-device-nodes --control-devices [--dev-root=DIR]
    nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com --class=gpu --output=PATH
    nvidia-ctk --version

``cdi generate`` in management mode lists, as one device ``all``, every NVIDIA device node that
exists when it runs, the MIG capability nodes ``/dev/nvidia-caps/nvidia-cap<minor>`` of the GPU and
compute instances included; a spec generated before a MIG change therefore names the old
instances until it is generated again. ``--output=/var/run/cdi/X`` is written to
``DIR/hosts/NAME/var/run/cdi/X`` (never the machine's /var/run), as the host's own /etc is
``DIR/hosts/NAME/etc``. Without ``--output`` the spec goes to stdout, as the real tool does.
Modelling choice: the capability minors follow the numbering of ``/proc/driver/nvidia-caps/mig-minors``
(config 1, monitor 2, then per GPU 15 GPU instances of 9 minors: the GI's access node and 8 CIs).
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence

import yaml

from gpulab import gpustate

VERSION = "1.18.1"
MANAGEMENT_KIND = "management.nvidia.com/gpu"
MANAGEMENT_SPEC = "/var/run/cdi/management.nvidia.com-gpu.yaml"
_MINORS_PER_GI = 9
_GIS_PER_GPU = 15
_GENERATE_FLAGS = ("mode", "vendor", "cdi-vendor", "class", "cdi-class", "output", "format", "device-name-strategy",
                   "driver-root", "dev-root", "nvidia-cdi-hook-path", "nvidia-ctk-path", "ldconfig-path", "library-search-path")


def host_path(state_file: str, path: str) -> str:
    """Where the host's ``path`` is kept: under the host's own directory (``..`` cannot leave it)."""
    return os.path.join(os.path.dirname(os.path.abspath(state_file)), os.path.normpath("/" + path).lstrip("/"))


def device_nodes(state: gpustate.HostState) -> List[str]:
    """The NVIDIA device nodes of the host now (what management mode discovers)."""
    nodes = ["/dev/nvidiactl", "/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    nodes += ["/dev/nvidia%d" % gpu.index for gpu in state.gpus]
    caps: List[int] = []
    for gpu in state.gpus:
        if not gpu.mig_current:
            continue
        for gi in gpu.gpu_instances:
            base = 3 + gpu.index * _GIS_PER_GPU * _MINORS_PER_GI + gi.gi_id * _MINORS_PER_GI
            caps.append(base)
            caps += [base + 1 + ci.ci_id for ci in gi.compute_instances]
    if caps:
        caps = [1, 2] + caps
    return nodes + ["/dev/nvidia-caps/nvidia-cap%d" % minor for minor in caps]


def management_spec(state: gpustate.HostState, vendor: str = "management.nvidia.com", cdi_class: str = "gpu") -> Dict:
    return {"cdiVersion": "0.5.0", "kind": "%s/%s" % (vendor, cdi_class),
            "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"path": p} for p in device_nodes(state)]}}],
            "containerEdits": {}}


def write_spec(state_file: str, output: str = MANAGEMENT_SPEC, vendor: str = "management.nvidia.com",
               cdi_class: str = "gpu") -> str:
    """Generate the spec from the host's GPU state now and write it; returns the file written."""
    target = host_path(state_file, output)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    text = yaml.safe_dump(management_spec(gpustate.load(state_file), vendor, cdi_class), sort_keys=False)
    tmp = "%s.%d.tmp" % (target, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, target)
    return target


def read_spec(state_file: str, output: str = MANAGEMENT_SPEC) -> Optional[Dict]:
    try:
        with open(host_path(state_file, output), encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except FileNotFoundError:
        return None


def spec_device_nodes(spec: Optional[Dict]) -> List[str]:
    devices = (spec or {}).get("devices") or [{}]
    return [entry["path"] for entry in (devices[0].get("containerEdits") or {}).get("deviceNodes") or []]


def _flags(args: Sequence[str], known: Sequence[str]) -> Optional[Dict[str, str]]:
    """``--name=value`` / ``--name value`` / ``--bool``; None (after the CLI's message) on an unknown flag."""
    found: Dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in known:
            sys.stderr.write("Incorrect Usage: flag provided but not defined: -%s\n" % name)
            return None
        if not eq and name not in ("control-devices",):
            value = rest.pop(0) if rest else ""
        found[name] = value
    return found


def main(argv: Sequence[str], state_file: str) -> int:
    args = list(argv)
    if args[:1] in (["--version"], ["-v"]):
        sys.stdout.write("NVIDIA Container Toolkit CLI version %s\n" % VERSION)
        return 0
    if args[:2] == ["system", "create-device-nodes"]:
        flags = _flags(args[2:], ("control-devices", "dev-root", "driver-root", "load-kernel-modules", "dry-run"))
        if flags is None:
            return 1
        with gpustate.locked(state_file) as state:
            state.record("nvidia-ctk", "create-device-nodes", control_devices="control-devices" in flags)
        return 0
    if args[:2] == ["cdi", "generate"]:
        return _generate(args[2:], state_file)
    sys.stderr.write("nvidia-ctk (gpulab): only 'cdi generate', 'system create-device-nodes' and --version "
                     "are simulated; got: %s\n" % " ".join(args))
    return 1


def _generate(args: Sequence[str], state_file: str) -> int:
    flags = _flags(args, _GENERATE_FLAGS)
    if flags is None:
        return 1
    if flags.get("mode", "auto") != "management":
        sys.stderr.write("nvidia-ctk (gpulab): only --mode=management is simulated\n")
        return 1
    vendor = flags.get("vendor") or flags.get("cdi-vendor") or "nvidia.com"
    cdi_class = flags.get("class") or flags.get("cdi-class") or "gpu"
    if not flags.get("output"):
        sys.stdout.write(yaml.safe_dump(management_spec(gpustate.load(state_file), vendor, cdi_class), sort_keys=False))
        return 0
    write_spec(state_file, flags["output"], vendor, cdi_class)
    with gpustate.locked(state_file) as state:
        state.record("nvidia-ctk", "cdi-generate", output=flags["output"], kind="%s/%s" % (vendor, cdi_class),
                     device_nodes=len(device_nodes(state)))
    sys.stderr.write('level=info msg="Generated CDI spec with version 0.5.0"\n')
    return 0

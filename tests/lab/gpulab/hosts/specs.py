"""What a lab is asked to start: host specs (``NAME=MODEL:GPUS[@group[,group]]``) and their checks."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Sequence, Set, Tuple

from gpulab.models import available_models

GROUP = "lab_gpu_hosts"
MAX_HOSTS = 253  # 127.0.0.2 ... 127.0.0.254
MAX_GPUS = 16

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_GROUP_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_HOST_SPEC = re.compile(r"^(?P<name>[^=]+)=(?P<model>[^:]+):(?P<gpus>[^@]+)(?:@(?P<groups>.+))?$")


class LabError(Exception):
    """The lab could not do what was asked; the message says what and where."""


@dataclasses.dataclass(frozen=True)
class HostSpec:
    name: str
    model: str
    gpus: int
    groups: Tuple[str, ...] = ()


@dataclasses.dataclass
class Host:
    """A host spec placed in a lab: its address, port and files."""

    spec: HostSpec
    address: str
    port: int
    state_file: str
    host_dir: str

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.spec.name, "model": self.spec.model, "gpus": self.spec.gpus,
                "groups": list(self.spec.groups), "address": self.address, "port": self.port,
                "state_file": self.state_file, "host_dir": self.host_dir}


def parse_host_spec(text: str) -> HostSpec:
    """``NAME=MODEL:GPUS[@group[,group...]]``, e.g. ``gpu-a=H100-80GB:8@h100_training``."""
    match = _HOST_SPEC.match(text.strip())
    if not match:
        raise LabError(f"--host {text!r}: expected NAME=MODEL:GPUS[@group[,group]], e.g. gpu-a=H100-80GB:8")
    name, model, gpus_text = match.group("name"), match.group("model"), match.group("gpus")
    if not _NAME.match(name):
        raise LabError(f"--host {text!r}: host name {name!r} must be lower-case letters, digits and '-' "
                       "(a DNS label, as Kubernetes node names are)")
    models = available_models()
    if model not in models:
        raise LabError(f"--host {text!r}: unknown GPU model {model!r}; known: {', '.join(models)}")
    if not gpus_text.isdigit() or not 1 <= int(gpus_text) <= MAX_GPUS:
        raise LabError(f"--host {text!r}: GPU count {gpus_text!r} must be an integer from 1 to {MAX_GPUS}")
    groups = tuple(g for g in (match.group("groups") or "").split(",") if g)
    for group in groups:
        if not _GROUP_NAME.match(group) or group == GROUP:
            raise LabError(f"--host {text!r}: group {group!r} must match [a-z_][a-z0-9_]* "
                           f"(and every host is already in {GROUP})")
    return HostSpec(name=name, model=model, gpus=int(gpus_text), groups=groups)


def validate_specs(specs: Sequence[HostSpec]) -> None:
    if not specs:
        raise LabError("no hosts: give at least one --host NAME=MODEL:GPUS")
    if len(specs) > MAX_HOSTS:
        raise LabError(f"{len(specs)} hosts: the lab has addresses for at most {MAX_HOSTS}")
    seen: Set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise LabError(f"host {spec.name!r} is given twice")
        seen.add(spec.name)
    groups = {g for spec in specs for g in spec.groups}
    clash = groups & seen
    if clash:
        raise LabError(f"group names equal to host names confuse Ansible: {', '.join(sorted(clash))}")


def host_address(first: str, offset: int) -> str:
    """The loopback address of the host at ``offset`` (hosts get consecutive addresses from ``first``)."""
    parts = [int(p) for p in first.split(".")]
    if len(parts) != 4 or parts[0] != 127:
        raise LabError(f"--first-address {first}: lab hosts use loopback addresses only (127.x.y.z)")
    value = (parts[1] << 16 | parts[2] << 8 | parts[3]) + offset
    if value > 0xFFFFFE:
        raise LabError(f"--first-address {first}: not enough loopback addresses")
    return f"127.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"

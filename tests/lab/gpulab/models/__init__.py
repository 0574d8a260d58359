"""GPU model fixtures of the lab: parsed from driver output text, never from the collection.

Each ``models/<KEY>/`` directory holds:

* ``lgip.txt``  -- the body of ``nvidia-smi mig -lgip`` on an idle GPU (all instances free),
* ``lgipp.txt`` -- the body of ``nvidia-smi mig -lgipp``,
* ``model.json`` -- product name, PCI ids, memory, architecture and a few display values.

The lab reads these texts itself (it must not import ``plugins/module_utils``): if the collection's
catalog disagrees with these captures, the lab's behaviour exposes it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

MODELS_DIR = os.path.dirname(os.path.abspath(__file__))

# "|   0  MIG 1g.18gb+me      20     1/1        16.00      No     16     1     0   |"
_LGIP_ROW1 = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)\s+"
    r"(?P<mem>[\d.]+)\s+(?P<p2p>\S+)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s+\|$"
)
# "|                                                               1     1     1   |"
_LGIP_ROW2 = re.compile(r"^\|\s+(?P<ce>\d+)\s+(?P<jpeg>\d+)\s+(?P<ofa>\d+)\s+\|$")
# "GPU  0 Profile ID 20 Placements: {0,1,2,3,4,5,6}:1"
_LGIPP_ROW = re.compile(
    r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<id>\d+)\s+Placements?\s*:\s*\{(?P<starts>[\d,]*)\}:(?P<size>\d+)$"
)
_PROFILE_NAME = re.compile(r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attr>(?:[+-][a-z.]+)*)$")


class ModelError(Exception):
    """A model fixture is missing or malformed."""


@dataclass(frozen=True)
class GiProfile:
    """One GPU-instance profile as the driver reports it (docs/reference/specs.md §1.3, §2, §4.3)."""

    profile_id: int
    name: str  # without the "MIG " prefix, e.g. "1g.18gb+me"
    instances_total: int
    memory_gib: str  # kept as printed ("16.00") so the table re-renders byte for byte
    p2p: str
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int
    starts: Tuple[int, ...]  # allowed placement starts (memory-slice axis), from -lgipp
    size: int  # memory slices occupied, from -lgipp
    compute_slices: int  # the "<G>g" of the name (docs/reference/specs.md §1.2)
    base_memory_gb: int  # the "<GB>gb" of the name

    @property
    def full_name(self) -> str:
        return "MIG " + self.name


@dataclass(frozen=True)
class ModelSpec:
    """Everything the simulated driver needs to know about one GPU model."""

    key: str
    name: str
    pci_device_id: str
    pci_sub_device_id: str
    memory_total_mib: int
    architecture: str  # "ampere" | "hopper" (lower case)
    compute_cap: str
    vbios_version: str
    driver_version: str
    mig_capable: bool
    memory_slices: int
    compute_slices: int
    max_power_w: int
    idle_power_w: int
    idle_temp_c: int
    profiles: Tuple[GiProfile, ...] = ()
    reference_hosts: Dict[str, List[Dict[str, str]]] = field(default_factory=dict)

    @property
    def resets_on_mig_change(self) -> bool:
        """Ampere: the driver resets the GPU to apply a mode change and the mode persists in the
        InfoROM; Hopper+: no reset, and the mode is lost at reboot (docs/reference/specs.md §4.1)."""
        return self.architecture == "ampere"

    def profile(self, token: str) -> Optional[GiProfile]:
        """Resolve a ``-cgi`` token: profile ID ("9"), short ("3g.20gb") or full ("MIG 3g.20gb")."""
        token = token.strip()
        if token.upper().startswith("MIG "):
            token = token[4:].strip()
        if token.isdigit():
            wanted = int(token)
            return next((p for p in self.profiles if p.profile_id == wanted), None)
        return next((p for p in self.profiles if p.name == token), None)


def parse_profile_name(name: str) -> Optional[Tuple[Optional[int], int, int, str]]:
    """``"1c.3g.20gb"`` -> (1, 3, 20, ""); ``"1g.5gb+me"`` -> (None, 1, 5, "+me"); None if invalid."""
    match = _PROFILE_NAME.match(name.strip())
    if not match:
        return None
    c = int(match.group("c")) if match.group("c") else None
    return c, int(match.group("g")), int(match.group("gb")), match.group("attr") or ""


def parse_lgip(text: str) -> List[dict]:
    """Parse the two-line rows of ``nvidia-smi mig -lgip`` (keyed on the MIG token, not widths)."""
    rows: List[dict] = []
    pending: Optional[dict] = None
    for line in text.splitlines():
        line = line.rstrip()
        first = _LGIP_ROW1.match(line)
        if first:
            pending = first.groupdict()
            continue
        second = _LGIP_ROW2.match(line)
        if second and pending is not None:
            pending.update(second.groupdict())
            rows.append(pending)
            pending = None
    return rows


def parse_lgipp(text: str) -> Dict[int, Tuple[Tuple[int, ...], int]]:
    """Parse ``nvidia-smi mig -lgipp``: profile ID -> (starts, size)."""
    result: Dict[int, Tuple[Tuple[int, ...], int]] = {}
    for line in text.splitlines():
        match = _LGIPP_ROW.match(line.strip())
        if match:
            starts = tuple(int(s) for s in match.group("starts").split(",") if s != "")
            result[int(match.group("id"))] = (starts, int(match.group("size")))
    return result


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def available_models() -> List[str]:
    return sorted(
        entry for entry in os.listdir(MODELS_DIR)
        if os.path.isfile(os.path.join(MODELS_DIR, entry, "model.json"))
    )


@functools.lru_cache(maxsize=None)
def load_model(key: str) -> ModelSpec:
    """Load ``models/<key>/``; raises ModelError naming the missing or malformed piece."""
    directory = os.path.join(MODELS_DIR, key)
    meta_path = os.path.join(directory, "model.json")
    if not os.path.isfile(meta_path):
        raise ModelError(f"unknown GPU model {key!r} (known: {', '.join(available_models())})")
    meta = json.loads(_read(meta_path))
    mig_capable = bool(meta.get("mig_capable", True))
    profiles: List[GiProfile] = []
    if mig_capable:
        rows = parse_lgip(_read(os.path.join(directory, "lgip.txt")))
        placements = parse_lgipp(_read(os.path.join(directory, "lgipp.txt")))
        if not rows:
            raise ModelError(f"{key}/lgip.txt: no profile rows found")
        for row in rows:
            profile_id = int(row["id"])
            if profile_id not in placements:
                raise ModelError(f"{key}/lgipp.txt: no placements for profile ID {profile_id}")
            parsed = parse_profile_name(row["name"])
            if parsed is None:
                raise ModelError(f"{key}/lgip.txt: bad profile name {row['name']!r}")
            starts, size = placements[profile_id]
            profiles.append(GiProfile(
                profile_id=profile_id, name=row["name"], instances_total=int(row["total"]),
                memory_gib=row["mem"], p2p=row["p2p"], sm=int(row["sm"]), dec=int(row["dec"]),
                enc=int(row["enc"]), ce=int(row["ce"]), jpeg=int(row["jpeg"]), ofa=int(row["ofa"]),
                starts=starts, size=size, compute_slices=parsed[1], base_memory_gb=parsed[2],
            ))
    try:
        return ModelSpec(
            key=key, name=meta["name"], pci_device_id=meta["pci_device_id"],
            pci_sub_device_id=meta["pci_sub_device_id"], memory_total_mib=int(meta["memory_total_mib"]),
            architecture=meta["architecture"].lower(), compute_cap=meta["compute_cap"],
            vbios_version=meta["vbios_version"], driver_version=meta["driver_version"],
            mig_capable=mig_capable, memory_slices=int(meta.get("memory_slices", 0)),
            compute_slices=int(meta.get("compute_slices", 0)), max_power_w=int(meta["max_power_w"]),
            idle_power_w=int(meta["idle_power_w"]), idle_temp_c=int(meta["idle_temp_c"]),
            profiles=tuple(profiles), reference_hosts=meta.get("reference_hosts", {}),
        )
    except KeyError as missing:
        raise ModelError(f"{key}/model.json: missing field {missing}") from None

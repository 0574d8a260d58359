"""``export``: the current MIG configuration as a v1 config (docs/reference/specs.md §6.2)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from gpulab import gpustate
from gpulab.migparted.plan import current_devices
from gpulab.models import parse_profile_name


def export_config(state_path: str, label: str = "current") -> Dict[str, Any]:
    """The current configuration as a v1 config (docs/reference/specs.md §6.2 ``export``)."""
    state = gpustate.load(state_path)
    per_gpu: List[Tuple[int, bool, Dict[str, int]]] = []
    for gpu in state.gpus:
        if not gpu.mig_capable:
            continue
        enabled = bool(gpu.mig_current)
        devices = current_devices(gpu) if enabled else {}
        per_gpu.append((gpu.index, enabled, devices))
    groups: List[Tuple[bool, Dict[str, int], List[int]]] = []
    for index, enabled, devices in per_gpu:
        for group in groups:
            if group[0] == enabled and group[1] == devices:
                group[2].append(index)
                break
        else:
            groups.append((enabled, devices, [index]))
    all_capable = len(per_gpu) == len(state.gpus)
    items = []
    for enabled, devices, indexes in groups:
        item: Dict[str, Any] = {"devices": "all" if len(groups) == 1 and all_capable else indexes,
                                "mig-enabled": enabled}
        if enabled:
            item["mig-devices"] = dict(sorted(devices.items(), key=lambda kv: _profile_sort_key(kv[0])))
        items.append(item)
    return {"version": "v1", "mig-configs": {label: items}}


def _profile_sort_key(name: str) -> Tuple[int, int, int, str]:
    parsed = parse_profile_name(name) or (None, 0, 0, "")
    return (parsed[1], parsed[0] or parsed[1], parsed[2], name)


def render_yaml(config: Mapping[str, Any]) -> str:
    lines = [f"version: {config['version']}", "mig-configs:"]
    for label, items in config["mig-configs"].items():
        lines.append(f"  {label}:")
        for item in items:
            devices = item["devices"]
            devices_text = devices if devices == "all" else "[" + ", ".join(str(d) for d in devices) + "]"
            lines.append(f"  - devices: {devices_text}")
            lines.append(f"    mig-enabled: {'true' if item['mig-enabled'] else 'false'}")
            if "mig-devices" in item:
                if item["mig-devices"]:
                    lines.append("    mig-devices:")
                    lines.extend(f"      {name}: {count}" for name, count in item["mig-devices"].items())
                else:
                    lines.append("    mig-devices: {}")
    return "\n".join(lines) + "\n"

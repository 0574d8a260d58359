"""The NVIDIA device plugin's config (docs/reference/specs.md §9.2, §9.5): parsing one named config into a
``SharingConfig`` and selecting which ConfigMap key a node loads. Pure, no I/O.

Like ``devices.py`` an independent model: it must never import the collection's
``plugins/module_utils``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

RESOURCE_DOMAIN = "nvidia.com"
GPU_RESOURCE = "nvidia.com/gpu"
STRATEGIES = ("none", "single", "mixed")

# A MIG profile name ("1g.10gb", "1c.2g.20gb", "1g.10gb+me").
PROFILE_RE = re.compile(r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>[+-][a-z.+-]*)?$")


class PluginConfigError(ValueError):
    """The device-plugin config cannot be loaded: the real plugin exits and its pod crash-loops."""


@dataclasses.dataclass(frozen=True)
class SharedResource:
    name: str  # full resource name, "nvidia.com/mig-1g.10gb"
    replicas: int


@dataclasses.dataclass(frozen=True)
class SharingConfig:
    """A parsed, validated device-plugin config (`version: v1`, docs/reference/specs.md §9.2)."""

    method: str = "none"  # "none" | "time-slicing" | "mps"
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    resources: Tuple[SharedResource, ...] = ()
    flags_mig_strategy: Optional[str] = None
    warnings: Tuple[str, ...] = ()
    # flags.plugin.sharedDevicesAllocationPolicy (docs/reference/specs.md §9.11): which free replica or
    # MIG device the plugin prefers, spread over the GPUs or packed onto the fewest.
    allocation_policy: str = "distributed"

    def replicas_for(self, resource: str) -> int:
        for shared in self.resources:
            if shared.name == resource:
                return shared.replicas
        return 1


NO_SHARING = SharingConfig()


def _bool_field(section: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = section.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PluginConfigError(f"{where}.{key}: expected a boolean, got {value!r}")
    return value


def _resource_full_name(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PluginConfigError(f"{where}.name: a resource name is required")
    name = raw.strip()
    if "/" not in name:
        name = f"{RESOURCE_DOMAIN}/{name}"  # prefix added when omitted (docs/reference/specs.md §9.2)
    domain, _sep, short = name.partition("/")
    if domain != RESOURCE_DOMAIN:
        raise PluginConfigError(f"{where}.name: invalid resource name {raw!r}: only {RESOURCE_DOMAIN}/ resources can be shared")
    if short != "gpu" and not (short.startswith("mig-") and PROFILE_RE.match(short[4:].replace(".me", "+me", 1))):
        raise PluginConfigError(f"{where}.name: invalid resource name {raw!r}: expected 'gpu' or 'mig-<profile>'")
    return name


def _parse_sharing_section(section: Any, method: str) -> Tuple[bool, Optional[bool], Tuple[SharedResource, ...], List[str]]:
    where = f"sharing.{'timeSlicing' if method == 'time-slicing' else 'mps'}"
    if not isinstance(section, Mapping):
        raise PluginConfigError(f"{where}: expected a mapping")
    rename = _bool_field(section, "renameByDefault", False, where)
    fail_gt_one: Optional[bool] = None
    if section.get("failRequestsGreaterThanOne") is not None:
        fail_gt_one = _bool_field(section, "failRequestsGreaterThanOne", False, where)
    resources_raw = section.get("resources")
    if not isinstance(resources_raw, list) or not resources_raw:
        raise PluginConfigError(f"{where}.resources: at least one resource is required")
    warnings: List[str] = []
    seen: Dict[str, int] = {}
    resources: List[SharedResource] = []
    for position, entry in enumerate(resources_raw):
        entry_where = f"{where}.resources[{position}]"
        if not isinstance(entry, Mapping):
            raise PluginConfigError(f"{entry_where}: expected a mapping")
        name = _resource_full_name(entry.get("name"), entry_where)
        replicas = entry.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise PluginConfigError(f"{entry_where}.replicas: expected an integer, got {replicas!r}")
        if replicas < 2:
            raise PluginConfigError(f"{entry_where}: number of replicas must be >= 2 (got {replicas} for {name})")
        if name in seen:
            raise PluginConfigError(f"{entry_where}: resource {name} is listed twice")
        seen[name] = replicas
        if entry.get("devices") not in (None, "all"):
            # Parsed but not honoured by the real plugin (docs/reference/specs.md §9.2).
            warnings.append("Customizing the 'devices' field is not yet supported in the config. Ignoring...")
        if method == "mps" and name != GPU_RESOURCE:
            raise PluginConfigError(f"{entry_where}: sharing MIG devices with MPS is not supported ({name})")
        resources.append(SharedResource(name=name, replicas=replicas))
    return rename, fail_gt_one, tuple(resources), warnings


def _allocation_policy(flags: Mapping[str, Any]) -> str:
    plugin = flags.get("plugin") or {}
    policy = plugin.get("sharedDevicesAllocationPolicy") if isinstance(plugin, Mapping) else None
    if policy in (None, ""):
        return "distributed"
    if policy not in ("distributed", "packed"):
        raise PluginConfigError(f"flags.plugin.sharedDevicesAllocationPolicy: unknown allocation policy: {policy}")
    return str(policy)


def parse_plugin_config(text: str) -> SharingConfig:
    """Parse and validate one named device-plugin config (a ConfigMap value). Raises PluginConfigError.

    Unknown keys are ignored, as the real plugin's JSON decoding does; a typo therefore silently
    means "no sharing", which the collection's verification has to catch.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PluginConfigError(f"unable to parse config file: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise PluginConfigError("unable to parse config file: expected a mapping at the top level")
    version = doc.get("version")
    if version is None:
        raise PluginConfigError("unable to parse config file: missing version field")
    if version != "v1":
        raise PluginConfigError(f"unable to parse config file: unknown version: {version}")
    flags = doc.get("flags") or {}
    if not isinstance(flags, Mapping):
        raise PluginConfigError("flags: expected a mapping")
    flags_strategy = flags.get("migStrategy")
    if flags_strategy is not None and flags_strategy not in STRATEGIES:
        raise PluginConfigError(f"flags.migStrategy: unknown MIG strategy: {flags_strategy}")
    policy = _allocation_policy(flags)
    sharing = doc.get("sharing") or {}
    if not isinstance(sharing, Mapping):
        raise PluginConfigError("sharing: expected a mapping")
    time_slicing = sharing.get("timeSlicing")
    mps = sharing.get("mps")
    has_ts = isinstance(time_slicing, Mapping) and bool(time_slicing.get("resources"))
    has_mps = isinstance(mps, Mapping) and bool(mps.get("resources"))
    if has_ts and has_mps:
        raise PluginConfigError("sharing: timeSlicing and mps are mutually exclusive")
    if mps is not None and not has_ts:
        rename, fail_gt_one, resources, warnings = _parse_sharing_section(mps, "mps")
        # MPS refuses requests > 1 unless told otherwise (docs/reference/specs.md §9.2).
        return SharingConfig("mps", rename, True if fail_gt_one is None else fail_gt_one, resources, flags_strategy,
                             tuple(warnings), policy)
    if time_slicing is not None:
        rename, fail_gt_one, resources, warnings = _parse_sharing_section(time_slicing, "time-slicing")
        return SharingConfig("time-slicing", rename, bool(fail_gt_one), resources, flags_strategy, tuple(warnings), policy)
    return SharingConfig(flags_mig_strategy=flags_strategy, allocation_policy=policy)


@dataclasses.dataclass(frozen=True)
class ConfigChoice:
    """Which named config the plugin on a node loads (docs/reference/specs.md §9.5)."""

    name: Optional[str]  # None: no config (plain plugin, no sharing)
    text: Optional[str]
    error: Optional[str] = None  # the pod cannot start (ConfigMap missing, no usable default)
    skipped: bool = False  # label names an unknown key: keep whatever was loaded before


def select_plugin_config(
    configmap_name: Optional[str],
    configmap_data: Optional[Mapping[str, str]],
    node_label: Optional[str],
    default_key: Optional[str],
) -> ConfigChoice:
    """Select the named config for a node.

    * no ConfigMap in the ClusterPolicy -> no config;
    * ConfigMap named but absent -> the plugin pod cannot mount it and never starts;
    * node label present and known -> that key; unknown -> skipped (the config-manager logs and keeps
      the current config);
    * no label -> ClusterPolicy `devicePlugin.config.default`; under the operator an omitted default
      means the config is applied to no node until it is labelled (docs/reference/specs.md §9.5).
    """
    if not configmap_name:
        return ConfigChoice(None, None)
    if configmap_data is None:
        return ConfigChoice(None, None, error=f'configmap "{configmap_name}" not found')
    if node_label:
        if node_label in configmap_data:
            return ConfigChoice(node_label, configmap_data[node_label])
        return ConfigChoice(None, None, skipped=True)
    if default_key:
        if default_key in configmap_data:
            return ConfigChoice(default_key, configmap_data[default_key])
        return ConfigChoice(None, None, error=f'unable to select default config "{default_key}": not present in configmap "{configmap_name}"')
    return ConfigChoice(None, None)


__all__ = ["GPU_RESOURCE", "NO_SHARING", "PROFILE_RE", "RESOURCE_DOMAIN", "STRATEGIES", "ConfigChoice",
           "PluginConfigError", "SharedResource", "SharingConfig", "parse_plugin_config",
           "select_plugin_config"]

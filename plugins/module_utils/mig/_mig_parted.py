# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-mig-parted ``version: v1`` configs: parse, validate, select per GPU, compare, render.

Pure logic, no I/O. The schema rules and messages follow mig-parted's v1 spec (docs/reference/specs.md §6.1):
unknown keys are rejected (``unexpected field: ...``), ``devices`` and ``mig-enabled`` are
required, ``mig-devices`` is required when MIG is enabled and must be empty when it is not.
Items of the selected config are walked in order and an item applies to every GPU matched by
both its ``device-filter`` and its ``devices``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._memo import Memo, frozen
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS, GpuModel
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, plan_layout

CONFIG_VERSION = "v1"
ITEM_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")
TOP_LEVEL_FIELDS = ("version", "mig-configs")

_FILTER_PART = re.compile(r"^0x([0-9a-fA-F]{4})([0-9a-fA-F]{4})$")
# GI profiles (``3g.40gb``, ``1g.10gb+me``, ``1g.24gb+me.all``, ``1g.24gb-me``) and CI-on-GI
# profiles (``1c.3g.40gb``), docs/reference/specs.md §1.2.
_PROFILE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.(\d+)gb((?:[+-][a-z]+(?:\.[a-z]+)*)*)$")
# Config names: the MIG manager selects a config by the node label nvidia.com/mig.config, so a
# name must be a Kubernetes label value; the systemd unit gets it as MIG_PARTED_SELECTED_CONFIG
# in a quoted Environment= line (docs/reference/specs.md §6.7).
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
CONFIG_NAME_RULE = ("at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit "
                    "(a Kubernetes label value: the MIG manager selects configs with the node label nvidia.com/mig.config)")


def config_name_problem(name: Any, where: str = "mig-configs") -> Optional[str]:
    """Why ``name`` cannot be a mig-parted config name (None when it can)."""
    if isinstance(name, str) and _CONFIG_NAME.fullmatch(name):
        return None
    return "%s: config name %r is invalid: it must be %s" % (where, name, CONFIG_NAME_RULE)


class MigPartedError(ProblemsError):
    """A mig-parted config is invalid; ``problems`` lists every problem found."""


class DocumentError(ValueError):
    """The document is not even shaped like a v1 config (one message, before any validation)."""


@dataclass(frozen=True)
class DeviceFilter:
    """One ``device-filter`` entry: ``0x<device><vendor>[:0x<subdevice><subvendor>]``."""

    device_id: int
    vendor_id: int
    subsystem_device_id: Optional[int] = None
    subsystem_vendor_id: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "DeviceFilter":
        matches = [_FILTER_PART.match(part) for part in text.strip().split(":")]
        if len(matches) not in (1, 2) or None in matches:
            raise ValueError("invalid device-filter %r: expected 0x<DEVICE><VENDOR>[:0x<SUBDEVICE><SUBVENDOR>]" % text)
        return cls(*(int(group, 16) for match in matches if match is not None for group in match.groups()))

    def matches(self, pci_device_id: Optional[str], pci_sub_device_id: Optional[str] = None) -> bool:
        """Match against nvidia-smi's ``pci.device_id`` (``0x233010DE``) and ``pci.sub_device_id``."""
        own = _split_pci_id(pci_device_id)
        if own is None or own != (self.device_id, self.vendor_id):
            return False
        if self.subsystem_device_id is None:
            return True
        sub = _split_pci_id(pci_sub_device_id)
        return sub == (self.subsystem_device_id, self.subsystem_vendor_id)

    def __str__(self) -> str:
        text = "0x%04X%04X" % (self.device_id, self.vendor_id)
        if self.subsystem_device_id is not None:
            text += ":0x%04X%04X" % (self.subsystem_device_id, self.subsystem_vendor_id)
        return text


def _split_pci_id(value: Optional[str]) -> Optional[Tuple[int, int]]:
    if not value:
        return None
    match = _FILTER_PART.match(str(value).strip())
    if not match:
        return None
    return int(match.group(1), 16), int(match.group(2), 16)


@dataclass(frozen=True)
class MigConfigItem:
    """One item of a named config."""

    devices: Any  # "all" or a tuple of GPU indexes
    mig_enabled: bool
    mig_devices: Tuple[Tuple[str, int], ...] = ()
    device_filters: Tuple[DeviceFilter, ...] = ()

    def matches(self, gpu: Mapping[str, Any]) -> bool:
        if self.device_filters and not any(
            flt.matches(gpu.get("pci_device_id"), gpu.get("pci_sub_device_id")) for flt in self.device_filters
        ):
            return False
        return self.devices == "all" or int(gpu["index"]) in self.devices

    def layout(self) -> Dict[str, int]:
        return {profile: count for profile, count in self.mig_devices if count > 0}

    def as_dict(self) -> Dict[str, Any]:
        """The item in mig-parted's own form (keys in mig-parted's order)."""
        result: Dict[str, Any] = {}
        if self.device_filters:
            filters = [str(flt) for flt in self.device_filters]
            result["device-filter"] = filters[0] if len(filters) == 1 else filters
        result["devices"] = "all" if self.devices == "all" else list(self.devices)
        result["mig-enabled"] = self.mig_enabled
        if self.mig_enabled:
            result["mig-devices"] = dict(self.mig_devices)
        return result


@dataclass(frozen=True)
class MigPartedConfig:
    """A parsed ``version: v1`` file: named configs, each a tuple of items."""

    configs: Tuple[Tuple[str, Tuple[MigConfigItem, ...]], ...]

    @property
    def names(self) -> List[str]:
        return [name for name, _items in self.configs]

    def items(self, name: str) -> Tuple[MigConfigItem, ...]:
        for config_name, items in self.configs:
            if config_name == name:
                return items
        raise KeyError(name)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "version": CONFIG_VERSION,
            "mig-configs": {name: [item.as_dict() for item in items] for name, items in self.configs},
        }


@dataclass(frozen=True)
class DesiredGpu:
    """What the selected config asks of one GPU."""

    index: int
    mig_enabled: bool
    mig_devices: Dict[str, int] = field(default_factory=dict)
    item_positions: Tuple[int, ...] = ()


def parse_profile(profile: str) -> Optional[Tuple[Optional[int], int, int, str]]:
    """``1c.3g.40gb+me`` -> (1, 3, 40, "+me"); None when it is not a MIG profile string."""
    match = _PROFILE.match(profile)
    if not match:
        return None
    compute = int(match.group(1)) if match.group(1) else None
    return compute, int(match.group(2)), int(match.group(3)), match.group(4)


def parse_config(data: Any, source: str = "config") -> MigPartedConfig:
    """Validate a decoded v1 document; raise MigPartedError listing every problem."""
    problems: List[str] = []
    if not isinstance(data, Mapping):
        raise MigPartedError(["%s: expected a mapping with 'version' and 'mig-configs', got %s" % (source, _kind(data))])
    for key in data:
        if key not in TOP_LEVEL_FIELDS:
            problems.append("%s: unexpected field: %s" % (source, key))
    version = data.get("version")
    if version is None:
        problems.append("%s: missing required field: version" % source)
    elif version != CONFIG_VERSION:
        problems.append("%s: unknown version: %s" % (source, version))
    raw_configs = data.get("mig-configs")
    configs: List[Tuple[str, Tuple[MigConfigItem, ...]]] = []
    if raw_configs is None:
        problems.append("%s: missing required field: mig-configs" % source)
    elif not isinstance(raw_configs, Mapping):
        problems.append("%s: mig-configs must be a mapping of config name to a list of items, got %s" % (source, _kind(raw_configs)))
    elif not raw_configs:
        problems.append("%s: mig-configs must contain at least one config" % source)
    else:
        for name, raw_items in raw_configs.items():
            name_problem = config_name_problem(name, "%s: mig-configs" % source)
            if name_problem:
                problems.append(name_problem)
                continue
            items = _parse_items(str(name), raw_items, "%s: mig-configs.%s" % (source, name), problems)
            configs.append((str(name), items))
    if problems:
        raise MigPartedError(problems)
    return MigPartedConfig(configs=tuple(configs))


def parse_named_configs(named: Mapping[str, Any], source: str = "mig_configs") -> MigPartedConfig:
    """Validate a mapping of name -> list of items (the ``mig-configs`` body without ``version``)."""
    return parse_config({"version": CONFIG_VERSION, "mig-configs": dict(named)}, source)


def _parse_items(name: str, raw_items: Any, where: str, problems: List[str]) -> Tuple[MigConfigItem, ...]:
    if not isinstance(raw_items, list):
        problems.append("%s: expected a list of items, got %s" % (where, _kind(raw_items)))
        return ()
    if not raw_items:
        problems.append("%s: a config needs at least one item" % where)
        return ()
    items = []
    for position, raw in enumerate(raw_items):
        item = _parse_item(raw, "%s[%d]" % (where, position), problems)
        if item is not None:
            items.append(item)
    return tuple(items)


def _parse_item(raw: Any, where: str, problems: List[str]) -> Optional[MigConfigItem]:
    if not isinstance(raw, Mapping):
        problems.append("%s: expected a mapping, got %s" % (where, _kind(raw)))
        return None
    before = len(problems)
    for key in raw:
        if key not in ITEM_FIELDS:
            problems.append("%s: unexpected field: %s" % (where, key))

    filters: List[DeviceFilter] = []
    raw_filter = raw.get("device-filter")
    if raw_filter is not None:
        entries = raw_filter if isinstance(raw_filter, list) else [raw_filter]
        for entry in entries:
            if not isinstance(entry, str):
                problems.append("%s: device-filter entries must be strings such as \"0x233010DE\", got %r" % (where, entry))
                continue
            try:
                filters.append(DeviceFilter.parse(entry))
            except ValueError as exc:
                problems.append("%s: %s" % (where, exc))

    devices: Any = None
    if "devices" not in raw:
        problems.append("%s: missing required field: devices" % where)
    else:
        devices = _parse_devices(raw["devices"], where, problems)

    mig_enabled = raw.get("mig-enabled")
    if "mig-enabled" not in raw:
        problems.append("%s: missing required field: mig-enabled" % where)
    elif not isinstance(mig_enabled, bool):
        problems.append("%s: mig-enabled must be true or false, got %r" % (where, mig_enabled))

    mig_devices: Tuple[Tuple[str, int], ...] = ()
    raw_devices = raw.get("mig-devices")
    if mig_enabled is True and "mig-devices" not in raw:
        problems.append("%s: missing required field 'mig-devices' when 'mig-enabled' is true" % where)
    elif mig_enabled is False and raw_devices:
        problems.append("%s: MIG devices included when 'mig-enabled' is false" % where)
    elif raw_devices is not None:
        mig_devices = _parse_mig_devices(raw_devices, where, problems)

    if len(problems) != before:
        return None
    return MigConfigItem(devices=devices, mig_enabled=bool(mig_enabled), mig_devices=mig_devices, device_filters=tuple(filters))


def _parse_devices(raw: Any, where: str, problems: List[str]) -> Any:
    if raw == "all":
        return "all"
    if isinstance(raw, list) and raw and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in raw):
        return tuple(raw)
    problems.append("%s: devices must be \"all\" or a non-empty list of GPU indexes, got %r" % (where, raw))
    return None


def _parse_mig_devices(raw: Any, where: str, problems: List[str]) -> Tuple[Tuple[str, int], ...]:
    if not isinstance(raw, Mapping):
        problems.append("%s: mig-devices must be a mapping of profile to count, got %s" % (where, _kind(raw)))
        return ()
    result = []
    for profile, count in raw.items():
        profile = str(profile)
        if parse_profile(profile) is None:
            problems.append("%s: mig-devices: invalid MIG profile %r (expected e.g. 1g.10gb, 3g.40gb, 1g.10gb+me)" % (where, profile))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            problems.append("%s: mig-devices: count for %s must be a non-negative integer, got %r" % (where, profile, count))
            continue
        result.append((profile, count))
    return tuple(result)


def select_config(config: MigPartedConfig, selected: Optional[str]) -> Tuple[str, Tuple[MigConfigItem, ...]]:
    """Pick the named config; like mig-parted, ``selected`` may be omitted when there is exactly one."""
    if not selected:
        if len(config.configs) == 1:
            return config.configs[0]
        raise MigPartedError(
            ["no config selected and the file holds %d configs; select one of: %s" % (len(config.configs), ", ".join(config.names))]
        )
    try:
        return selected, config.items(selected)
    except KeyError:
        raise MigPartedError(
            ["selected mig-config not present: %s (available: %s)" % (selected, ", ".join(config.names))]
        )


def desired_state(items: Sequence[MigConfigItem], gpus: Sequence[Mapping[str, Any]], config_name: str = "") -> Dict[int, DesiredGpu]:
    """Per GPU index, the state the items ask for. GPUs no item matches are left alone (absent).

    ``gpus`` are gpu_facts entries (``index``, ``pci_device_id``, ``mig.capable``). A GPU that is
    not MIG-capable is skipped by ``devices: all`` and ``mig-enabled: false`` items and is an error
    when an item names it explicitly with ``mig-enabled: true`` (docs/reference/specs.md §6.1). Two matching items
    that ask different things of one GPU are an error: mig-parted would apply both in turn and
    never assert success.
    """
    label = "config %s" % config_name if config_name else "config"
    problems = absent_devices(items, gpus, label)
    result: Dict[int, DesiredGpu] = {}
    for gpu in gpus:
        index = int(gpu["index"])
        capable = bool((gpu.get("mig") or {}).get("capable"))
        for position, item in enumerate(items):
            if not item.matches(gpu):
                continue
            if not capable:
                if item.devices != "all" and item.mig_enabled:
                    problems.append(
                        "%s item %d: GPU %d (%s): cannot set MIG mode on non MIG-capable GPU"
                        % (label, position, index, gpu.get("name", "unknown model"))
                    )
                continue
            wanted = DesiredGpu(index=index, mig_enabled=item.mig_enabled, mig_devices=item.layout() if item.mig_enabled else {})
            previous = result.get(index)
            if previous is not None:
                if (previous.mig_enabled, previous.mig_devices) != (wanted.mig_enabled, wanted.mig_devices):
                    problems.append(
                        "%s: GPU %d is matched by items %s and %d which ask for different layouts"
                        % (label, index, ", ".join(str(p) for p in previous.item_positions), position)
                    )
                    continue
                wanted = DesiredGpu(index, wanted.mig_enabled, wanted.mig_devices, previous.item_positions + (position,))
            else:
                wanted = DesiredGpu(index, wanted.mig_enabled, wanted.mig_devices, (position,))
            result[index] = wanted
    if problems:
        raise MigPartedError(problems)
    return result


def absent_devices(items: Sequence[MigConfigItem], gpus: Sequence[Mapping[str, Any]], label: str) -> List[str]:
    """Items whose ``devices`` list names no GPU index this host has: mig-parted would silently do
    nothing for them (an index missing beside present ones is skipped, as mig-parted does)."""
    present = sorted(int(gpu["index"]) for gpu in gpus)
    problems = []
    for position, item in enumerate(items):
        if item.devices == "all":
            continue
        missing = sorted(set(item.devices) - set(present))
        if missing and len(missing) == len(set(item.devices)):
            problems.append("%s item %d: devices lists GPU %s, but this host has GPU %s" % (
                label, position, ", ".join(str(i) for i in missing), ", ".join(str(i) for i in present) or "none"))
    return problems


def selects_no_gpu_problem(name: str, capable: Sequence[Mapping[str, Any]]) -> str:
    """Why a config that selects none of the host's MIG-capable GPUs is refused (mig-parted would report success)."""
    return ("config %s matches no GPU of this host (its items' devices and device-filters select none of %s); "
            "nvidia-mig-parted would change nothing" % (name, ", ".join(
                "GPU %s %s (%s)" % (g["index"], g.get("name", "?"), g.get("pci_device_id", "?")) for g in capable)))


def read_gpu_problems(content: Optional[Mapping[str, Any]], include_defaults: bool, name: Optional[str],
                      gpus: Sequence[Mapping[str, Any]]) -> List[str]:
    """The selected config against the GPUs a read found (gpu_facts entries with ``index``): items whose
    ``devices`` name no GPU the host has, and a config selecting none of its MIG-capable GPUs, as
    mig_config refuses them on the host. A config that does not parse gives nothing here
    (``plan_named_config`` reports it)."""
    indexed = [gpu for gpu in gpus if isinstance(gpu, Mapping) and isinstance(gpu.get("index"), int)]
    if not indexed:
        return []
    try:
        selected, items = select_config(_parse_document(content, include_defaults), name)
    except (DocumentError, MigPartedError):
        return []
    problems = absent_devices(items, indexed, "config %s" % selected)
    capable = [gpu for gpu in indexed if (gpu.get("mig") or {}).get("capable")]
    if not problems and capable and not any(item.matches(gpu) for gpu in capable for item in items):
        problems.append(selects_no_gpu_problem(selected, capable))
    return problems


def unchecked_indexes(content: Optional[Mapping[str, Any]], include_defaults: bool,
                      name: Optional[str]) -> List[Tuple[str, int, Tuple[int, ...]]]:
    """``(config, item, indexes)`` of the selected config's items that name GPU indexes (not ``all``):
    what only a read of the host can check."""
    try:
        selected, items = select_config(_parse_document(content, include_defaults), name)
    except (DocumentError, MigPartedError):
        return []
    return [(selected, position, tuple(item.devices)) for position, item in enumerate(items) if item.devices != "all"]


def current_layout(gpu: Mapping[str, Any]) -> Dict[str, Any]:
    """The comparable MIG state of one gpu_facts entry."""
    mig = gpu.get("mig") or {}
    devices: Dict[str, int] = {}
    for instance in mig.get("instances") or []:
        profile = instance_profile(instance)
        devices[profile] = devices.get(profile, 0) + 1
    return {
        "index": int(gpu["index"]),
        "uuid": gpu.get("uuid"),
        "name": gpu.get("name"),
        "mig_capable": bool(mig.get("capable")),
        "mig_enabled": bool(mig.get("current")),
        "mig_pending": bool(mig.get("pending")),
        "mig_devices": dict(sorted(devices.items())),
        "mig_profiles": _profiles_list(devices),
    }


def _profiles_list(devices: Mapping[str, int]) -> List[str]:
    return sorted(profile for profile, count in devices.items() for _unused in range(count))


def instance_profile(instance: Mapping[str, Any]) -> str:
    """GI profile, or ``<n>c.<gi profile>`` when the GI holds one smaller compute instance."""
    profile = str(instance.get("profile"))
    cis = instance.get("compute_instances") or []
    if len(cis) == 1:
        ci_profile = str(cis[0].get("profile") or profile)
        if ci_profile != profile and ci_profile.endswith("." + profile):
            return ci_profile
    return profile


def desired_layout(current: Mapping[str, Any], desired: Optional[DesiredGpu]) -> Dict[str, Any]:
    """The after-state of one GPU once ``desired`` is applied (``current`` when untouched)."""
    if desired is None:
        return dict(current)
    after = dict(current)
    after["mig_enabled"] = desired.mig_enabled
    after["mig_pending"] = desired.mig_enabled
    after["mig_devices"] = dict(sorted(desired.mig_devices.items())) if desired.mig_enabled else {}
    after["mig_profiles"] = _profiles_list(after["mig_devices"])
    return after


# ---------------------------------------------------------------------------------------------
# Default named configs (docs/reference/specs.md §6.5), derived from the catalog


# NVIDIA's default config names each ``all-<profile>`` config once for every GPU that has the profile: its
# item asks a fixed count (``devices: all``, no device-filter), which is each model's maximum except here.
# ``all-1g.24gb`` is 4 x 1g.24gb in NVIDIA/mig-parted v0.15.0 deployments/systemd/config-default.yaml (and
# NVIDIA/gpu-operator v26.7.0 assets/state-mig-manager/0400_configmap.yaml), also on a GB200 board that
# prints 1g.24gb, whose maximum is 7. Under NVIDIA's name the collection asks what NVIDIA's file asks
# (docs/reference/specs.md §6.5); tests/unit/plugins/module_utils/test_nvidia_default_mig_config.py checks
# every name and model of the catalog.
NVIDIA_FIXED_COUNTS: Dict[str, int] = {"1g.24gb": 4}


def default_configs(models: Optional[Sequence[GpuModel]] = None) -> Dict[str, List[Dict[str, Any]]]:
    """``all-disabled``, ``all-enabled``, ``all-balanced`` and ``all-<profile>`` for every model.

    ``all-<profile>`` fills the GPU with the profile's maximum count, or with the count NVIDIA's default
    config gives that name (``NVIDIA_FIXED_COUNTS``; ``+me`` becomes ``.me`` in the name, as mig-parted names
    them); models asking for the same ``mig-devices`` share one item
    whose ``device-filter`` lists all their PCI ids.
    """
    models = list(MODELS if models is None else models)
    configs: Dict[str, List[Dict[str, Any]]] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    per_name: Dict[str, List[Tuple[GpuModel, Dict[str, int]]]] = {}
    for model in models:
        for profile in model.profiles:
            count = min(NVIDIA_FIXED_COUNTS.get(profile.name, profile.max_instances), profile.max_instances)
            per_name.setdefault("all-" + profile.name.replace("+", "."), []).append((model, {profile.name: count}))
    configs["all-balanced"] = _filtered_items([(model, dict(model.balanced)) for model in models])
    for name in sorted(per_name, key=_config_sort_key):
        configs[name] = _filtered_items(per_name[name])
    return configs


def _filtered_items(entries: Sequence[Tuple[GpuModel, Dict[str, int]]]) -> List[Dict[str, Any]]:
    groups: List[Tuple[Dict[str, int], List[str]]] = []
    for model, layout in entries:
        for devices, filters in groups:
            if devices == layout:
                filters.extend(model.pci_device_ids)
                break
        else:
            groups.append((layout, list(model.pci_device_ids)))
    return [
        {"device-filter": filters, "devices": "all", "mig-enabled": True, "mig-devices": dict(devices)}
        for devices, filters in groups
    ]


def _config_sort_key(name: str) -> Tuple[int, int, str]:
    parsed = parse_profile(name[len("all-"):].replace(".me", "+me"))
    if parsed is None:
        return (99, 0, name)
    return (parsed[1], parsed[2], name)


def merged_configs(extra: Optional[Mapping[str, Any]] = None, models: Optional[Sequence[GpuModel]] = None) -> Dict[str, Any]:
    """A full v1 document: the defaults plus ``extra`` (extra names win over defaults)."""
    named = default_configs(models)
    for name, items in (extra or {}).items():
        named[str(name)] = items
    return {"version": CONFIG_VERSION, "mig-configs": named}


# The default configs parsed once per process: they depend on the catalog only (a constant), and
# planning a fleet would otherwise parse all of them again for every host.
_PARSED_DEFAULTS: Dict[str, MigPartedConfig] = {}
_PARSED_EXTRA: Memo[MigPartedConfig] = Memo()


def parse_with_defaults(extra: Optional[Mapping[str, Any]], source: str = "mig_configs") -> MigPartedConfig:
    """``parse_config(merged_configs(extra))``, with the defaults parsed only once.

    The result, and every problem reported for ``extra``, are the same as parsing the merged
    document; ``extra`` names replace defaults in place, new names come after them.
    """
    defaults = _PARSED_DEFAULTS.get("catalog")
    if defaults is None:
        defaults = _PARSED_DEFAULTS.setdefault("catalog", parse_config(merged_configs(), "default configs"))
    if extra is not None and not isinstance(extra, Mapping):
        raise MigPartedError(["%s: must be a mapping of config name to a list of items, got %s" % (source, _kind(extra))])
    if not extra:
        return defaults
    # once per document: the hosts of a group give the same mig_configs (a document that does not parse
    # is parsed again for each host, so that each problem names its source)
    return _PARSED_EXTRA.get(frozen(dict(extra)), lambda: _with_defaults(defaults, extra, source))


def _with_defaults(defaults: MigPartedConfig, extra: Mapping[str, Any], source: str) -> MigPartedConfig:
    user = parse_config({"version": CONFIG_VERSION, "mig-configs": dict(extra)}, source)
    own = dict(user.configs)
    merged = [(name, own.pop(name, items)) for name, items in defaults.configs]
    return MigPartedConfig(configs=tuple(merged + [(name, own[name]) for name in user.names if name in own]))


# ---------------------------------------------------------------------------------------------
# Planning a config per GPU model, without a host (the mig_plan module)


def config_with_defaults(content: Optional[Mapping[str, Any]], include_defaults: bool) -> Dict[str, Any]:
    """``content`` (an empty v1 document when not given), plus the default named configs when asked.

    The defaults' ``version`` replaces the document's; configs of ``content`` win over defaults.
    """
    document = dict(content or {"version": CONFIG_VERSION, "mig-configs": {}})
    if not include_defaults:
        return document
    return dict(document, **merged_configs(_named_configs(document)))


def _named_configs(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The document's ``mig-configs``, which must be a mapping to be merged with the defaults."""
    if not isinstance(document.get("mig-configs"), dict):
        raise DocumentError("config.mig-configs must be a mapping of config name to items")
    return document["mig-configs"]


def models_for_item(item: MigConfigItem, requested: Optional[GpuModel]) -> List[GpuModel]:
    """The models an item applies to: the requested one if its filter allows it, else the filter's."""
    if requested is not None:
        if not item.device_filters or any(
                flt.matches(pci) for flt in item.device_filters for pci in requested.pci_device_ids):
            return [requested]
        return []
    return [model for model in MODELS
            if any(flt.matches(pci) for flt in item.device_filters for pci in model.pci_device_ids)]


def plan_items(name: str, items: Sequence[MigConfigItem],
               requested: Optional[GpuModel]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """One plan per item and model (``requested``, or the models of each item's device-filter).

    Returns the plans and the problems; items without a device-filter need ``requested``.
    """
    plans: List[Dict[str, Any]] = []
    problems: List[str] = []
    for position, item in enumerate(items):
        where = "mig-configs.%s[%d]" % (name, position)
        if requested is None and not item.device_filters:
            problems.append("%s has no device-filter; give the module a gpu to plan it for" % where)
            continue
        models = models_for_item(item, requested)
        if requested is None and not models:
            problems.append("%s: no known MIG-capable model has device-filter %s" % (
                where, ", ".join(str(f) for f in item.device_filters)))
        for model in models:
            entry: Dict[str, Any] = {
                "item": position, "model": model.key, "mig_enabled": item.mig_enabled,
                "devices": item.devices if item.devices == "all" else list(item.devices), "plan": None}
            if item.mig_enabled:
                try:
                    entry["plan"] = plan_layout(model, item.layout()).as_dict()
                except LayoutError as error:
                    problems.extend("%s on %s: %s" % (where, model.key, p) for p in error.problems)
                    continue
            plans.append(entry)
    return plans, problems + overlap_problems(name, items, plans)


def overlap_problems(name: str, items: Sequence[MigConfigItem], plans: Sequence[Mapping[str, Any]]) -> List[str]:
    """Two items that select the same GPU indexes of one model with different layouts (without a host:
    per model); mig-parted would apply both in turn. Items told apart by a subsystem filter are left out."""
    problems: List[str] = []
    for first, entry in enumerate(plans):
        for other in plans[first + 1:]:
            a, b = items[entry["item"]], items[other["item"]]
            if entry["model"] != other["model"] or entry["item"] == other["item"] or any(
                    flt.subsystem_device_id is not None for flt in a.device_filters + b.device_filters):
                continue
            shared = "all" if a.devices == b.devices == "all" else sorted(
                set(b.devices if a.devices == "all" else a.devices) & set(a.devices if b.devices == "all" else b.devices))
            if shared and (entry["mig_enabled"], a.layout() if a.mig_enabled else {}) != (
                    other["mig_enabled"], b.layout() if b.mig_enabled else {}):
                problems.append("mig-configs.%s: items %d and %d both select GPU(s) %s of %s with different layouts "
                                "(nvidia-mig-parted would apply both in turn)" % (
                                    name, entry["item"], other["item"],
                                    shared if shared == "all" else ", ".join(map(str, shared)), entry["model"]))
    return problems


def catalog_problems(config: MigPartedConfig, names: Sequence[str]) -> List[str]:
    """What the GPU models cannot do of the named configs, without knowing the hosts: an item with a
    device-filter is planned on every model the filter names; one without must be possible on at
    least one MIG-capable model of the catalog."""
    problems: List[str] = []
    for name in names:
        items = config.items(name)
        filtered = tuple(item for item in items if item.device_filters)
        problems.extend(plan_items(name, filtered, None)[1])
        for position, item in enumerate(items):
            if item.device_filters or not item.mig_enabled:
                continue
            per_model = [(model, plan_items(name, (item,), model)[1]) for model in MODELS]
            if all(found for _model, found in per_model):
                problems.append("mig-configs.%s[%d]: no GPU model has the layout %s (%s)" % (
                    name, position, item.layout(),
                    "; ".join("%s: %s" % (model.key, found[0]) for model, found in per_model[:3])))
    return problems


def untouched_problem(name: str, requested: GpuModel) -> str:
    """Why a config none of whose items names ``requested`` is refused."""
    return ("no item of mig-parted config %s applies to %s (its device-filters name other GPUs), "
            "so nvidia-mig-parted would leave this GPU untouched" % (name, requested.key))


# ---------------------------------------------------------------------------------------------
# Rendering


def render_yaml(config: Mapping[str, Any]) -> str:
    """Deterministic YAML for a v1 document (``MigPartedConfig.as_dict()`` shape)."""
    lines = ["version: %s" % _scalar(config.get("version", CONFIG_VERSION)), "mig-configs:"]
    for name, items in config["mig-configs"].items():
        lines.append("  %s:" % _scalar(name))
        for item in items:
            first = True
            for key in ITEM_FIELDS:
                if key not in item:
                    continue
                prefix = "  - " if first else "    "
                first = False
                value = item[key]
                if isinstance(value, Mapping):
                    if not value:
                        lines.append("%s%s: {}" % (prefix, key))
                        continue
                    lines.append("%s%s:" % (prefix, key))
                    for sub_key, sub_value in value.items():
                        lines.append("      %s: %s" % (_scalar(sub_key), _scalar(sub_value)))
                elif isinstance(value, list):
                    lines.append("%s%s: [%s]" % (prefix, key, ", ".join(_scalar(v) for v in value)))
                else:
                    lines.append("%s%s: %s" % (prefix, key, _scalar(value)))
    return "\n".join(lines) + "\n"


_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_YAML_SPECIAL = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    # Hex ids and anything YAML could read as a number or bool are quoted.
    if _PLAIN.match(text) and text.lower() not in _YAML_SPECIAL and not _looks_numeric(text):
        return text
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        pass
    return text.lower().startswith("0x") or text.lower().startswith("0o") or text.lower().startswith("0b")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return type(value).__name__


@dataclass(frozen=True)
class ConfigPlan:
    """A named config planned for one model (or for the models its filters name): the plans, or why not."""

    name: Optional[str]
    plans: Tuple[Dict[str, Any], ...] = ()
    message: Optional[str] = None
    problems: Tuple[str, ...] = ()


def _parse_document(content: Optional[Mapping[str, Any]], include_defaults: bool) -> MigPartedConfig:
    """``parse_config(config_with_defaults(content, include_defaults), "config")``, with the default
    configs parsed once per process (``parse_with_defaults``): the preflight plans every host with it."""
    if not include_defaults:
        return parse_config(config_with_defaults(content, False), source="config")
    document = dict(content or {"version": CONFIG_VERSION, "mig-configs": {}})
    named = _named_configs(document)
    # config_with_defaults replaces the version; other top-level fields stay and are reported first.
    unexpected = ["config: unexpected field: %s" % key for key in document if key not in TOP_LEVEL_FIELDS]
    try:
        parsed = parse_with_defaults(named, "config")
    except MigPartedError as error:
        raise MigPartedError(unexpected + list(error.problems)) from None
    if unexpected:
        raise MigPartedError(unexpected)
    return parsed


def plan_named_config(content: Optional[Mapping[str, Any]], include_defaults: bool, name: Optional[str],
                      requested: Optional[GpuModel]) -> ConfigPlan:
    """What mig_plan answers for a named config (one mechanism for the module and the preflight filter)."""
    try:
        selected, items = select_config(_parse_document(content, include_defaults), name)
    except DocumentError as error:
        return ConfigPlan(name, message=str(error), problems=(str(error),))
    except MigPartedError as error:
        return ConfigPlan(name, message="invalid mig-parted config: %s" % error, problems=tuple(error.problems))
    plans, problems = plan_items(selected, items, requested)
    if problems:
        return ConfigPlan(selected, tuple(plans), "mig-parted config %s cannot be applied: %s" % (selected, "; ".join(problems)),
                          tuple(problems))
    if requested is not None and not plans:
        problem = untouched_problem(selected, requested)
        return ConfigPlan(selected, tuple(plans), problem, (problem,))
    return ConfigPlan(selected, tuple(plans))

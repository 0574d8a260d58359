"""The v1 configuration file of nvidia-mig-parted and its error texts (docs/reference/specs.md §6.1)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import yaml

from gpulab.gpustate import Gpu
from gpulab.models import parse_profile_name

_FILTER_RE = re.compile(r"^0x[0-9a-fA-F]{8}(:0x[0-9a-fA-F]{8})?$")


class MigPartedError(Exception):
    """Fatal error; ``str()`` is the message after the ``FATA[....]`` prefix."""


@dataclass
class ConfigItem:
    device_filter: List[str]
    devices: Any  # "all" or list of int
    mig_enabled: bool
    mig_devices: Dict[str, int] = field(default_factory=dict)

    def matches(self, gpu: Gpu) -> bool:
        if self.devices != "all" and gpu.index not in self.devices:
            return False
        if not self.device_filter:
            return True
        device = gpu.pci_device_id.upper().replace("0X", "0x")
        sub = gpu.pci_sub_device_id.upper().replace("0X", "0x")
        for wanted in self.device_filter:
            dev, _colon, subsys = wanted.partition(":")
            if dev.lower() == device.lower() and (not subsys or subsys.lower() == sub.lower()):
                return True
        return False


def check_keys(data: Mapping[str, Any], allowed: Iterable[str]) -> None:
    for key in data:
        if key not in allowed:
            raise MigPartedError(f"unexpected field: {key}")


def parse_config(data: Any) -> Dict[str, List[ConfigItem]]:
    """Validate a v1 config (already loaded from YAML/JSON); returns config name -> items."""
    if not isinstance(data, dict):
        raise MigPartedError("unable to parse config: expected a mapping with 'version' and 'mig-configs'")
    check_keys(data, ("version", "mig-configs"))
    if "version" not in data:
        raise MigPartedError("missing required field: version")
    if data["version"] != "v1":
        raise MigPartedError(f"unknown version: {data['version']}")
    if "mig-configs" not in data:
        raise MigPartedError("missing required field: mig-configs")
    configs = data["mig-configs"]
    if not isinstance(configs, dict) or not configs:
        raise MigPartedError("at least one entry in 'mig-configs' is required")
    result: Dict[str, List[ConfigItem]] = {}
    for name, items in configs.items():
        if not isinstance(items, list) or not items:
            raise MigPartedError(f"at least one entry in mig-config '{name}' is required")
        result[str(name)] = [_parse_item(item) for item in items]
    return result


def _parse_item(item: Any) -> ConfigItem:
    if not isinstance(item, dict):
        raise MigPartedError(f"unable to parse mig-config entry: {item!r}")
    check_keys(item, ("device-filter", "devices", "mig-enabled", "mig-devices"))
    filters: List[str] = []
    if "device-filter" in item:
        raw = item["device-filter"]
        raw_list = raw if isinstance(raw, list) else [raw]
        for value in raw_list:
            if not isinstance(value, str) or not _FILTER_RE.match(value):
                raise MigPartedError(f"invalid device-filter: {value!r}")
            filters.append(value)
    if "devices" not in item:
        raise MigPartedError("missing required field: devices")
    devices = item["devices"]
    if devices != "all":
        if not isinstance(devices, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                    for d in devices):
            raise MigPartedError(f"invalid format for 'devices': {devices!r} (expected 'all' or a list of GPU indexes)")
    if "mig-enabled" not in item:
        raise MigPartedError("missing required field: mig-enabled")
    enabled = item["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigPartedError(f"invalid format for 'mig-enabled': {enabled!r} (expected a boolean)")
    mig_devices = item.get("mig-devices")
    if enabled and "mig-devices" not in item:
        raise MigPartedError("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        raise MigPartedError("MIG devices included when 'mig-enabled' is false")
    parsed_devices: Dict[str, int] = {}
    for profile, count in (mig_devices or {}).items():
        if parse_profile_name(str(profile)) is None:
            raise MigPartedError(f"invalid MIG profile name in 'mig-devices': {profile}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise MigPartedError(f"invalid count for MIG profile {profile}: {count!r}")
        parsed_devices[str(profile)] = count
    return ConfigItem(device_filter=filters, devices=devices, mig_enabled=enabled, mig_devices=parsed_devices)


def load_config_text(text: str) -> Dict[str, List[ConfigItem]]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise MigPartedError(f"error parsing config file: {error}") from None
    try:
        return parse_config(data)
    except MigPartedError as error:
        raise MigPartedError(f"error parsing config file: {error}") from None


def select_config(configs: Mapping[str, List[ConfigItem]], selected: Optional[str]) -> Tuple[str, List[ConfigItem]]:
    if not selected:
        if len(configs) == 1:
            name = next(iter(configs))
            return name, configs[name]
        raise MigPartedError("missing required flag 'selected-config' (the file holds more than one mig-config)")
    if selected not in configs:
        raise MigPartedError(f"selected mig-config not present: {selected}")
    return selected, configs[selected]

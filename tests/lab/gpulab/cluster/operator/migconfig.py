"""The default mig-parted ConfigMap of the operator (docs/reference/specs.md §6.5), for the lab's GPU models."""

from __future__ import annotations

from typing import Any, Dict, List

from gpulab.models import load_model

# device-filter families of docs/reference/specs.md §6.5 ("all-balanced" table), keyed by lab model.
_FILTERS = {
    "A30": ["0x20B710DE"],
    "A100-40GB": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
    "A100-80GB": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"],
    "H100-80GB": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"],
    "H100-NVL": ["0x232110DE", "0x233A10DE"],
    "H200": ["0x233510DE", "0x233B10DE"],
    "RTX-PRO-6000": ["0x2BB510DE"],
}


_BALANCED = {
    "A30": {"1g.6gb": 2, "2g.12gb": 1},
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-NVL": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "H200": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "RTX-PRO-6000": {"1g.24gb": 2, "2g.48gb": 1},
}


def default_mig_parted_config() -> Dict[str, Any]:
    """`all-disabled`, `all-enabled`, `all-balanced` and `all-<profile>` for the lab's models.

    Counts of `all-<profile>` are each profile's maximum from the model's `-lgip` fixture (the
    real file lists the same maxima, docs/reference/specs.md §6.5); in config keys `+` becomes `.`
    (`all-1g.24gb.me.all`, `all-1g.24gb.gfx`) and `-me` stays (`all-1g.24gb-me`), docs/reference/specs.md §2.15.
    """
    configs: Dict[str, List[Dict[str, Any]]] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    per_profile: Dict[str, List[Dict[str, Any]]] = {}
    balanced: List[Dict[str, Any]] = []
    for key, filters in _FILTERS.items():
        model = load_model(key)
        filters = list(filters)
        if model.pci_device_id.upper().replace("0X", "0x") not in filters:
            filters.append(model.pci_device_id)
        for profile in model.profiles:
            item = {"device-filter": filters, "devices": "all", "mig-enabled": True,
                    "mig-devices": {profile.name: profile.instances_total}}
            bucket = per_profile.setdefault("all-" + profile.name.replace("+", "."), [])
            if item not in bucket:
                bucket.append(item)
        item = {"device-filter": filters, "devices": "all", "mig-enabled": True, "mig-devices": dict(_BALANCED[key])}
        if item not in balanced:
            balanced.append(item)
    configs["all-balanced"] = balanced
    for name in sorted(per_profile):
        configs[name] = per_profile[name]
    return {"version": "v1", "mig-configs": configs}


__all__ = ["default_mig_parted_config"]

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's MIG plan from this run's ``gpu_facts`` read, on the controller (rollout_triage, fleet_drift)."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import Prepared, plan_prepared, prepare


def read_plan(read: Any, selection: Any, cache: Dict[Tuple[str, bool], Prepared]) -> Dict[str, Any]:
    """The plan from a gpu_facts result, or {} when it cannot be used."""
    read, selection = read or {}, selection or {}
    gpus = (read.get("ansible_facts") or {}).get("gpufleet_gpus") or []
    files = read.get("files") or {}
    paths = [selection.get(key) or None for key in ("config_dest", "selected_config_override")]
    unusable = read.get("failed") or read.get("skipped") or read.get("unreachable") or not gpus
    if unusable or "config" not in selection or any(path and path not in files for path in paths):
        return {}
    key = (repr(selection.get("configs")), bool(selection.get("include_defaults")))
    if key not in cache:
        cache[key] = prepare({"version": "v1", "mig-configs": selection.get("configs")}, key[1])
    return plan_prepared(cache[key], selection["config"], gpus, files, *paths)

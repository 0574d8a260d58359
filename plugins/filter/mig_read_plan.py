# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's MIG plan made on the controller from this run's gpu_facts read (no module run)."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.gpufleet.sharing.plugins.module_utils._mig_read_plan import plan_from_read

DOCUMENTATION = r"""
name: mig_read_plan
short_description: mig_config's check-mode answer computed from a gpu_facts result
version_added: 0.2.0
description:
  - Plans the host's MIG selection (the C(mig_selection) fact of the C(mig) role's C(selection) tasks)
    against the GPUs and nvidia-mig-manager files of a registered M(gpufleet.sharing.gpu_facts) result
    (run with O(gpufleet.sharing.gpu_facts#module:read_files) naming the selection's C(config_dest) and
    C(selected_config_override)), with the code of M(gpufleet.sharing.mig_config).
  - The answer has the keys of M(gpufleet.sharing.mig_config) in check mode (C(changed_gpus),
    C(selected), C(config_dest_changed), C(selected_config_override_changed), C(before), C(after),
    ...), or C(failed) and C(msg) when the selection cannot be applied.
  - An empty dict when the result cannot be used (skipped, failed, unreachable, no GPU, or a file
    not read); the caller then plans on the host.
options:
  _input:
    description: The registered gpu_facts result.
    type: dict
    required: true
  selection:
    description: The C(mig_selection) fact.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan from the preflight read
  ansible.builtin.debug:
    msg: "{{ gpufleet_gpu_read | gpufleet.sharing.mig_read_plan(mig_selection) }}"
"""

RETURN = r"""
_value:
  description: The plan, or an empty dict.
  type: dict
"""


def mig_read_plan(read: Mapping[str, Any], selection: Mapping[str, Any]) -> Dict[str, Any]:
    gpus = ((read or {}).get("ansible_facts") or {}).get("gpufleet_gpus") or []
    files = (read or {}).get("files") or {}
    paths = [selection.get(key) or None for key in ("config_dest", "selected_config_override")]
    unusable = read.get("failed") or read.get("skipped") or read.get("unreachable") or not gpus
    if unusable or "config" not in selection or any(path and path not in files for path in paths):
        return {}
    document = {"version": "v1", "mig-configs": selection.get("configs")}
    return plan_from_read(document, bool(selection.get("include_defaults")), selection["config"], gpus, files, *paths)


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"mig_read_plan": mig_read_plan}

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host's MIG selection cannot be applied to its GPU models (preflight, on the controller)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config, read_gpu_problems, unchecked_indexes

DOCUMENTATION = r"""
name: mig_selection_problems
short_description: Why a host's MIG selection cannot be applied to its GPU models
version_added: 0.1.0
description:
  - For each GPU model, plans the selected mig-parted config exactly as M(gpufleet.sharing.mig_plan)
    does (same code, same messages) and returns the messages of the models it fails for; an empty
    list when the selection can be applied to every model.
  - Runs on the controller, in the play's own process, with no module run per host. The preflight of
    C(site.yml) and C(rollout.yml) uses it for every host at once.
options:
  _input:
    description: The host's GPU models (PCI device ids such as C(0x233010DE), or catalog model keys).
    type: list
    elements: str
    required: true
  selection:
    description:
      - The host's MIG selection, as the C(mig) role's C(selection) tasks record it in C(mig_selection)
        (C(config), C(configs), C(include_defaults)).
    type: dict
    required: true
  gpus:
    description:
      - The GPUs a read of the host found (the C(gpufleet_gpus) fact of M(gpufleet.sharing.gpu_facts)).
        When given, and the selection fits every model, the selection is also checked against them as
        M(gpufleet.sharing.mig_config) checks it on the host - items whose C(devices) name no GPU the host
        has, a config that selects none of its MIG-capable GPUs.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Refuse a MIG selection that does not fit the host's GPUs
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems }}"
  vars:
    problems: "{{ ['0x20B010DE'] | gpufleet.sharing.mig_selection_problems(mig_selection) }}"
"""

RETURN = r"""
_value:
  description: One message per GPU model the selection cannot be applied to (what M(gpufleet.sharing.mig_plan) fails with).
  type: list
  elements: str
"""


def mig_selection_problems(models: Sequence[str], selection: Mapping[str, Any],
                           gpus: Optional[Sequence[Mapping[str, Any]]] = None) -> List[str]:
    problems: List[str] = []
    content = {"version": "v1", "mig-configs": selection.get("configs")}
    for gpu in models:
        try:
            requested = resolve_model(str(gpu))
        except CatalogError as error:
            problems.append(str(error))
            continue
        planned = plan_named_config(content, bool(selection.get("include_defaults")), selection.get("config"), requested)
        if planned.message is not None:
            problems.append(planned.message)
    if problems or not gpus:
        return problems
    return read_gpu_problems(content, bool(selection.get("include_defaults")), selection.get("config"), gpus)


def unread_index_notes(selection: Mapping[str, Any]) -> List[str]:
    """The selection's GPU indexes that only a read of the host could check (its model is declared)."""
    content = {"version": "v1", "mig-configs": selection.get("configs")}
    return ["config %s item %d names GPU %s: not checked against the host's GPUs (gpufleet_gpu_model is declared, "
            "so preflight did not read the host; mig_config refuses an index the host lacks, on the host, before any "
            "change)" % (name, position, ", ".join(str(index) for index in indexes))
            for name, position, indexes in unchecked_indexes(content, bool(selection.get("include_defaults")),
                                                             selection.get("config"))]


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"mig_selection_problems": mig_selection_problems}

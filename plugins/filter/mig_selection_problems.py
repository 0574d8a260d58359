# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host's MIG selection cannot be applied to its GPU models (preflight, on the controller)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config

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


def mig_selection_problems(models: Sequence[str], selection: Mapping[str, Any]) -> List[str]:
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
    return problems


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"mig_selection_problems": mig_selection_problems}

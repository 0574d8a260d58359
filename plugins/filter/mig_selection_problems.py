# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host's MIG selection cannot be applied to its GPU models (preflight, on the controller)."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._mig_selection import mig_selection_problems

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


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"mig_selection_problems": mig_selection_problems}

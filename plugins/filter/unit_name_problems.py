# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The entries of a list that are no systemd unit names (they would reach systemctl's argv)."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import unit_names_problems

DOCUMENTATION = r"""
name: unit_name_problems
short_description: The entries of a list that are no systemd unit names systemctl can start and stop
version_added: 0.4.0
description:
  - One message per entry of the input that is not a systemd unit name as systemd.unit(5) defines it - ASCII
    letters, digits, C(:), C(-), C(_), C(.), C(\) and C(@) only, a known type suffix (C(.service),
    C(.socket), C(.target) ...) or none (systemctl then means C(.service)), at most 255 characters with the
    suffix, one C(@) at most with a template name before it and an instance after it; a name starting with
    C(-) is refused too (systemctl would read it as an option).
  - Each message names the entry (C(<name>[<index>])) and the reason. The C(mig) role refuses
    C(mig_gpu_clients) with it before anything changes; the preflight checks the same variable with the
    same code.
options:
  _input:
    description: The unit names.
    type: list
    elements: raw
    required: true
  name:
    description: The variable's name, for the messages.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse client names that are no systemd units
  ansible.builtin.fail:
    msg: "{{ problems }}"
  when: problems | length > 0
  vars:
    problems: "{{ mig_gpu_clients | gpufleet.sharing.unit_name_problems('mig_gpu_clients') }}"
"""

RETURN = r"""
_value:
  description: The problems, an empty list when every entry is a unit name.
  type: list
  elements: str
"""


def unit_name_problems(units: Any, name: str) -> List[str]:
    return unit_names_problems(name, units)


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"unit_name_problems": unit_name_problems}

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run-wide variables of the given hosts, checked as site.yml's preflight checks them."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once
from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import variable_problems as _host_variable_problems

DOCUMENTATION = r"""
name: variable_problems
short_description: The problems of the run's variables on the given hosts, as the preflight finds them
version_added: 0.2.0
description:
  - Per host, each message prefixed with the host's name - the variables that C(site.yml)'s preflight checks
    (C(gpufleet_mig_backend), C(gpufleet_rollout_serial), C(gpufleet_rollout_max_fail_percentage),
    C(gpufleet_verify_pods), C(mig_configs), the probe's C(verify_probe_*), C(gpufleet_rollout_lock_duration),
    C(gpufleet_node_name), and the operator's registry, pull-secret and proxy variables), with the same code
    and messages, so that C(verify.yml) on its own refuses what C(site.yml) refuses.
options:
  _input:
    description: hostvars.
    type: dict
    required: true
  hosts:
    description: The hosts to check.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse invalid variables
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems }}"
  vars:
    problems: "{{ hostvars | gpufleet.sharing.variable_problems(ansible_play_hosts_all) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The problems, an empty list when there is none.
  type: list
  elements: str
"""


@hostvars_once
def variable_problems(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[str]:
    return ["%s: %s" % (host, problem) for host in hosts for problem in _host_variable_problems(hostvars[host])]


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"variable_problems": variable_problems}

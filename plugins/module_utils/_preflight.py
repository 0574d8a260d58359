# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's checks of one host's variables and GPU read (pure; the caller prefixes the host).

``values`` is a mapping of the host's variables (hostvars of the host); a missing variable takes the
playbooks' default.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils._mig_strategy import COLLECTION_DEFAULT, preflight_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils._quota_teams import team_problems

SERIAL_ITEM = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
PERCENT = re.compile(r"^([0-9]|[1-9][0-9]|100)$")
BACKENDS = ("host", "operator")
VERIFY_PODS = ("always", "changed", "never")


def _text(value: Any) -> str:
    """A value as Jinja's ``string`` filter writes it."""
    return str(value)


def variable_problems(values: Mapping[str, Any]) -> List[str]:
    """The run-wide variables: MIG backend, batch sizes, failure budget, verification pods, mig_configs, teams."""
    problems: List[str] = []
    backend = values.get("gpufleet_mig_backend", "host")
    if backend not in BACKENDS:
        problems.append("gpufleet_mig_backend must be 'host' or 'operator', got '%s'" % backend)
    serial = values.get("gpufleet_rollout_serial", [1, "25%"])
    items = list(serial) if isinstance(serial, (list, tuple)) else [serial]
    if not items or any(not SERIAL_ITEM.match(_text(item)) for item in items):
        problems.append('gpufleet_rollout_serial must be a number of hosts, a percentage ("25%%") or a list of them, got %s'
                        % json.dumps(serial, default=str))
    budget = values.get("gpufleet_rollout_max_fail_percentage", 0)
    if not PERCENT.match(_text(budget)):
        problems.append("gpufleet_rollout_max_fail_percentage must be an integer from 0 to 100, got '%s'" % budget)
    pods = values.get("gpufleet_verify_pods", "always")
    if pods not in VERIFY_PODS:
        problems.append("gpufleet_verify_pods must be 'always', 'changed' or 'never', got '%s'" % pods)
    configs = values.get("mig_configs", {})
    if not isinstance(configs, Mapping):
        problems.append("mig_configs must be a mapping of config name to mig-parted items, got %s" % json.dumps(configs, default=str))
    return problems + team_problems(values)


def gpu_models(declared: Optional[str], gpus: Sequence[Mapping[str, Any]]) -> List[str]:
    """The GPU models to plan for: the declared one, else the PCI device ids read (each once, in order)."""
    if declared is not None:
        return [declared]
    models: List[str] = []
    for gpu in gpus:
        if gpu.get("pci_device_id") not in models:
            models.append(gpu.get("pci_device_id"))
    return models


def read_problems(declared: Optional[str], facts: Mapping[str, Any]) -> List[str]:
    """A host read without GPUs (and nvidia-smi's reason) is a problem unless its model is declared."""
    if declared is None and not facts.get("gpufleet_gpus") and "gpufleet_gpus_reason" in facts:
        return ["no GPU found (%s)" % facts["gpufleet_gpus_reason"]]
    return []


def host_problems(values: Mapping[str, Any], mig_problems: Sequence[str]) -> List[str]:
    """One host's problems in the preflight's order: MIG selection, GPU read, variables."""
    declared = values.get("gpufleet_gpu_model")
    facts: Dict[str, Any] = dict(values.get("ansible_facts") or {})
    return list(mig_problems) + read_problems(declared, facts) + variable_problems(values) + sharing_problems(values)


def sharing_problems(values: Mapping[str, Any]) -> List[str]:
    """The host's sharing config against the MIG strategy its device plugin will run with (only what no
    flag of the config can make work: MPS under a ClusterPolicy strategy mixed, or flags mixed)."""
    problem = preflight_problem(values.get("gpu_operator_mig_strategy", COLLECTION_DEFAULT),
                                values.get("gpu_sharing_config"), list(values.get("group_names") or []))
    return [problem] if problem else []

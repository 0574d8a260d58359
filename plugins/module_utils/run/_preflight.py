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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import DRA, backend_of, dra_host_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import input_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._mig_strategy import COLLECTION_DEFAULT, preflight_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import (
    fleet_profile_problems, parse_teams, team_problems)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_inventory import inventory_quota_problems, plan_entry
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import run_variable_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight_inputs import (
    dra_input_problems, host_name_problems, sharing_config_problems)

SERIAL_ITEM = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
PERCENT = re.compile(r"^([0-9]|[1-9][0-9]|100)$")
BACKENDS = ("host", "operator")
VERIFY_PODS = ("always", "changed", "never")
DRAIN_SCOPES = ("gpu", "node")  # gpufleet_mig_drain_scope (issue 38; docs/rollout.md)


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
    scope = values.get("gpufleet_mig_drain_scope", "gpu")
    if scope not in DRAIN_SCOPES:
        problems.append("gpufleet_mig_drain_scope must be 'gpu' or 'node', got '%s'" % scope)
    configs = values.get("mig_configs", {})
    if not isinstance(configs, Mapping):
        problems.append("mig_configs must be a mapping of config name to mig-parted items, got %s" % json.dumps(configs, default=str))
    return (problems + run_variable_problems(values) + ["gpu_operator: " + p for p in input_problems(operator_inputs(values))]
            + team_problems(values) + host_name_problems(values))


def _first(values: Mapping[str, Any], *names: str) -> Any:
    return next((values[name] for name in names if values.get(name) not in (None, "")), None)


def operator_inputs(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The gpu_operator role's registry, pull-secret and proxy options as its defaults build them."""
    proxy_env = values.get("proxy_env") if isinstance(values.get("proxy_env"), Mapping) else {}
    proxy = values.get("gpu_operator_proxy") if isinstance(values.get("gpu_operator_proxy"), Mapping) else \
        {name: _first(values, name) or proxy_env.get(name) for name in ("http_proxy", "https_proxy", "no_proxy")}
    return {"registry": _first(values, "gpu_operator_registry", "gpufleet_registry"), "proxy": proxy,
            "image_pull_secrets": _first(values, "gpu_operator_image_pull_secrets", "gpufleet_image_pull_secrets") or [],
            "registry_credentials": _first(values, "gpu_operator_registry_credentials", "gpufleet_registry_credentials")}


def gpu_models(declared: Optional[str], gpus: Sequence[Mapping[str, Any]]) -> List[str]:
    """The GPU models to plan for: the declared one, else the PCI device ids read (each once, in order)."""
    if declared is not None:
        return [declared]
    models: List[str] = []
    for gpu in gpus:
        if gpu.get("pci_device_id") not in models:
            models.append(gpu.get("pci_device_id"))
    return models


def fleet_team_problems(hosts: Sequence[Mapping[str, Any]]) -> List[str]:
    """The fleet-wide check of ``gpufleet_teams`` (each host's own check is ``variable_problems``): a MIG
    profile that no GPU model of the hosts has, judged when every host's GPUs are known (declared or read); then,
    when every host's GPUs were read, gpu_quotas' own plan over the planned hosts (``inventory_quota_problems``)."""
    if not hosts:
        return []
    teams, problems = parse_teams(hosts[0].get("gpufleet_teams"))
    if problems or not teams:
        return []  # reported per host
    models: Dict[str, Any] = {}
    for values in hosts:
        ids = gpu_models(values.get("gpufleet_gpu_model"), (values.get("ansible_facts") or {}).get("gpufleet_gpus") or [])
        if not ids:
            return []
        for model in (find_model(str(i)) for i in ids if i):
            if model is not None:
                models[model.key] = model
    unknown = fleet_profile_problems(teams, [models[k] for k in sorted(models)])
    entries = [plan_entry(values) for values in hosts]
    overcommit = hosts[0].get("gpufleet_quota_overcommit", False)
    if unknown or any(e is None for e in entries) or not isinstance(overcommit, bool):
        return unknown  # the quotas are judged on every host's read GPUs (a declared model: by gpu_quotas)
    return inventory_quota_problems([e for e in entries if e is not None], teams, overcommit,
                                    hosts[0].get("gpu_operator_mig_strategy", COLLECTION_DEFAULT))


def read_problems(declared: Optional[str], facts: Mapping[str, Any]) -> List[str]:
    """A host read without GPUs (and nvidia-smi's reason) is a problem unless its model is declared."""
    if declared is None and not facts.get("gpufleet_gpus") and "gpufleet_gpus_reason" in facts:
        return ["no GPU found (%s)" % facts["gpufleet_gpus_reason"]]
    return []


def shared_node_problems(nodes: Sequence[Tuple[str, str]]) -> List[str]:
    """``(host, node)`` in inventory order: a problem per Kubernetes node that more than one host names
    (it would be planned, tainted and rolled out twice, with values that may conflict)."""
    hosts_of: Dict[str, List[str]] = {}
    for host, node in nodes:
        hosts_of.setdefault(node, []).append(host)
    return ["node %s: named by more than one inventory host (%s): each node must be one host (gpufleet_node_name)"
            % (node, ", ".join(hosts)) for node, hosts in hosts_of.items() if len(hosts) > 1]


def host_problems(values: Mapping[str, Any], mig_problems: Sequence[str]) -> List[str]:
    """One host's problems in the preflight's order: MIG selection, GPU read, variables, sharing, backend
    (a DRA host's sharing goes through the DRA driver's gates, not the device plugin's strategy)."""
    declared = values.get("gpufleet_gpu_model")
    facts: Dict[str, Any] = dict(values.get("ansible_facts") or {})
    sharing = sharing_problems(values) if backend_of(values) != DRA else []
    if backend_of(values) != DRA:
        node = values.get("gpufleet_node_name") or str(values.get("inventory_hostname", ""))
        sharing += sharing_config_problems(values, node)
    return (list(mig_problems) + read_problems(declared, facts) + variable_problems(values) + sharing + dra_host_problems(values)
            + dra_input_problems(values))


def sharing_problems(values: Mapping[str, Any]) -> List[str]:
    """The host's sharing config against the MIG strategy its device plugin will run with (only what no
    flag of the config can make work: MPS under a ClusterPolicy strategy mixed, or flags mixed)."""
    problem = preflight_problem(values.get("gpu_operator_mig_strategy", COLLECTION_DEFAULT),
                                values.get("gpu_sharing_config"), list(values.get("group_names") or []))
    return [problem] if problem else []

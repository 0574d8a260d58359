# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inputs of the later plays of a run, checked by the preflight with the checks their modules run (pure).

Issue 43: the host's sharing config (``gpu_sharing``), the node name an inventory host stands for, the DRA
driver's release inputs (``gpu_dra_driver``) and the claim templates (``gpu_claim_templates``) used to be
refused only in their own play, after the operator play had run. Each function here calls the module's own
parser, so that preflight and module refuse the same input with the same words.
"""

from __future__ import annotations

from typing import Any, List, Mapping

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import DEFAULT_MIG_CONFIG
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import node_name_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import name_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_values import DraValuesError, driver_values
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_versions import version_key
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import parse_requests
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import mps_on_mig_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import node_gpus_from_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError, parse_config
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import HostPlan


def host_name_problems(values: Mapping[str, Any]) -> List[str]:
    """An inventory host without ``gpufleet_node_name`` is its node's name: it must be one (RFC 1123 subdomain);
    ``gpu;reboot``, ``gpu-$(id)`` or ``gpu a`` would reach node paths and labels."""
    host = values.get("inventory_hostname")
    if values.get("gpufleet_node_name") is not None or host is None or not node_name_problem("", host):
        return []
    return ["inventory host name %r is not a Kubernetes node name (a DNS-1123 subdomain: lower-case letters, digits, "
            "'-' and '.', at most 253 characters); set gpufleet_node_name to the host's node name" % (host,)]


def sharing_config_problems(values: Mapping[str, Any], node: str) -> List[str]:
    """``gpu_sharing_config`` as gpu_sharing parses it, and MPS on the GPUs the host's plan puts in MIG mode (from
    its GPU read; a host whose model is declared is checked by gpu_sharing against the node's labels)."""
    raw = values.get("gpu_sharing_config")
    if raw is None:
        return []
    try:
        config = parse_config(raw, "gpu_sharing_config")
    except SharingError as exc:
        return ["gpu_sharing_config: %s" % problem for problem in exc.problems]
    facts = (values.get("ansible_facts") or {}).get("gpufleet_gpus") or []
    if config.strategy != "mps" or not facts or values.get("gpufleet_gpu_model") is not None:
        return []
    selection = values.get("mig_selection") if isinstance(values.get("mig_selection"), Mapping) else {}
    try:
        planned = HostPlan(node=node, gpu_facts=tuple(facts), mig_config=selection.get("config") or DEFAULT_MIG_CONFIG,
                           mig_configs=dict(selection.get("configs") or {})).planned_gpus()
        gpus = node_gpus_from_plan(planned or [], "node %r" % node)
    except SharingError:
        return []  # the MIG selection's own problems are reported with it
    problem = mps_on_mig_problem(config, gpus, "sharing config %r on node %r" % (config.name, node))
    return [problem] if problem else []


def dra_input_problems(values: Mapping[str, Any]) -> List[str]:
    """The DRA driver role's release inputs (``dra_driver_namespace``, ``dra_driver_chart_version``,
    ``dra_driver_values``) and ``gpufleet_dra_claim_templates``, where set."""
    problems: List[str] = []
    namespace = values.get("dra_driver_namespace")
    if namespace is not None and name_problem("Namespace", namespace):
        problems.append("dra_driver_namespace: %s" % name_problem("Namespace", namespace))
    version = values.get("dra_driver_chart_version")
    if version not in (None, ""):
        try:
            version_key(version)  # the driver's own release order (25.12.0 before 0.4.0)
        except ValueError as exc:
            problems.append("dra_driver_chart_version: %s" % exc)
    problems += _values_problems(values.get("dra_driver_values"))
    requests = values.get("gpufleet_dra_claim_templates")
    if requests is not None and not isinstance(requests, (list, tuple)):
        return problems + ["gpufleet_dra_claim_templates must be a list of {namespaces, kinds, count}, got %r"
                           % (requests if not isinstance(requests, str) else requests[:80],)]
    return problems + ["gpufleet_dra_claim_templates: %s" % p for p in parse_requests(requests or [])[1]]


def _values_problems(values: Any) -> List[str]:
    if values is None:
        return []
    if not isinstance(values, Mapping):
        return ["dra_driver_values must be a mapping of chart values, got %r" % (values if not isinstance(values, str) else values[:80],)]
    try:
        driver_values({}, [], values)
    except DraValuesError as exc:
        return ["dra_driver_values: %s" % problem for problem in exc.problems]
    return []

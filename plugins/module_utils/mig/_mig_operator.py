# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operator-managed MIG: the mig-parted ConfigMap and the MIG manager's node labels (pure).

The GPU Operator's MIG manager applies the config named by the node label
``nvidia.com/mig.config`` from the ConfigMap ``migManager.config.name`` (key ``config.yaml``) and
reports ``nvidia.com/mig.config.state`` = pending | rebooting | success | failed (docs/reference/specs.md §7.2, §7.4).

Pure (no I/O) except ``wait_mig_config``, which polls through the K8sClient it is given.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core and the kubernetes client
    yaml = None

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import CORDON_OWNER, LEGACY_CORDON_MARKER

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (
    catalog_problems, config_name_problem, merged_configs, parse_config)

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
CONFIG_KEY = "config.yaml"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpufleet.sharing"}


class MigOperatorError(ProblemsError):
    """Invalid input; ``problems`` lists everything found."""


def merge_host_configs(configs: Optional[Mapping[str, Any]] = None,
                       configs_by_host: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """One mapping name -> items from the common ``configs`` and every host's own ``mig_configs``.

    All nodes read the same ConfigMap, so a name must mean the same layout everywhere: the same
    name with different items (from two hosts, or a host and the common configs) is an error."""
    merged: Dict[str, Any] = {}
    origin: Dict[str, str] = {}
    problems: List[str] = []
    sources: List[Tuple[str, Mapping[str, Any]]] = [("configs", configs or {})]
    for host in sorted(configs_by_host or {}):
        sources.append(("host %s" % host, (configs_by_host or {})[host] or {}))
    for source, named in sources:
        if not isinstance(named, Mapping):
            problems.append("%s: mig_configs must be a mapping of config name to items" % source)
            continue
        for name, items in named.items():
            name = str(name)
            if name in merged and merged[name] != items:
                problems.append("MIG config %r is defined differently by %s and %s; all nodes share one "
                                "ConfigMap, so give one of them another name" % (name, origin[name], source))
                continue
            merged[name] = items
            origin.setdefault(name, source)
    if problems:
        raise MigOperatorError(problems)
    return merged


def missing_selections(available: Mapping[str, Any], selected_by_host: Mapping[str, Optional[str]]) -> List[str]:
    """Problems for hosts whose selected config is not in the ConfigMap."""
    problems = []
    for host in sorted(selected_by_host):
        name = selected_by_host[host]
        if not name:
            problems.append("host %s: no MIG config selected (mig_config is empty)" % host)
        elif name not in available:
            problems.append("host %s: MIG config %r is not defined (known: %s)" % (
                host, name, ", ".join(sorted(available)[:20]) + (" ..." if len(available) > 20 else "")))
    return problems


def node_mig_status(node: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(MIG_CONFIG_LABEL), labels.get(MIG_STATE_LABEL)


def node_is_configured(node: Mapping[str, Any], config: str) -> bool:
    """Nothing to do: the node asks for ``config`` and the MIG manager reported success."""
    return node_mig_status(node) == (config, "success")


def failure_reason(node: Mapping[str, Any], events: List[Mapping[str, Any]]) -> str:
    """The MIG manager's explanation of a failed state: node annotations about MIG, then the most
    recent events on the node that mention MIG."""
    parts = []
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    for key in sorted(annotations):
        lowered = key.lower()
        if "mig" in lowered and key not in (CORDON_OWNER, LEGACY_CORDON_MARKER):
            parts.append("%s=%s" % (key, annotations[key]))
    related = [e for e in events if "mig" in ("%s %s" % (e.get("reason", ""), e.get("message", ""))).lower()]
    for event in related[-3:]:
        parts.append("event %s: %s" % (event.get("reason"), event.get("message")))
    return "; ".join(parts) if parts else "the MIG manager gave no reason (see its pod log)"


def operator_config_document(configs: Optional[Mapping[str, Any]], configs_by_host: Optional[Mapping[str, Any]],
                             include_default_configs: bool) -> Dict[str, Any]:
    """The mig-parted v1 document of the ConfigMap: every host's configs merged (plus the default
    named configs); raises MigOperatorError or _mig_parted.MigPartedError listing the problems."""
    extra = merge_host_configs(configs, configs_by_host)
    document = merged_configs(extra) if include_default_configs else {"version": "v1", "mig-configs": extra}
    problems = catalog_problems(parse_config(document, "mig_configs"), sorted(extra))
    if problems:
        raise MigOperatorError(problems)
    return document


def config_map_body(name: str, namespace: str, rendered: str) -> Dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
            "data": {CONFIG_KEY: rendered}}


def policy_config_name(policy: Optional[Mapping[str, Any]]) -> Optional[str]:
    """``spec.migManager.config.name`` of a ClusterPolicy (None when unset or no policy)."""
    spec = (policy or {}).get("spec") or {}
    return ((spec.get("migManager") or {}).get("config") or {}).get("name")


def undefined_config(document: Any, config: str, where: str) -> Optional[str]:
    """Why ``config`` cannot be applied from the parsed ``config.yaml`` of ConfigMap ``where``
    (namespace/name), or None when it is defined there."""
    configs = document.get("mig-configs") if isinstance(document, dict) else None
    if isinstance(configs, dict) and config in configs:
        return None
    return "MIG config %r is not defined in ConfigMap %s (key %s)%s" % (
        config, where, CONFIG_KEY, "; it defines: %s" % ", ".join(sorted(configs)) if isinstance(configs, dict) else "")


def config_map_problem(config_map: Optional[Mapping[str, Any]], config: str, where: str) -> Optional[str]:
    """Why ``config`` cannot be applied from ConfigMap ``where`` (namespace/name), or None when it can:
    the ConfigMap is missing, its ``config.yaml`` is not YAML, or it does not define ``config``."""
    if config_map is None:
        return "ConfigMap %s does not exist: create it first (gpufleet.sharing.mig_operator_config)" % where
    text = (config_map.get("data") or {}).get(CONFIG_KEY)
    try:
        document = yaml.safe_load(text) if text else None
    except yaml.YAMLError as exc:
        return "ConfigMap %s key %s is not valid YAML: %s" % (where, CONFIG_KEY, exc)
    return undefined_config(document, config, where)


def changed_in_use(before_text: Optional[str], after_text: str, nodes: List[Mapping[str, Any]],
                   where: str) -> List[str]:
    """Problems for configs whose items would change while a node's ``nvidia.com/mig.config`` names them.

    The MIG manager reads the ConfigMap when it applies, and it applies the current label again
    whenever its pod starts (docs/reference/specs.md §7.8): new items under a name in use would change
    that node's layout at the next restart of the pod, with no cordon and no drain. ``before_text`` is
    the ``config.yaml`` stored now, ``after_text`` the one about to be written."""
    try:
        before = yaml.safe_load(before_text) if before_text else None
    except yaml.YAMLError:
        return []
    old = before.get("mig-configs") if isinstance(before, dict) else None
    new = (yaml.safe_load(after_text) or {}).get("mig-configs") or {}
    users: Dict[str, List[str]] = {}
    for node in nodes:
        name = node_mig_status(node)[0]
        if isinstance(old, dict) and name in old and name in new and old[name] != new[name]:
            users.setdefault(name, []).append(str((node.get("metadata") or {}).get("name")))
    return ["MIG config %r in ConfigMap %s would get other items while node(s) %s use it (label %s): their MIG "
            "manager would apply the new layout, without a drain, the next time its pod restarts. Give the new "
            "layout a new name (mig_config and mig_configs); the rollout then drains each node before its MIG "
            "manager changes it" % (name, where, ", ".join(sorted(users[name])), MIG_CONFIG_LABEL)
            for name in sorted(users)]


def option_problems(config: str, timeout: int, drain_timeout: int, poll_interval: float) -> List[str]:
    """What is wrong with mig_node_config's options (empty when nothing is)."""
    problems = []
    if not config.strip():
        problems.append("config must not be empty")
    elif config_name_problem(config, "config"):
        problems.append(str(config_name_problem(config, "config")))
    if poll_interval <= 0 or timeout < 0 or drain_timeout < 0:
        problems.append("timeout and drain_timeout must be >= 0 and poll_interval > 0")
    return problems


def relabel_step(previous: Optional[str], state: Optional[str], config: str) -> str:
    """What makes the MIG manager apply ``config`` to a node whose labels say (previous, state):

    - ``"wait"``: it already works on this config (pending, rebooting);
    - ``"restart"``: same label but failed or never processed; the MIG manager only reacts to label
      changes and applies the current label when it starts, so its pod on the node is restarted
      (after the stale state label is dropped);
    - ``"relabel"``: set the new config and drop the old state together, so that a stale
      ``success`` is never taken for the new config being applied."""
    if previous == config:
        return "wait" if state in ("pending", "rebooting") else "restart"
    return "relabel"


class MigConfigFailed(Exception):
    """The MIG manager reported ``failed``; ``reason`` is its explanation (see failure_reason)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def wait_mig_config(k8s: K8sClient, node_name: str, config: str, timeout: float, interval: float,
                    progress: Callable[[str, float, Any], None], history: List[Dict[str, Any]]) -> None:
    """Wait until the MIG manager reports ``success`` for ``config`` on the node.

    ``history`` (the caller's list, so that it is reported even on failure) gets each state seen,
    with the seconds elapsed. Raises MigConfigFailed (state ``failed``), K8sError (the node is gone,
    or someone else changed its MIG label) or K8sTimeout (detail: the last state)."""
    start = k8s.now()

    def probe() -> Tuple[bool, Any]:
        live = k8s.get("Node", node_name)
        if live is None:
            raise K8sError("node %s disappeared while waiting for its MIG change" % node_name)
        wanted, state = node_mig_status(live)
        if not history or history[-1]["state"] != state:
            history.append({"state": state, "elapsed": round(k8s.now() - start, 1)})
        if wanted != config:
            raise K8sError("the label %s on %s was changed to %r by someone else while waiting"
                           % (MIG_CONFIG_LABEL, node_name, wanted))
        if state == "failed":
            reason = failure_reason(live, k8s.events_for("Node", node_name))
            raise MigConfigFailed("the MIG manager failed to apply %r on %s: %s. The node stays cordoned; "
                                  "fix the cause and run again" % (config, node_name, reason), reason)
        return state == "success", state or "no state yet"

    k8s.wait_for("MIG config %s on %s" % (config, node_name), probe, timeout, interval, progress)

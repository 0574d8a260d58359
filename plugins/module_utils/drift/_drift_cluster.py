# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift rows of the cluster side (pure): the operator's release and values (gpu_operator in check
mode), the sharing configs and labels (gpu_sharing in check mode), the operator's state labels,
our annotations and cordons on the nodes, the rollout lock (fleet_info's read), and the Kueue team quotas
(gpu_quotas with state verified)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift import CLUSTER, ROLLOUT, SITE, Row, row
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import format_time, parse_time

MIG_STATE = "nvidia.com/mig.config.state"
# The driver upgrade controller's node label (NVIDIA/k8s-operator-libs pkg/upgrade/consts.go,
# UpgradeStateLabelKeyFmt "nvidia.com/%s-driver-upgrade-state" with the driver name "gpu").
DRIVER_UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
DRIVER_UPGRADE_DONE = "upgrade-done"
ROLLOUT_ANNOTATION = "gpufleet.sharing/rollout"
PAUSED_ANNOTATION = "gpufleet.sharing/paused-operands"
CORDONED_BY = "gpufleet.sharing/cordoned-by"
_CHANGE = re.compile(r"^(?P<path>[^:]+): (?:(?P<before>.*) -> (?P<after>.*)|added (?P<added>.*)|removed \(was (?P<was>.*)\))$")


def operator_rows(result: Mapping[str, Any], chart_version: str) -> List[Row]:
    """gpu_operator's check-mode answer: the release missing, its chart version, one row per value path.
    ``unchanged`` is no drift (its ``values_changes`` may list values carried forward from the live
    ClusterPolicy, which the release does not hold); a value path carried forward is no row."""
    action = result.get("action")
    if not result or result.get("skipped") or action == "unchanged":
        return []
    if result.get("failed"):
        return [row(CLUSTER, "GPU Operator plan", "a plan", result.get("msg"), SITE)]
    if action == "installed":
        return [row(CLUSTER, "GPU Operator release", "installed", "absent", SITE)]
    rows = []
    found = (result.get("release") or {}).get("chart_version")
    if chart_version and found and found.lstrip("v") != chart_version.lstrip("v"):
        rows.append(row(CLUSTER, "GPU Operator chart version", chart_version, found, SITE))
    for line in result.get("values_changes") or []:
        match = _CHANGE.match(line)
        if match and _carried(match.group("path"), result.get("carried_forward") or []):
            continue
        if not match:
            rows.append(row(CLUSTER, "GPU Operator value", "as planned", line, SITE))
            continue
        planned = match.group("after") if match.group("after") is not None else match.group("added")
        rows.append(row(CLUSTER, "GPU Operator value %s" % match.group("path"), planned,
                        match.group("before") if match.group("before") is not None else match.group("was"), SITE))
    return rows


def _carried(path: str, carried: List[str]) -> bool:
    return any(path == item or item.startswith(path + ".") or path.startswith(item + ".") for item in carried)


def sharing_rows(result: Mapping[str, Any], hosts_by_node: Mapping[str, str]) -> List[Row]:
    """gpu_sharing's check-mode answer: the ConfigMap, the ClusterPolicy wiring, one row per node label."""
    if not result or result.get("skipped"):
        return []
    if result.get("failed"):
        return [row(CLUSTER, "sharing plan", "a plan", result.get("msg"), SITE)]
    rows = []
    configmap = result.get("configmap") or {}
    if configmap.get("action") not in (None, "unchanged"):
        found = "absent" if configmap["action"] == "created" else "differs in %s" % ", ".join(configmap.get("changed_keys") or ["?"])
        rows.append(row(CLUSTER, "device-plugin ConfigMap %s" % configmap.get("name"), "as planned", found, SITE))
    patch = result.get("cluster_policy_patch") or {}
    if patch:
        rows.append(row(CLUSTER, "ClusterPolicy device-plugin config", _flat(patch), "differs", SITE))
    for node, change in sorted((result.get("labels_changed") or {}).items()):
        rows.append(row(node, "label nvidia.com/device-plugin.config", change.get("after"), change.get("before"),
                        SITE + " --limit %s" % hosts_by_node.get(node, node)))
    return rows


def quota_rows(result: Mapping[str, Any]) -> List[Row]:
    """gpu_quotas' answer with ``state: verified`` (``fail_on_mismatch: false``): one row per check that is not
    ok - a team's live nominal quota that differs from the plan, a flavor whose teams' quotas exceed what its
    nodes advertise now. A failed answer is one row (drift cannot say "no drift" when it could not compare)."""
    if not result or result.get("skipped"):
        return []
    if result.get("failed"):
        return [row(CLUSTER, "Kueue team quotas", "as planned", "cannot be compared: %s" % result.get("msg"), SITE)]
    return [row(CLUSTER, "Kueue %s %s %s" % (c.get("node"), c.get("kind"), c.get("name")), c.get("expected"),
                None if c.get("actual") in (None, "None") else c.get("actual"), SITE)
            for c in result.get("checks") or [] if not c.get("ok")]


def _flat(tree: Any, prefix: str = "") -> str:
    if isinstance(tree, dict):
        return ", ".join(_flat(value, "%s%s." % (prefix, key)) for key, value in sorted(tree.items()))
    return "%s=%s" % (prefix.rstrip("."), tree)


def node_rows(node: str, state: Mapping[str, Any], host: str, operator_mig: bool) -> List[Row]:
    """One node's state labels, our annotations and our cordon (``state``: fleet_info's entry)."""
    labels, notes = state.get("labels") or {}, state.get("annotations") or {}
    rows = []
    mig_state = labels.get(MIG_STATE)
    if mig_state is not None and mig_state != "success":
        converge = (SITE + " --limit %s" % host) if operator_mig else "kubectl label node %s %s-" % (node, MIG_STATE)
        since = state.get("mig_failed_since") if mig_state == "failed" else None
        rows.append(row(node, "label " + MIG_STATE, "success" if operator_mig else None, mig_state, converge, since))
    upgrade = labels.get(DRIVER_UPGRADE_STATE)
    if upgrade not in (None, "", DRIVER_UPGRADE_DONE):
        rows.append(row(node, "label " + DRIVER_UPGRADE_STATE, DRIVER_UPGRADE_DONE, upgrade,
                        "the operator's driver upgrade controller (kubectl describe node %s)" % node))
    cordon = " (node cordoned)" if state.get("unschedulable") else ""
    if ROLLOUT_ANNOTATION in notes:
        rows.append(row(node, "annotation " + ROLLOUT_ANNOTATION, None, notes[ROLLOUT_ANNOTATION] + cordon,
                        ROLLOUT % host, state.get("cordoned_since")))
    elif CORDONED_BY in notes:
        found = "cordoned by run %s" % notes[CORDONED_BY] if cordon else "annotation left on a schedulable node (run %s)" % notes[CORDONED_BY]
        rows.append(row(node, "cordon " + CORDONED_BY, None, found, ROLLOUT % host, state.get("cordoned_since")))
    if PAUSED_ANNOTATION in notes:
        rows.append(row(node, "annotation " + PAUSED_ANNOTATION, None, notes[PAUSED_ANNOTATION], ROLLOUT % host))
    return rows


def lock_rows(lease: Optional[Mapping[str, Any]], now: float, missing_namespace: Optional[str] = None) -> List[Row]:
    """The rollout lock: held (a rollout runs) or stale (its holder stopped without releasing it); unknown when
    its namespace does not exist (fleet_info: no Lease can be there, and none can be taken)."""
    if missing_namespace:
        return [row(CLUSTER, "rollout lock", "free",
                    "unknown: namespace %s does not exist (gpufleet_rollout_lock_namespace), so the lock cannot be read "
                    "and a rollout could not take it" % missing_namespace,
                    "kubectl create namespace %s, or set gpufleet_rollout_lock_namespace to an existing namespace"
                    % missing_namespace)]
    spec = (lease or {}).get("spec") or {}
    if not lease:
        return []
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    duration = spec.get("leaseDurationSeconds")
    expiry = parse_time(renewed) + int(duration) if renewed and duration is not None else None
    holder = spec.get("holderIdentity")
    if expiry is not None and expiry > now:
        return [row(CLUSTER, "rollout lock", "free", "held by %s until %s" % (holder, format_time(expiry)),
                    "wait for that run to end", renewed)]
    return [row(CLUSTER, "rollout lock", "free", "stale: held by %s, expired %s" % (holder, format_time(expiry) if expiry else "never renewed"),
                "ansible-playbook playbooks/rollout.yml (takes the expired lock over and releases it)", renewed)]


def cluster_rows(operator: Mapping[str, Any], chart_version: str, sharing: Mapping[str, Any],
                 nodes: Mapping[str, Mapping[str, Any]], hosts_by_node: Mapping[str, str],
                 operator_mig: Mapping[str, bool], lease: Optional[Mapping[str, Any]], now: float,
                 lock_missing_namespace: Optional[str] = None, quotas: Optional[Mapping[str, Any]] = None) -> List[Row]:
    rows = (operator_rows(operator, chart_version) + sharing_rows(sharing, hosts_by_node)
            + lock_rows(lease, now, lock_missing_namespace))
    rows += quota_rows(quotas or {})
    for node in sorted(nodes):
        rows += node_rows(node, nodes[node], hosts_by_node.get(node, node), bool(operator_mig.get(node)))
    return rows


def summary(rows: List[Row], nodes: int) -> Dict[str, Any]:
    drifted = sorted(set(r["node"] for r in rows))
    return {"rows": len(rows), "nodes": nodes, "drifted": drifted, "ok": not rows}

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pausing and restoring the GPU Operator's operands of one node around a host MIG change (pure).

The MIG manager's way (docs/reference/specs.md §7.6): each operand's DaemonSet selects
``nvidia.com/gpu.deploy.<operand>=true``; setting the label to ``paused-for-mig-change`` makes the
pod go, so it no longer holds the GPU. Unlike the MIG manager, the previous value of every label
is recorded in the node annotation ``gpufleet.sharing/paused-operands`` (JSON, label -> value or
null when absent) before anything is paused, and restored from there, so a ``false`` stays
``false`` and an interrupted run can be finished by a re-run.

Third-party GPU clients (node agents such as monitoring or health checkers) select
``nvidia.com/gpu.deploy.client``, which the operator sets to ``true`` on GPU nodes from v26.7.0
(controllers/state_manager.go, gpu-operator #2607). As the MIG manager of mig-parted v0.15.0 does
(pkg/mig/reconfigure/reconfigure.go, mig-parted #426), that label is paused only when the node
carries it with a value other than ``false``, and the pause waits until every DaemonSet pod on the
node whose nodeSelector uses the key is gone, in any namespace. Its previous value is recorded and
restored like the operands' (the MIG manager writes back ``true``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
PAUSED = "paused-for-mig-change"
PAUSED_ANNOTATION = "gpufleet.sharing/paused-operands"
CLIENT_LABEL = DEPLOY_PREFIX + "client"

# Operand key -> the ``app`` label values of its pods (waited for); NVIDIA's list and order.
# The MPS control daemon also selects nvidia.com/gpu.deploy.device-plugin=true, so it goes with it.
OPERAND_APPS: Dict[str, Tuple[str, ...]] = {
    "device-plugin": ("nvidia-device-plugin-daemonset", "nvidia-device-plugin-mps-control-daemon"),
    "gpu-feature-discovery": ("gpu-feature-discovery",),
    "dcgm-exporter": ("nvidia-dcgm-exporter",),
    "dcgm": ("nvidia-dcgm",),
    "nvsm": (),
}
DEFAULT_OPERANDS: List[str] = list(OPERAND_APPS)
# Pods that come back by themselves after a restore (waited for as Ready when their operand was on).
READY_APPS: Dict[str, Tuple[str, ...]] = {
    "device-plugin": ("nvidia-device-plugin-daemonset",),
    "gpu-feature-discovery": ("gpu-feature-discovery",),
    "dcgm-exporter": ("nvidia-dcgm-exporter",),
    "dcgm": ("nvidia-dcgm",),
    "nvsm": (),
}

# The validators (docs/reference/specs.md §7.7). The pods of the CUDA and plugin validations ran
# to completion on the old devices: deleted with the pause, not waited for. The operator validator
# validates once, when it starts: restarted after the restore so that it validates the new devices.
VALIDATION_APPS: Tuple[str, ...] = ("nvidia-cuda-validator", "nvidia-device-plugin-validator")
VALIDATOR_APP = "nvidia-operator-validator"

Record = Dict[str, Optional[str]]


def unknown_operands(operands: Sequence[str]) -> List[str]:
    return [name for name in operands if name not in OPERAND_APPS]


def operand_option_problems(operands: Sequence[str]) -> List[str]:
    """The ``operands`` option: at least one, each an operand of the GPU Operator that the collection knows."""
    if not operands:
        return ["operands: empty: name at least one operand (or leave the option out for the default list)"]
    unknown = unknown_operands(operands)
    return ["operands: unknown operand(s) %s; known: %s" % (", ".join(unknown), ", ".join(DEFAULT_OPERANDS))] if unknown else []


def deploy_label(operand: str) -> str:
    return DEPLOY_PREFIX + operand


def node_labels(node: Mapping[str, Any]) -> Dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def node_record(node: Mapping[str, Any]) -> Optional[Record]:
    """The recorded previous values, or None when the node carries no record.

    Raises ValueError when the annotation is not a JSON object of label -> string or null."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(PAUSED_ANNOTATION)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("annotation %s is not JSON: %s" % (PAUSED_ANNOTATION, exc)) from exc
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and k.startswith(DEPLOY_PREFIX) and (v is None or isinstance(v, str))
            for k, v in data.items()):
        raise ValueError("annotation %s must map nvidia.com/gpu.deploy.* labels to a value or null"
                         % PAUSED_ANNOTATION)
    return data


def encode_record(record: Record) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def plan_pause(labels: Mapping[str, str], operands: Sequence[str], earlier: Optional[Record],
               ) -> Tuple[Record, Dict[str, str]]:
    """(record, label changes). The record keeps what an earlier, interrupted pause recorded (the
    labels then already say ``paused-for-mig-change``); only labels that are ``true`` are paused."""
    record: Record = dict(earlier or {})
    changes: Dict[str, str] = {}
    for operand in operands:
        key = deploy_label(operand)
        current = labels.get(key)
        if key not in record:
            record[key] = current
        if current == "true":
            changes[key] = PAUSED
    return record, changes


def plan_client_pause(labels: Mapping[str, str], record: Record) -> Tuple[Record, Dict[str, str]]:
    """(record, label changes) for the third-party clients' label: nothing when the node does not
    carry it (or carries it empty); recorded once; paused unless ``false`` or already paused."""
    current = labels.get(CLIENT_LABEL)
    if not current:
        return dict(record), {}
    updated: Record = dict(record)
    updated.setdefault(CLIENT_LABEL, current)
    return updated, ({CLIENT_LABEL: PAUSED} if current not in ("false", PAUSED) else {})


def controller_kind(obj: Mapping[str, Any]) -> Optional[str]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind")
    return None


def client_pods(pods: Sequence[Mapping[str, Any]]) -> List[str]:
    """``namespace/name`` of the DaemonSet pods whose nodeSelector uses the client label (also
    terminating ones: a pod holds the GPU until it is gone)."""
    found = []
    for pod in pods:
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        if CLIENT_LABEL in selector and controller_kind(pod) == "DaemonSet":
            meta = pod.get("metadata") or {}
            found.append("%s/%s" % (meta.get("namespace", ""), meta.get("name", "")))
    return sorted(found)


def plan_restore(labels: Mapping[str, str], record: Record) -> Dict[str, Optional[str]]:
    """Label changes that put every paused label back to its recorded value (None removes it).

    A label someone changed since (no longer ``paused-for-mig-change``) is left as it is."""
    changes: Dict[str, Optional[str]] = {}
    for key, previous in sorted(record.items()):
        if labels.get(key) == PAUSED and previous != PAUSED:
            changes[key] = previous
    return changes


def apps_to_wait(record: Record, values: Mapping[str, Optional[str]], table: Mapping[str, Tuple[str, ...]],
                 ) -> List[str]:
    """``app`` labels of the operands whose label is ``true`` in ``values`` (looked up by record key)."""
    apps: List[str] = []
    for key in sorted(record):
        operand = key[len(DEPLOY_PREFIX):]
        if values.get(key) == "true":
            apps.extend(table.get(operand, ()))
    return apps


def app_of(pod: Mapping[str, Any]) -> Optional[str]:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("app")


def pods_by_app(pods: Sequence[Mapping[str, Any]], apps: Sequence[str]) -> Dict[str, List[Mapping[str, Any]]]:
    found: Dict[str, List[Mapping[str, Any]]] = dict((app, []) for app in apps)
    for pod in pods:
        app = app_of(pod)
        if app in found:
            found[app].append(pod)
    return found

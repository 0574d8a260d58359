# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification: compare what nodes advertise with what the plan says, judge pod logs, render reports.

Pure logic, no I/O (``gpu_verify`` does the API calls). Expectations come from
``_sharing.expected_node``; this file never computes capacity itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import image_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import registry_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import (
    number_problems, object_name_problems, qualified_name_problem)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import RESOURCE_PREFIX, SharingConfig
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode, product_matches

try:
    import jmespath

    HAS_JMESPATH = True
except ImportError:  # pragma: no cover - jmespath ships with ansible's usual controller deps
    jmespath = None
    HAS_JMESPATH = False

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpufleet.sharing"
RUN_ID_LABEL = "gpufleet.sharing/verify-run"
NODE_LABEL = "gpufleet.sharing/verify-node"

# nvidia-smi -L lines (docs/reference/specs.md §4.7): "GPU 0: <name> (UUID: GPU-...)" and "  MIG 1g.10gb  Device  0: (UUID: MIG-...)"
_RUN_ID_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?")
# A verification pod is stopped by the kubelet this long after pod_timeout even if nobody deletes
# it (the module killed mid-run): activeDeadlineSeconds = pod_timeout + DEADLINE_MARGIN.
DEADLINE_MARGIN = 60
_GPU_LINE_RE = re.compile(r"^GPU \d+: .+\(UUID: GPU-[^)]+\)\s*$")
_MIG_LINE_RE = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: MIG-[^)]+\)\s*$")


@dataclass(frozen=True)
class Check:
    """One verified fact. ``kind``: capacity, allocatable, label, pod, user, plan."""

    node: str
    kind: str
    name: str
    expected: str
    actual: str
    ok: bool
    message: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "name": self.name,
            "expected": self.expected,
            "actual": self.actual,
            "ok": self.ok,
            "message": self.message,
        }


def _status_map(node_obj: Mapping[str, Any], section: str) -> Dict[str, str]:
    return dict(((node_obj.get("status") or {}).get(section) or {}))


def _quantity(value: Optional[str]) -> Optional[int]:
    """Extended resources are plain integers; anything else is reported as-is by the caller."""
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _nvidia(name: str) -> bool:
    return name.startswith(RESOURCE_PREFIX)


def compare_node(expected: ExpectedNode, node_obj: Optional[Mapping[str, Any]]) -> List[Check]:
    """Every resource (capacity and allocatable) and GFD label of one node against the plan.

    A resource expected 0 also matches an absent one (kubelet keeps a stale 0 or drops it).
    An ``nvidia.com/*`` resource the plan does not know and the node advertises (> 0) is a mismatch.
    """
    node = expected.node
    if node_obj is None:
        return [Check(node, "node", "exists", "node exists", "not found", False, "node %s is not in the cluster" % node)]
    checks: List[Check] = []
    labels = dict(((node_obj.get("metadata") or {}).get("labels") or {}))
    for section, kind in (("capacity", "capacity"), ("allocatable", "allocatable")):
        advertised = _status_map(node_obj, section)
        for resource in sorted(expected.resources):
            want = expected.resources[resource]
            raw = advertised.get(resource)
            have = _quantity(raw)
            ok = have == want or (want == 0 and raw is None)
            shown = "absent" if raw is None else str(raw)
            message = "" if ok else "%s %s is %s, the plan says %d" % (kind, resource, shown, want)
            checks.append(Check(node, kind, resource, str(want), shown, ok, message))
        for resource in sorted(advertised):
            if _nvidia(resource) and resource not in expected.resources and (_quantity(advertised[resource]) or 0) != 0:
                checks.append(
                    Check(
                        node,
                        kind,
                        resource,
                        "absent",
                        str(advertised[resource]),
                        False,
                        "%s %s=%s is not in the plan" % (kind, resource, advertised[resource]),
                    )
                )
    for key in sorted(expected.labels):
        want = expected.labels[key]
        have = labels.get(key)
        ok = have == want
        checks.append(
            Check(node, "label", key, want, "absent" if have is None else have, ok,
                  "" if ok else "label %s is %s, the plan says %s" % (key, "absent" if have is None else repr(have), repr(want)))
        )
    for key in sorted(expected.product_suffixes):
        suffix = expected.product_suffixes[key]
        have = labels.get(key)
        ok = product_matches(have, suffix)
        want = "<product>%s" % suffix
        checks.append(
            Check(node, "label", key, want, "absent" if have is None else have, ok,
                  "" if ok else "label %s is %s, the plan says %s" % (key, "absent" if have is None else repr(have), want))
        )
    return checks


# --------------------------------------------------------------------------------------------
# Verification pods


@dataclass(frozen=True)
class PodSpecWanted:
    """One verification pod: which node, which resource, which device it must see."""

    node: str
    resource: str
    device_kind: str  # "gpu" | "mig"
    mig_profile: Optional[str] = None
    kind: Any = None  # the DRA device kind (``_dra_claims.DeviceKind``) of the pod's claim; None: a device-plugin resource
    count: int = 0  # how many devices the pod must see exactly (0: any number of full GPUs)

    @property
    def label(self) -> str:
        """What the pod asks for: the device kind under DRA, else the resource."""
        return self.kind.name if self.kind is not None else self.resource

    def describe(self) -> str:
        if self.device_kind == "mig":
            return "MIG %s" % self.mig_profile
        return "%d full GPU" % self.count if self.count else "full GPU"


def _quantity(value: Any) -> int:
    try:
        return int(float(str(value)))
    except ValueError:
        return 0


def held_resources(pods: Sequence[Mapping[str, Any]], skip_label: Tuple[str, str] = (MANAGED_BY_LABEL, MANAGED_BY_VALUE)
                   ) -> Dict[str, int]:
    """NVIDIA devices requested by a node's pods that hold them now (not finished), except ours."""
    held: Dict[str, int] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(skip_label[0]) == skip_label[1] or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            merged = dict(resources.get("requests") or {}, **(resources.get("limits") or {}))
            for name, value in merged.items():
                if name.startswith("nvidia.com/"):
                    held[name] = held.get(name, 0) + _quantity(value)
    return held


def _fully_held(expected: ExpectedNode, held: Mapping[str, int]) -> List[str]:
    return [r for r in sorted(expected.resources) if 0 < expected.resources[r] <= held.get(r, 0)]


def held_checks(expected: ExpectedNode, held: Mapping[str, int]) -> List[Check]:
    """A resource whose every device a running pod holds (issue 38: a per-GPU MIG change keeps the pods of
    the untouched GPUs) gets no verification pod: it would never be scheduled. Said, not failed."""
    return [Check(expected.node, "pod", resource, "a verification pod",
                  "not run: all %d in use by running pods" % expected.resources[resource], True)
            for resource in _fully_held(expected, held)]


def pods_for(expected: ExpectedNode, held: Optional[Mapping[str, int]] = None) -> List[PodSpecWanted]:
    """One pod per advertised resource type with capacity > 0 (stable order), except those whose
    devices running pods hold entirely (``held``, see held_checks)."""
    wanted: List[PodSpecWanted] = []
    skipped = set(_fully_held(expected, held or {}))
    for resource in sorted(expected.resources):
        if expected.resources[resource] <= 0 or resource in skipped:
            continue
        record = expected.record_for(resource)
        wanted.append(PodSpecWanted(expected.node, resource, record.device_kind, record.mig_profile))
    return wanted


def _same_profile(seen: str, wanted: str) -> bool:
    # The resource name turns '+' into '.', nvidia-smi prints the profile with '+'.
    return seen.replace("+", ".") == wanted.replace("+", ".")


def judge_pod_log(wanted: PodSpecWanted, log: str) -> Tuple[bool, str]:
    """Did the pod get the kind of device it asked for? (ok, what was seen)."""
    gpu_lines = [line for line in log.splitlines() if _GPU_LINE_RE.match(line)]
    mig_profiles = [m.group(1) for m in (_MIG_LINE_RE.match(line) for line in log.splitlines()) if m]
    if wanted.device_kind == "mig":
        if len(mig_profiles) == 1 and _same_profile(mig_profiles[0], wanted.mig_profile or ""):
            return True, "MIG %s" % mig_profiles[0]
        if not mig_profiles:
            return False, "no MIG device in the log" + (" (%d full GPU line(s))" % len(gpu_lines) if gpu_lines else "")
        return False, "MIG devices %s" % ", ".join(mig_profiles)
    if gpu_lines and not mig_profiles and wanted.count in (0, len(gpu_lines)):
        return True, "%d GPU" % len(gpu_lines)
    if gpu_lines and not mig_profiles:
        return False, "%d GPUs instead of %d" % (len(gpu_lines), wanted.count)
    if mig_profiles:
        return False, "MIG device(s) %s instead of a full GPU" % ", ".join(mig_profiles)
    return False, "no GPU line in the log"


def pod_check(wanted: PodSpecWanted, outcome: str, log: str = "", reason: str = "") -> Check:
    """``outcome``: Succeeded, Failed or Timeout (with ``reason`` from the pod status / events)."""
    expected = wanted.describe()
    if outcome == "Succeeded":
        ok, seen = judge_pod_log(wanted, log)
        return Check(wanted.node, "pod", wanted.label, expected, seen, ok,
                     "" if ok else "pod for %s saw %s, expected %s" % (wanted.label, seen, expected))
    if outcome == "Timeout":
        return Check(wanted.node, "pod", wanted.label, expected, "timeout", False,
                     "pod for %s did not finish: %s" % (wanted.label, reason or "no reason reported"))
    return Check(wanted.node, "pod", wanted.label, expected, outcome.lower(), False,
                 "pod for %s %s: %s" % (wanted.label, outcome.lower(), reason or (log.strip()[-300:] or "no log")))


def pending_reason(pod: Optional[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> str:
    """Why a pod is not running: the newest FailedScheduling (or any warning) event, else its status."""
    for event in reversed(list(events)):
        if event.get("reason") == "FailedScheduling":
            return "FailedScheduling: %s" % (event.get("message") or "").strip()
    for event in reversed(list(events)):
        if event.get("type") == "Warning":
            return "%s: %s" % (event.get("reason"), (event.get("message") or "").strip())
    status = (pod or {}).get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") == "False" and cond.get("reason"):
            return "%s: %s" % (cond.get("reason"), cond.get("message") or "")
    for cstatus in status.get("containerStatuses") or []:
        waiting = (cstatus.get("state") or {}).get("waiting")
        if waiting:
            return "%s: %s" % (waiting.get("reason"), waiting.get("message") or "")
    return "phase %s" % (status.get("phase") or "unknown")


def _content(cfg: SharingConfig) -> Dict[str, Any]:
    """What the device plugin loads from a config: everything but the node choice."""
    return {k: v for k, v in replace(cfg, nodes=(), node_selector=()).as_dict().items() if k not in ("nodes", "node_selector")}


def config_checks(planned: Mapping[str, SharingConfig], live: Mapping[str, SharingConfig], configmap: str) -> List[Check]:
    """Each planned config that the ClusterPolicy's ConfigMap holds must hold what the plan renders
    (its strategy, replicas, flags such as sharedDevicesAllocationPolicy, docs/reference/specs.md
    §9.11); a key not there yet is left to the node-label checks."""
    checks: List[Check] = []
    for name in sorted(set(planned) & set(live)):
        want, have = _content(planned[name]), _content(live[name])
        differ = sorted(k for k in want if want[k] != have.get(k))
        checks.append(Check("(cluster)", "config", name, "as planned", "as planned" if not differ else "differs", not differ,
                            "" if not differ else "ConfigMap %s key %s differs from the plan in %s: %s" % (
                                configmap, name, ", ".join(differ), "; ".join("%s is %r, the plan says %r" % (
                                    k, have.get(k), want[k]) for k in differ))))
    return checks


def option_problems(params: Mapping[str, Any]) -> List[str]:
    """Every bad gpu_verify option, before any request (each problem names the option)."""
    p = params
    problems = object_name_problems([("namespace", "Namespace", p["namespace"]),
                                     ("operator_namespace", "Namespace", p["operator_namespace"]),
                                     ("cluster_policy_name", "ClusterPolicy", p["cluster_policy_name"])]
                                    + [("nodes", "Node", node) for node in p["nodes"]])
    problems += number_problems(p, {"pod_timeout": 1, "pod_run_as_user": 1, "parallel": 1, "wait_timeout": 0},
                                ["poll_interval", "wait_interval"])
    if p["run_id"] is not None and not _RUN_ID_RE.fullmatch(p["run_id"]):
        problems.append("run_id %r must be 1-16 lower-case letters, digits or '-' (it goes into pod names and labels)"
                        % p["run_id"])
    problems += ["%s must not be empty" % option for option in ("pod_command", "pod_image") if not p[option]]
    problems += [x for x in (image_problem(o, p.get(o)) for o in ("pod_image", "probe_image") if p.get(o)) if x]
    problems += registry_problems(p.get("registry"))
    for option in ("pod_annotations", "namespace_labels"):
        problems += [x for x in (qualified_name_problem(option, key) for key in p[option] or {}) if x]
    return problems


def pod_name(run_id: str, node: str, resource: str, index: int) -> str:
    """DNS-1123 pod name: gpufleet-verify-<run>-<index>-<node/resource hint>, <= 63 chars."""
    hint = re.sub(r"[^a-z0-9-]+", "-", ("%s-%s" % (node, resource.replace(RESOURCE_PREFIX, ""))).lower()).strip("-")
    head = "gpufleet-verify-%s-%d-" % (run_id, index)
    return (head + hint)[:63].rstrip("-")


def pod_manifest(wanted: PodSpecWanted, name: str, namespace: str, run_id: str, image: str, command: Sequence[str],
                 extra_labels: Optional[Mapping[str, str]] = None, tolerations: Optional[Sequence[Mapping[str, Any]]] = None,
                 run_as_user: int = 65534, hostname: Optional[str] = None, deadline: int = 180,
                 image_pull_secrets: Sequence[str] = ()) -> Dict[str, Any]:
    """A restricted, single-shot pod that asks for one unit of the resource on one node.

    It goes through the scheduler (nodeSelector on the node's hostname label, not spec.nodeName),
    so a resource the node lacks leaves the pod Pending with a FailedScheduling event to report.
    ``deadline`` (activeDeadlineSeconds) stops it even when the run that made it was killed.
    """
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, RUN_ID_LABEL: run_id, NODE_LABEL: wanted.node[:63]}
    labels.update(extra_labels or {})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {"gpufleet.sharing/resource": wanted.label}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline,
            "nodeSelector": {"kubernetes.io/hostname": hostname or wanted.node},
            "automountServiceAccountToken": False,
            "tolerations": list(tolerations or [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": run_as_user,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "verify",
                    "image": image,
                    "command": list(command),
                    "resources": {"limits": {wanted.resource: 1}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                }
            ],
        },
    }
    if wanted.kind is not None:  # DRA: the pod's own claim (named after the pod), no extended resource
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    if image_pull_secrets:
        pod["spec"]["imagePullSecrets"] = [{"name": name} for name in image_pull_secrets]
    return pod


# --------------------------------------------------------------------------------------------
# User checks (JMESPath over the node object)


def user_checks(node: str, node_obj: Optional[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> List[Check]:
    """Each spec: ``name``, ``expression`` (JMESPath over the node object), optional ``equals``.

    Without ``equals`` the result must be truthy. Bad expressions are reported as failed checks.
    """
    checks: List[Check] = []
    if not specs:
        return checks
    if not HAS_JMESPATH:
        return [Check(node, "user", str(s.get("name")), "jmespath", "missing", False,
                      "the jmespath Python library is required for user checks") for s in specs]
    for spec in specs:
        name = str(spec.get("name") or spec.get("expression"))
        expression = str(spec.get("expression"))
        has_equals = "equals" in spec and spec.get("equals") is not None
        wanted = spec.get("equals")
        try:
            result = jmespath.search(expression, node_obj or {})
        except Exception as exc:  # jmespath raises several parser/lexer error types
            checks.append(Check(node, "user", name, expression, "error", False, "bad JMESPath %r: %s" % (expression, exc)))
            continue
        if has_equals:
            ok = result == wanted
            expected = json.dumps(wanted)
        else:
            ok = bool(result)
            expected = "truthy"
        actual = json.dumps(result, sort_keys=True, default=str)
        checks.append(Check(node, "user", name, expected, actual, ok,
                            "" if ok else "%s: %s gave %s, expected %s" % (name, expression, actual, expected)))
    return checks


# --------------------------------------------------------------------------------------------
# Report


def summarize(checks: Sequence[Check]) -> Dict[str, Any]:
    nodes: Dict[str, Dict[str, int]] = {}
    for check in checks:
        entry = nodes.setdefault(check.node, {"passed": 0, "failed": 0})
        entry["passed" if check.ok else "failed"] += 1
    failed = sum(1 for c in checks if not c.ok)
    return {
        "ok": failed == 0,
        "checks": len(checks),
        "failed": failed,
        "nodes": len(nodes),
        "failed_nodes": sorted(n for n, v in nodes.items() if v["failed"]),
    }


def build_report(checks: Sequence[Check], expected: Sequence[ExpectedNode], run_id: str,
                 extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    report = {
        "run_id": run_id,
        "summary": summarize(checks),
        "nodes": [e.as_dict() for e in sorted(expected, key=lambda e: e.node)],
        "checks": [c.as_dict() for c in checks],
    }
    if extra:
        report.update(extra)
    return report


def _node_rows(checks: Sequence[Check]) -> List[List[str]]:
    """One row per node: verdict, what was checked, and the first failures in words."""
    order: List[str] = []
    per_node: Dict[str, List[Check]] = {}
    for check in checks:
        if check.node not in per_node:
            order.append(check.node)
        per_node.setdefault(check.node, []).append(check)
    rows = []
    for node in sorted(order):
        node_checks = per_node[node]
        failed = [c for c in node_checks if not c.ok]
        resources = ", ".join(
            "%s=%s" % (c.name.replace(RESOURCE_PREFIX, ""), c.actual)
            for c in node_checks if c.kind == "capacity" and c.actual not in ("absent", "0")
        ) or "-"
        pods = [c for c in node_checks if c.kind == "pod"]
        pods_text = "%d/%d" % (sum(1 for c in pods if c.ok), len(pods)) if pods else "-"
        problems = "; ".join(c.message for c in failed[:3]) + (" (+%d more)" % (len(failed) - 3) if len(failed) > 3 else "")
        rows.append([node, "OK" if not failed else "FAIL", resources, pods_text, problems or "-"])
    return rows


def render_table(checks: Sequence[Check]) -> str:
    """A fixed-width table for people: node, verdict, advertised resources, pods ok, problems."""
    header = ["NODE", "RESULT", "ADVERTISED", "PODS", "PROBLEMS"]
    rows = _node_rows(checks)
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [header] + rows:
        cells = [row[i].ljust(widths[i]) for i in range(len(row) - 1)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    summary = summarize(checks)
    lines.append("%s: %d checks on %d nodes, %d failed" % (
        "PASSED" if summary["ok"] else "FAILED", summary["checks"], summary["nodes"], summary["failed"]))
    return "\n".join(lines)


def render_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def render_junit(checks: Sequence[Check], suite: str = "gpufleet.sharing.verify", elapsed: float = 0.0,
                 properties: Sequence[Tuple[str, str]] = ()) -> str:
    """JUnit XML: one testsuite, one testcase per check (classname = node); ``properties`` (name,
    value) pairs, e.g. the probe's figures, go into the testsuite's <properties>."""
    failed = sum(1 for c in checks if not c.ok)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites tests="%d" failures="%d" time="%.3f">' % (len(checks), failed, elapsed),
           '  <testsuite name=%s tests="%d" failures="%d" errors="0" time="%.3f">'
           % (quoteattr(suite), len(checks), failed, elapsed)]
    if properties:
        out.append("    <properties>")
        out.extend("      <property name=%s value=%s/>" % (quoteattr(name), quoteattr(value)) for name, value in properties)
        out.append("    </properties>")
    for check in checks:
        name = quoteattr("%s %s" % (check.kind, check.name))
        classname = quoteattr(check.node)
        if check.ok:
            out.append("    <testcase classname=%s name=%s/>" % (classname, name))
        else:
            out.append("    <testcase classname=%s name=%s>" % (classname, name))
            out.append("      <failure message=%s>%s</failure>" % (
                quoteattr(check.message or "mismatch"),
                escape("expected: %s\nactual: %s" % (check.expected, check.actual))))
            out.append("    </testcase>")
    out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"

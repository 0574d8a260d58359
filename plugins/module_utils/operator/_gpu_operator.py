# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU Operator: Helm values from the plan, the release plan, values diff, readiness.

Pure (no I/O) except ``wait_operator_ready`` and ``apply_cluster_objects``, which work through the
K8sClient they are given.

Values follow docs/reference/specs.md §7.2: ``mig.strategy``, ``migManager.enabled``, ``migManager.config.name``,
``migManager.config.default`` (§7.8), ``driver.enabled``, ``toolkit.enabled``, ``devicePlugin.config.{name,default}``. ClusterPolicy
``status.state`` is ``ready`` | ``notReady`` | ``ignored`` (docs/reference/specs.md §7.3).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core and the kubernetes client
    yaml = None

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import HelmError, same_version, split_chart_field
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._values_tree import get_path, set_path

MIG_STRATEGIES = ("none", "single", "mixed")
MIG_DEFAULT_CONFIGS = ("all-disabled", "")  # the CRD enum of migManager.config.default
PSA_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",  # operands are privileged (docs/reference/specs.md §7.1)
}


class ValuesError(ProblemsError):
    """The requested values contradict each other; ``problems`` lists every contradiction."""


def build_values(values: Optional[Dict[str, Any]] = None, mig_strategy: Optional[str] = None,
                 mig_manager_enabled: Optional[bool] = None, mig_manager_config: Optional[str] = None,
                 driver_enabled: Optional[bool] = None, toolkit_enabled: Optional[bool] = None,
                 device_plugin_config: Optional[Dict[str, Any]] = None,
                 mig_manager_default_config: Optional[str] = None) -> Dict[str, Any]:
    """Helm values: free-form ``values`` plus the typed settings of the plan.

    A typed setting (not None) is written at its values path. If ``values`` already holds a
    different value there, that is a contradiction in the input and ValuesError names it."""
    result = copy.deepcopy(values) if values else {}
    if not isinstance(result, dict):
        raise ValuesError(["values must be a mapping, got %s" % type(values).__name__])
    problems: List[str] = []
    wanted: List[Tuple[Tuple[str, ...], Any, str]] = []
    if mig_strategy is not None:
        # "" renders no spec.mig.strategy: each node's device-plugin config decides (_mig_strategy)
        if mig_strategy not in MIG_STRATEGIES + ("",):
            problems.append("mig_strategy must be one of %s or \"\" (per node), got %r" % ("/".join(MIG_STRATEGIES), mig_strategy))
        wanted.append((("mig", "strategy"), mig_strategy, "mig_strategy"))
    if mig_manager_enabled is not None:
        wanted.append((("migManager", "enabled"), bool(mig_manager_enabled), "mig_manager_enabled"))
    if mig_manager_config:
        if mig_manager_enabled is False:
            problems.append("mig_manager_config=%r needs the MIG manager, but mig_manager_enabled is false"
                            % mig_manager_config)
        wanted.append((("migManager", "config", "name"), mig_manager_config, "mig_manager_config"))
    if mig_manager_default_config is not None:
        # "" (not the chart's all-disabled): the operator then labels no node (docs/reference/specs.md §7.8).
        if mig_manager_default_config not in MIG_DEFAULT_CONFIGS:
            problems.append("mig_manager_default_config must be 'all-disabled' or '', got %r" % mig_manager_default_config)
        wanted.append((("migManager", "config", "default"), mig_manager_default_config, "mig_manager_default_config"))
    if driver_enabled is not None:
        wanted.append((("driver", "enabled"), bool(driver_enabled), "driver_enabled"))
    if toolkit_enabled is not None:
        wanted.append((("toolkit", "enabled"), bool(toolkit_enabled), "toolkit_enabled"))
    for key in ("name", "default"):
        value = (device_plugin_config or {}).get(key)
        if value:
            wanted.append((("devicePlugin", "config", key), value, "device_plugin_config.%s" % key))
    for path, value, option in wanted:
        blocked = [path[:i] for i in range(1, len(path)) if get_path(result, path[:i])[0]
                   and not isinstance(get_path(result, path[:i])[1], dict)]
        if blocked:
            problems.append("%s=%r needs values.%s to be a mapping, got %r"
                            % (option, value, ".".join(blocked[0]), get_path(result, blocked[0])[1]))
            continue
        present, current = get_path(result, path)
        if present and current != value:
            problems.append("%s=%r contradicts values.%s=%r" % (option, value, ".".join(path), current))
            continue
        set_path(result, path, value)
    if problems:
        raise ValuesError(problems)
    return result


def values_changes(before: Any, after: Any, prefix: str = "") -> List[str]:
    """Human-readable list of changed value paths: "mig.strategy: 'single' -> 'mixed'"."""
    if isinstance(before, dict) and isinstance(after, dict):
        lines: List[str] = []
        for key in sorted(set(before) | set(after), key=str):
            path = "%s.%s" % (prefix, key) if prefix else str(key)
            if key not in before:
                lines.append("%s: added %r" % (path, after[key]))
            elif key not in after:
                lines.append("%s: removed (was %r)" % (path, before[key]))
            else:
                lines.extend(values_changes(before[key], after[key], path))
        return lines
    if before != after:
        return ["%s: %r -> %r" % (prefix or "(root)", before, after)]
    return []


def crd_documents(documents: List[Any]) -> List[Dict[str, Any]]:
    """CustomResourceDefinitions among parsed YAML documents (`helm show crds` output)."""
    crds = []
    for doc in documents:
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            if not (doc.get("metadata") or {}).get("name"):
                raise ValueError("a CustomResourceDefinition in the chart has no metadata.name")
            crds.append(doc)
    return crds


def crds_from_text(text: str) -> List[Dict[str, Any]]:
    """The CRDs of ``helm show crds`` output (a YAML stream); ValueError when it is not one."""
    try:
        return crd_documents(list(yaml.safe_load_all(text)))
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


def cluster_policy_state(policy: Optional[Dict[str, Any]]) -> Optional[str]:
    if not policy:
        return None
    return (policy.get("status") or {}).get("state")


def daemonsets_not_rolled_out(daemonsets: List[Dict[str, Any]]) -> List[str]:
    """DaemonSets whose latest spec is not yet running everywhere: the controller has not seen the
    latest generation, or fewer pods are updated or ready than desired. An upgrade changes the
    ClusterPolicy, the operator then changes its DaemonSets: a ClusterPolicy that still says
    "ready" from before is only trusted once its operands are rolled out too."""
    problems = []
    for ds in sorted(daemonsets, key=lambda d: (d.get("metadata") or {}).get("name", "")):
        meta, status = ds.get("metadata") or {}, ds.get("status") or {}
        desired = int(status.get("desiredNumberScheduled") or 0)
        updated = int(status.get("updatedNumberScheduled") if status.get("updatedNumberScheduled") is not None
                      else desired)
        ready = int(status.get("numberReady") or 0)
        if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
            problems.append("DaemonSet %s: generation %s not observed yet" % (meta.get("name"), meta.get("generation")))
        elif updated < desired or ready < desired:
            problems.append("DaemonSet %s: %d/%d updated, %d/%d ready" % (meta.get("name"), updated, desired, ready, desired))
    return problems


def _pod_ready(pod: Dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _pod_problem(pod: Dict[str, Any]) -> str:
    status = pod.get("status") or {}
    reasons = []
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = container.get("state") or {}
        for key in ("waiting", "terminated"):
            detail = state.get(key)
            if detail and detail.get("reason") not in (None, "Completed"):
                text = "%s: %s" % (container.get("name"), detail.get("reason"))
                if detail.get("message"):
                    text += " (%s)" % detail["message"]
                reasons.append(text)
    if not reasons and status.get("reason"):
        reasons.append(str(status["reason"]))
    if not reasons:
        reasons.append("phase %s, not Ready" % status.get("phase", "Unknown"))
    return "; ".join(reasons)


def diagnose_operands(policy: Optional[Dict[str, Any]], daemonsets: List[Dict[str, Any]],
                      pods: List[Dict[str, Any]]) -> List[str]:
    """Why the ClusterPolicy is not ready: the state, daemonsets short of ready pods, and for each
    not-ready pod its node and container reasons. Lines are stable (sorted) for reports."""
    lines: List[str] = []
    if policy is None:
        lines.append("ClusterPolicy does not exist (is the operator running and clusterPolicy.deployCR on?)")
    else:
        state = cluster_policy_state(policy) or "no status yet"
        lines.append("ClusterPolicy %s: state %s" % ((policy.get("metadata") or {}).get("name"), state))
        for condition in (policy.get("status") or {}).get("conditions") or []:
            if condition.get("status") != "True" and condition.get("message"):
                lines.append("  condition %s: %s" % (condition.get("type"), condition.get("message")))
    for ds in sorted(daemonsets, key=lambda d: (d.get("metadata") or {}).get("name", "")):
        status = ds.get("status") or {}
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        if ready < desired:
            lines.append("DaemonSet %s: %d/%d pods ready" % (ds["metadata"].get("name"), ready, desired))
    for pod in sorted(pods, key=lambda p: ((p.get("spec") or {}).get("nodeName") or "",
                                           (p.get("metadata") or {}).get("name", ""))):
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded" or _pod_ready(pod):
            continue
        node = (pod.get("spec") or {}).get("nodeName") or "(unscheduled)"
        lines.append("Pod %s on %s: %s" % ((pod.get("metadata") or {}).get("name"), node, _pod_problem(pod)))
    return lines


def release_info(entry: Optional[Mapping[str, Any]], chart_name: Optional[str] = None) -> Dict[str, Any]:
    """The module's view of a `helm list` entry ({} when there is no release)."""
    if not entry:
        return {}
    try:
        name, version = split_chart_field(entry.get("chart", ""), chart_name)
    except HelmError:
        name, version = entry.get("chart"), None
    revision = entry.get("revision")
    try:
        revision = int(revision)
    except (TypeError, ValueError):
        pass
    return {"name": entry.get("name"), "namespace": entry.get("namespace"), "revision": revision,
            "status": entry.get("status"), "chart": name, "chart_version": version,
            "app_version": entry.get("app_version")}


def pending_problem(entry: Optional[Mapping[str, Any]], release: str) -> Optional[str]:
    """A release in a pending-* status must not be touched: why, or None."""
    if entry is not None and str(entry.get("status", "")).startswith("pending"):
        return ("release %s is %s: another helm operation is in progress or was interrupted; resolve it "
                "(helm rollback or wait) before running again" % (release, entry.get("status")))
    return None


def release_action(entry: Optional[Mapping[str, Any]], chart_name: str, wanted_version: str,
                   before_values: Any, values: Any) -> str:
    """installed (no release), upgraded (other chart, version or values, or not deployed) or unchanged."""
    if entry is None:
        return "installed"
    info = release_info(entry, chart_name)
    if (info.get("chart") != chart_name or not same_version(info.get("chart_version"), wanted_version)
            or before_values != values or entry.get("status") != "deployed"):
        return "upgraded"
    return "unchanged"


def release_state(info: Mapping[str, Any], values: Any) -> Dict[str, Any]:
    """What the diff shows of a release: chart, version and user-supplied values ({} when absent)."""
    if not info:
        return {}
    return {"chart": info.get("chart"), "chart_version": info.get("chart_version"), "values": values}


def policy_not_ready(policy: Optional[Dict[str, Any]]) -> Optional[str]:
    """Why the ClusterPolicy is not ready yet (its state, absent, no status), or None when ready."""
    state = cluster_policy_state(policy)
    if state == "ready":
        return None
    return state or ("absent" if policy is None else "no status")


ROLLING_PREFIX = "ready, but "


def rollout_state(daemonsets: List[Dict[str, Any]]) -> Tuple[bool, str]:
    """(done, detail) of a ready ClusterPolicy's operands: "ready" or "ready, but <what rolls>"."""
    rolling = daemonsets_not_rolled_out(daemonsets)
    return not rolling, "ready" if not rolling else ROLLING_PREFIX + "; ".join(rolling)


def timeout_report(diagnosis: List[str], last_detail: Any) -> Tuple[List[str], str]:
    """(diagnosis, summary) after the wait timed out: the operand diagnosis plus what was still
    rolling out; the summary leaves out the ClusterPolicy line unless it is all there is."""
    lines = list(diagnosis)
    if str(last_detail).startswith(ROLLING_PREFIX):
        lines.extend(str(last_detail)[len(ROLLING_PREFIX):].split("; "))
    return lines, " | ".join(lines[1:]) or lines[0]


class NotReady(Exception):
    """The ClusterPolicy (or its operands) did not become ready in time."""

    def __init__(self, message: str, diagnosis: List[str], state: Any, waited: float) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis
        self.state = state
        self.waited = waited


def diagnose(k8s: K8sClient, policy_name: str, namespace: str) -> List[str]:
    """diagnose_operands on the live objects (a failure to read them is the diagnosis)."""
    try:
        policy = k8s.get("ClusterPolicy", policy_name)
        daemonsets = k8s.list("DaemonSet", namespace=namespace)
        pods = k8s.list("Pod", namespace=namespace)
    except K8sError as exc:
        return ["cannot collect the diagnosis: %s" % exc]
    return diagnose_operands(policy, daemonsets, pods)


def wait_operator_ready(k8s: K8sClient, policy_name: str, namespace: str, timeout: float, interval: float,
                        log: Callable[[str], None]) -> Tuple[str, float]:
    """Wait until the ClusterPolicy is ready and its operand DaemonSets are rolled out; returns
    (state, seconds waited). Raises NotReady with the diagnosis on timeout."""
    seen: List[str] = []

    def probe() -> Tuple[bool, str]:
        not_ready = policy_not_ready(k8s.get("ClusterPolicy", policy_name))
        if not_ready is not None:
            return False, not_ready
        return rollout_state(k8s.list("DaemonSet", namespace=namespace))

    def progress(what: str, elapsed: float, detail: Any) -> None:
        if not seen or seen[-1] != detail:
            seen.append(detail)
            log("gpu_operator: waiting for %s: %s after %.0fs" % (what, detail, elapsed))

    start = k8s.now()
    try:
        state = k8s.wait_for("ClusterPolicy %s to be ready" % policy_name, probe, timeout=timeout, interval=interval,
                             progress=progress)
    except K8sTimeout as exc:
        diagnosis, summary = timeout_report(diagnose(k8s, policy_name, namespace), exc.detail)
        raise NotReady("%s. Not ready: %s" % (exc, summary), diagnosis, exc.detail, round(exc.elapsed, 1)) from exc
    return state, round(k8s.now() - start, 1)


def wait_problems(timeout: int, interval: float) -> List[str]:
    """What is wrong with the wait options (empty when nothing is)."""
    problems = []
    if timeout < 0:
        problems.append("wait_timeout must be >= 0, got %d" % timeout)
    if interval <= 0:
        problems.append("wait_interval must be > 0")
    return problems


class ClusterObjectError(Exception):
    """The namespace or a CRD could not be written; the message names which."""


def apply_cluster_objects(k8s: K8sClient, namespace: Optional[str], crds: List[Dict[str, Any]]
                          ) -> Tuple[Optional[str], List[Dict[str, str]], bool]:
    """Ensure the namespace (when given, with the PSA labels) and apply the CRDs (I/O through ``k8s``).

    Returns the namespace action (None when not managed), one ``{name, action}`` per CRD, and whether
    anything changed.
    """
    changed = False
    namespace_action = None
    if namespace is not None:
        try:
            applied = k8s.ensure_namespace(namespace, PSA_LABELS)
        except K8sError as exc:
            raise ClusterObjectError("namespace %s: %s" % (namespace, exc)) from exc
        namespace_action, changed = applied.action, applied.changed
    report = []
    for crd in crds:
        try:
            applied = k8s.apply(crd, compare="subset")
        except K8sError as exc:
            raise ClusterObjectError("CRD %s: %s" % (crd["metadata"]["name"], exc)) from exc
        report.append({"name": crd["metadata"]["name"], "action": applied.action})
        changed = changed or applied.changed
    return namespace_action, report, changed

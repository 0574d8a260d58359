# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Acting on the fleet plan in the cluster: the sharing configs in force, waiting until nodes advertise the plan.

I/O through ``_k8s.K8sClient``; what a node must show is ``_fleet_plan``'s and ``_verify``'s (pure) job.
Used by gpu_sharing (wait), gpu_verify and gpu_quotas (configs). The verification pods are ``proof/_pods``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check, compare_node
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingConfig, SharingError, parse_rendered_config


def read_cluster_configs(k8s: K8sClient, configmap: Optional[str], namespace: str) -> Tuple[Dict[str, SharingConfig], List[Check]]:
    """The sharing configs in force: those in the ConfigMap the ClusterPolicy names (problems become checks)."""
    configs: Dict[str, SharingConfig] = {}
    checks: List[Check] = []
    if not configmap:
        return configs, checks
    cm = k8s.get("ConfigMap", configmap, namespace)
    for key, text in sorted(((cm or {}).get("data") or {}).items()):
        try:
            configs[key] = parse_rendered_config(key, text)
        except SharingError as exc:
            checks.append(Check("(cluster)", "plan", key, "valid config", "invalid", False, str(exc)))
    if cm is None:
        checks.append(Check("(cluster)", "plan", configmap, "ConfigMap exists", "absent", False,
                            "ConfigMap %s/%s named by the ClusterPolicy does not exist" % (namespace, configmap)))
    return configs, checks


def wait_until_advertised(k8s: K8sClient, expectations: Mapping[str, ExpectedNode], timeout: float, interval: float,
                          log: Callable[[str], None], read: Optional[List[Dict[str, Any]]] = None,
                          ) -> Tuple[Dict[str, Any], Dict[str, List[str]]]:
    """Poll (one node list per poll) until every node advertises its expectation.

    ``read``: the node list the caller planned from, when nothing was written since: the first poll
    judges it instead of listing the nodes again (a no-op reads the list once); later polls list.
    Returns what was waited on (nodes, timeout, waited, progress: one line per change in what is
    missing) and, on timeout, node -> what is still missing (empty when every node matched).
    """
    progress_log: List[str] = []
    last = [""]
    start = k8s.now()
    info: Dict[str, Any] = {"nodes": sorted(expectations), "timeout": timeout,
                            "waiting_for": "capacity, allocatable and GFD labels as planned (see expected)"}

    first = [read] if read is not None else []

    def probe() -> Tuple[bool, Dict[str, List[str]]]:
        live = {n["metadata"]["name"]: n for n in (first.pop() if first else k8s.list("Node"))}
        missing = {}
        for name, exp in expectations.items():
            failed = [c.message for c in compare_node(exp, live.get(name)) if not c.ok]
            if failed:
                missing[name] = failed
        return not missing, missing

    def progress(_what: str, elapsed: float, detail: Mapping[str, List[str]]) -> None:
        summary = "; ".join("%s %s" % (n, m[0]) + (" (+%d)" % (len(m) - 1) if len(m) > 1 else "")
                            for n, m in sorted(detail.items()))
        if summary != last[0]:
            last[0] = summary
            progress_log.append("%.0fs: waiting for %d node(s): %s" % (elapsed, len(detail), summary))
            log(progress_log[-1])

    try:
        k8s.wait_for("nodes to advertise the planned sharing", probe, timeout=timeout, interval=interval, progress=progress)
    except K8sTimeout as exc:
        info.update(waited=round(exc.elapsed, 1), progress=progress_log, not_ready=exc.detail)
        return info, dict(exc.detail or {})
    info.update(waited=round(k8s.now() - start, 1), progress=progress_log)
    return info, {}

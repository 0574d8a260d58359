# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift of the whole fleet at once, on the controller, from the reads and check-mode plans of drift.yml."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._read_plan import read_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift import advertised_rows, host_rows, merge_rows
from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift_cluster import cluster_rows, summary
from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift_report import junit, report_json, table
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import Prepared

DOCUMENTATION = r"""
name: fleet_drift
short_description: The live fleet against the inventory's plan, one row per difference
version_added: 0.3.0
description:
  - Per host, its MIG mode and layout per GPU and its nvidia-mig-manager files, planned with the code of
    M(gpufleet.sharing.mig_config) in check mode from this run's M(gpufleet.sharing.gpu_facts) read
    (C(gpufleet_gpu_read), as the rollout's triage does); the operator's release and values
    (M(gpufleet.sharing.gpu_operator) in check mode), the sharing configs and labels
    (M(gpufleet.sharing.gpu_sharing) in check mode), what each node advertises (M(gpufleet.sharing.gpu_verify)
    without pods), the state labels, annotations, cordons and rollout lock (M(gpufleet.sharing.fleet_info)),
    and the Kueue team quotas (M(gpufleet.sharing.gpu_quotas) with O(quotas) from C(state=verified)).
  - Returns C(drift), a list of rows C(node), C(what), C(planned), C(found), C(since) (a time the cluster gave, else
    null) and C(converge) (the command that converges it), and C(summary). What a node advertises is reported
    only when no other row explains it (its MIG layout, its sharing label, the operator or the sharing configs).
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  operator:
    description: M(gpufleet.sharing.gpu_operator)'s check-mode result ({} when the operator is not managed).
    type: dict
    default: {}
  chart_version:
    description: The planned chart version (C(gpu_operator_chart_version)); empty means any.
    type: str
    default: ""
  sharing:
    description: M(gpufleet.sharing.gpu_sharing)'s check-mode result.
    type: dict
    default: {}
  verify:
    description: M(gpufleet.sharing.gpu_verify)'s result (run without pods).
    type: dict
    default: {}
  info:
    description: M(gpufleet.sharing.fleet_info)'s result.
    type: dict
    default: {}
  quotas:
    description:
      - M(gpufleet.sharing.gpu_quotas)'s result with C(state=verified) and C(fail_on_mismatch=false) ({} when
        there is no team); each check that is not ok is a row, a failed result one row.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The fleet's drift
  ansible.builtin.set_fact:
    drift: "{{ hostvars | gpufleet.sharing.fleet_drift(ansible_play_hosts_all, operator=op, sharing=sh, verify=vr, info=fi) }}"
"""

RETURN = r"""
_value:
  description:
    - C(drift) (the rows), C(summary) (C(rows), C(nodes), C(drifted), C(ok)), C(table) (text) and C(files), the
      report files by name (C(fleet-drift.json), C(fleet-drift.xml) JUnit, C(fleet-drift.txt)).
  type: dict
"""


@hostvars_once
def fleet_drift(hostvars: Mapping[str, Any], hosts: Sequence[str], operator: Optional[Mapping[str, Any]] = None,
                chart_version: str = "", sharing: Optional[Mapping[str, Any]] = None,
                verify: Optional[Mapping[str, Any]] = None, info: Optional[Mapping[str, Any]] = None,
                quotas: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    cache: Dict[Tuple[str, bool], Prepared] = {}
    causes: List[Dict[str, Any]] = []
    by_node, operator_mig = {}, {}
    for host in hosts:
        host_vars = hostvars[host]
        node = node_name(host, host_vars)
        by_node[node], operator_mig[node] = host, host_vars.get("gpufleet_mig_backend") == "operator"
        read = host_vars.get("gpufleet_gpu_read") or {}
        if host_vars.get("gpufleet_gpu_model") is not None and not read.get("ansible_facts"):
            continue  # declared, not read: nothing to compare on the host
        causes += host_rows(host, node, read, read_plan(read, host_vars.get("mig_selection"), cache), read.get("files") or {},
                            operator_mig[node])
    info = info or {}
    causes += cluster_rows(operator or {}, chart_version or "", sharing or {}, info.get("nodes") or {}, by_node,
                           operator_mig, info.get("lease"), float(info.get("now") or 0), info.get("lock_namespace_missing"),
                           quotas or {})
    checks = ((verify or {}).get("report") or {}).get("checks") or []
    rows = merge_rows(causes, advertised_rows(checks, by_node))
    answer = {"drift": rows, "summary": summary(rows, len(hosts))}
    nodes = list(by_node)
    answer["table"] = table(rows)
    answer["files"] = {"fleet-drift.json": report_json(answer, nodes), "fleet-drift.xml": junit(rows, nodes),
                       "fleet-drift.txt": answer["table"] + "\n"}
    return answer


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"fleet_drift": fleet_drift}

# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_verify's per-pod metrics check, the part that talks to the API server: while the verification pods
run, each node's DCGM exporter is scraped through the API server's pod proxy (docs/metrics-on-shared-gpus.md)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pod_metrics import (
    EXPORTER_LABEL_SELECTOR, MetricsError, attributed_pods, attribution_checks, parse_prometheus, proxy_path)
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check


class MetricsScrape:
    """Scrapes the exporters of the nodes whose verification pods run (``observe``, called on every poll of
    the pods once none is pending, until each running pod was seen in a series); ``checks`` judges afterwards."""

    def __init__(self, k8s: K8sClient, params: Mapping[str, Any]) -> None:
        self.k8s = k8s
        self.enabled = bool(params.get("metrics")) and bool(params.get("pods"))
        self.operator_namespace = params["operator_namespace"]
        self.namespace = params["namespace"]
        self.hold = params.get("metrics_hold")
        self.attributed: Dict[Tuple[str, str], List[str]] = {}
        self.problems: Dict[str, str] = {}
        self.scraped: Set[str] = set()
        self.exporters: Optional[Dict[str, str]] = None

    def observe(self, live: Mapping[str, Any], created: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        phases = {name: ((live.get(name) or {}).get("status") or {}).get("phase") for name in created}
        if any(phase in (None, "Pending") for phase in phases.values()):
            return
        waiting = {want.node for name, want in created.items()
                   if phases[name] == "Running" and (self.namespace, name) not in self.attributed}
        for node in sorted(waiting):
            self.scrape(node)

    def exporter_pods(self) -> Dict[str, str]:
        """Node -> its running exporter pod (read once per run)."""
        if self.exporters is None:
            pods = self.k8s.list("Pod", namespace=self.operator_namespace, label_selector=EXPORTER_LABEL_SELECTOR)
            self.exporters = {str((p.get("spec") or {}).get("nodeName")): p["metadata"]["name"] for p in pods
                              if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}
        return self.exporters

    def scrape(self, node: str) -> None:
        name = self.exporter_pods().get(node)
        if name is None:
            self.problems[node] = "no running DCGM exporter pod (%s) in namespace %s on the node" % (
                EXPORTER_LABEL_SELECTOR, self.operator_namespace)
            return
        try:
            samples = parse_prometheus(self.k8s.request("GET", proxy_path(self.operator_namespace, name), raw=True))
        except K8sError as exc:
            self.problems[node] = "cannot scrape exporter pod %s/%s: %s" % (self.operator_namespace, name, exc)
            return
        except MetricsError as exc:
            self.problems[node] = "exporter pod %s/%s did not answer Prometheus text: %s" % (self.operator_namespace, name, exc)
            return
        self.scraped.add(node)
        for key, metrics in attributed_pods(samples).items():
            self.attributed.setdefault(key, []).extend(metrics)

    def checks(self, pods: List[Dict[str, Any]]) -> List[Check]:
        """One check per verification pod that ran (``PodRun.pods`` entries)."""
        if not self.enabled:
            return []
        by_node: Dict[str, List[Tuple[str, str]]] = {}
        for entry in pods:
            by_node.setdefault(entry["node"], []).append((entry["name"], entry["resource"]))
        checks: List[Check] = []
        for node, wanted in sorted(by_node.items()):
            problem = self.problems.get(node) or ("" if node in self.scraped else
                                                  "the pods never ran together long enough to be scraped "
                                                  "(metrics_hold %ss)" % self.hold)
            checks.extend(attribution_checks(node, self.namespace, wanted, self.attributed, problem))
        return checks

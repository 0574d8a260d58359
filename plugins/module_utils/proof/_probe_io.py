# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running the sharing probe in the cluster (issue 15): the program in a ConfigMap, then two
phases of probe pods: one pod alone per node and resource type (exclusive), then, for a shared
resource, as many pods as it has replicas on the same node at the same moment (contended). The
ConfigMap (``gpufleet-probe``) is created or updated and left in place, like the namespace, so the
run needs no right to delete ConfigMaps (rbac/gpufleet-sharing.yml: get, create, update).

I/O through ``_k8s.K8sClient`` and ``_pods.PodRun`` (create in parallel, poll, logs, cleanup);
what the figures mean is ``_probe``'s (pure) job.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pods import PodRun, read_pod_log
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import mirror_image
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._probe import (
    PROBE_CONFIGMAP,
    PROGRAM_KEY,
    PodOutput,
    ProbeTarget,
    TargetRuns,
    probe_command,
    probe_rows,
    probe_targets,
    thresholds_of,
    with_probe_volume,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import (
    DEADLINE_MARGIN,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Check,
    PodSpecWanted,
    pending_reason,
    pod_manifest,
    pod_name,
)

Planned = List[Tuple[ProbeTarget, str]]


class ProbeRun:
    """One verification run's probe. ``params`` are gpu_verify's options; results in rows and checks."""

    def __init__(self, k8s: K8sClient, params: Mapping[str, Any], run_id: str, warn: Callable[[str], None]) -> None:
        self.k8s = k8s
        self.params = params
        self.run_id = run_id + "-probe"
        self.pods = PodRun(k8s, params, self.run_id, warn)
        self.configmap = PROBE_CONFIGMAP
        self.rows: List[Dict[str, Any]] = []
        self.checks: List[Check] = []
        self.created: Dict[str, Any] = {}

    def run(self, expected: Sequence[ExpectedNode], hostnames: Mapping[str, str]) -> None:
        """Exclusive then contended probe pods for every node and advertised resource type."""
        targets = [t for exp in expected for t in probe_targets(exp)]
        if not targets:
            return
        namespace = self.params["namespace"]
        self.k8s.ensure_namespace(namespace, labels=self.params["namespace_labels"])
        self.k8s.apply({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": self.configmap, "namespace": namespace,
                                     "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
                        "data": {PROGRAM_KEY: self.params["probe_program"]}})
        runs = {(t.node, t.resource): TargetRuns() for t in targets}
        try:
            for output, (target, _phase) in self.phase([(t, "exclusive") for t in targets], hostnames):
                runs[(target.node, target.resource)].exclusive = output
            contended = [(t, "contended") for t in targets if t.contended for _replica in range(t.replicas)]
            for output, (target, _phase) in self.phase(contended, hostnames):
                runs[(target.node, target.resource)].shared.append(output)
        finally:
            self.pods.cleanup(self.created)
        self.rows, self.checks = probe_rows(targets, runs, thresholds_of(self.params))

    def phase(self, planned: Planned, hostnames: Mapping[str, str]) -> List[Tuple[PodOutput, Tuple[ProbeTarget, str]]]:
        """Create the planned pods at once, wait until they finish (or pod_timeout), read their logs."""
        if not planned:
            return []
        p, created, offset = self.params, {}, len(self.created)

        def create(indexed: Tuple[int, Tuple[ProbeTarget, str]]) -> None:
            index, (target, phase) = indexed
            name = pod_name(self.run_id, target.node, target.resource, index)
            body = pod_manifest(PodSpecWanted(target.node, target.resource, "gpu"), name, p["namespace"], self.run_id,
                                mirror_image(p["probe_image"], p.get("registry")), probe_command(p, phase),
                                tolerations=p["pod_tolerations"], run_as_user=p["pod_run_as_user"],
                                image_pull_secrets=p.get("image_pull_secrets") or (),
                                hostname=hostnames.get(target.node) or target.node,
                                deadline=p["pod_timeout"] + DEADLINE_MARGIN)
            body["metadata"]["annotations"].update(p["pod_annotations"] or {})
            self.k8s.create(with_probe_volume(body, self.configmap, phase))
            created[name] = (target, phase)
            self.created[name] = (target, phase)

        self.pods.parallel(create, list(enumerate(planned, start=offset)))
        finished, live = self.pods.poll(created)
        names = sorted(finished)
        logs = dict(zip(names, self.pods.parallel(lambda name: read_pod_log(self.k8s, name, p["namespace"]), names)))
        events = self.k8s.list("Event", namespace=p["namespace"]) if len(finished) < len(created) else []
        outputs = []
        for name, planned_pod in sorted(created.items()):
            if name in finished:
                (log, error), phase = logs[name], finished[name][0]
                reason = error or ("" if phase == "Succeeded" else "pod %s: %s" % (phase, pending_reason(live.get(name), [])))
                outputs.append((PodOutput(name, None if error else log, reason), planned_pod))
            else:
                mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
                reason = "%s after %ds" % (pending_reason(live.get(name), mine), p["pod_timeout"])
                outputs.append((PodOutput(name, None, reason), planned_pod))
        return outputs

# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-pod GPU metrics check of gpu_verify (docs/metrics-on-shared-gpus.md): parsing the DCGM exporter's
Prometheus text format and judging whether every verification pod has a series of its own. Pure, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check

EXPORTER_LABEL_SELECTOR = "app=nvidia-dcgm-exporter"
EXPORTER_PORT = 9400
METRICS_ARGSPEC: Dict[str, Dict[str, Any]] = dict(
    metrics=dict(type="bool", default=False),
    metrics_hold=dict(type="int", default=60),
)
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE_RE = re.compile(r"(%s)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$" % _NAME)
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class MetricsError(ValueError):
    """Text that is not the Prometheus text format; the message names the line."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def _labels(text: str, number: int) -> Dict[str, str]:
    labels: Dict[str, str] = {}
    position = 0
    while position < len(text.rstrip()):
        match = _LABEL_RE.match(text, position)
        if match is None:
            raise MetricsError("line %d: malformed labels near %r" % (number, text[position:position + 40]))
        labels[match.group(1)] = re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], match.group(2))
        position = match.end()
    return labels


def parse_prometheus(text: str) -> List[Sample]:
    """Every sample of a Prometheus text exposition; comments and blank lines are skipped."""
    samples: List[Sample] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SAMPLE_RE.match(line.strip())
        if match is None:
            raise MetricsError("line %d: not a sample: %r" % (number, line[:80]))
        try:
            value = float(match.group(3))
        except ValueError:
            raise MetricsError("line %d: value %r is not a number" % (number, match.group(3))) from None
        samples.append(Sample(match.group(1), _labels(match.group(2) or "", number), value))
    return samples


def attributed_pods(samples: Iterable[Sample]) -> Dict[Tuple[str, str], List[str]]:
    """(namespace, pod) -> the metric names that carry it."""
    found: Dict[Tuple[str, str], List[str]] = {}
    for sample in samples:
        if sample.labels.get("pod") and sample.name.startswith("DCGM_"):
            found.setdefault((sample.labels.get("namespace", ""), sample.labels["pod"]), []).append(sample.name)
    return found


def attribution_checks(node: str, namespace: str, pods: Sequence[Tuple[str, str]],
                       attributed: Mapping[Tuple[str, str], Sequence[str]], problem: str = "") -> List[Check]:
    """One check per verification pod (name, resource) of ``node``: the exporter has a series labelled with it.
    ``problem``: why the exporter could not be read, the reason given for a pod without a series."""
    checks = []
    for pod, resource in pods:
        metrics = attributed.get((namespace, pod)) or []
        ok = bool(metrics)
        message = "" if ok else "node %s: no DCGM exporter series attributed to pod %s/%s (%s): %s" % (
            node, namespace, pod, resource, problem or "per-pod attribution is off (per_pod_metrics) or the exporter "
            "has not seen the pod")
        checks.append(Check(node, "metrics", "series for %s" % resource, "series with pod=%s" % pod,
                            ", ".join(sorted(set(metrics))) or problem or "none", ok, message))
    return checks


def hold_command(command: Sequence[str], seconds: int) -> List[str]:
    """The verification command, then a pause of ``seconds`` so that the exporter sees the pod; its exit status kept."""
    return ["sh", "-c", '"$@"; status=$?; sleep %d; exit $status' % seconds, "gpufleet-verify"] + list(command)


def metrics_option_problems(params: Mapping[str, Any]) -> List[str]:
    """Bad metrics options of gpu_verify (none when the check is off)."""
    if not params.get("metrics"):
        return []
    problems = []
    if not params.get("pods"):
        problems.append("metrics needs pods=true: the check scrapes the exporter while the verification pods run")
    if params.get("metrics_hold", 0) < 1:
        problems.append("metrics_hold must be at least 1 (seconds), got %s" % params.get("metrics_hold"))
    return problems


def proxy_path(namespace: str, pod: str) -> str:
    """The API server's pod proxy path of an exporter pod's /metrics."""
    return "/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics" % (namespace, pod, EXPORTER_PORT)

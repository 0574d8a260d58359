#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_verify
short_description: Prove that GPU nodes advertise what was planned and hand out the devices they advertise
version_added: 0.1.0
description:
  - For every node in scope, computes the expected extended resources and GPU Feature Discovery labels
    from the plan (GPUs per node, MIG layouts, the ClusterPolicy MIG strategy and the sharing config in
    force) with the same code as M(gpufleet.sharing.gpu_sharing), and compares them with the node's
    C(status.capacity), C(status.allocatable) and labels.
  - With a plan (O(configs), O(node_configs) or the hosts' sharing configs), also checks that every planned
    config the ClusterPolicy's ConfigMap holds is the one the plan renders (strategy, replicas, renaming,
    C(failRequestsGreaterThanOne), C(flags.migStrategy), C(flags.plugin.sharedDevicesAllocationPolicy)).
  - How MIG devices are expected depends on the device-plugin release (see O(device_plugin_version)).
  - Then runs verification pods in parallel, one per node and advertised resource type. Each asks for
    one unit of its resource, runs O(pod_command) (default C(nvidia-smi -L)) and must see the kind of
    device it asked for (the MIG profile for C(nvidia.com/mig-*), a full GPU for C(nvidia.com/gpu)).
    Logs are collected and the pods deleted, also when verification fails. A pod that does not finish
    in O(pod_timeout) is reported with the reason, for example the scheduler's C(FailedScheduling) message.
  - Pods run in their own namespace (created when missing, labelled) with a restricted security context
    (non-root, no privilege escalation, all capabilities dropped, seccomp C(RuntimeDefault)) and are
    labelled C(app.kubernetes.io/managed-by=gpufleet.sharing) and with a run id.
  - Optional user checks, JMESPath expressions evaluated over each node object.
  - API cost is a constant number of list/get calls, plus per verification pod one create and one log
    read, plus one delete-collection call; with O(metrics), one exporter list and a scrape per node and poll until its pods were seen.
  - Returns a report as data (O(ignore:report)), a table for people (RV(report_table)) and optionally
    JUnit XML; the C(verify) role writes them to files.
  - Changes nothing lasting; the namespace it creates is left in place (empty) for the next run.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
  - gpufleet.sharing.node_plans
attributes:
  check_mode:
    description:
      - Only compares node status and labels with the plan. No namespace is created and no pod is run,
        so RV(report) has no pod checks.
  diff_mode:
    support: none
    description: Nothing lasting changes, so there is no diff.
options:
  nodes:
    description:
      - Node names to verify. With O(node_selector), the union; exactly these are verified.
      - Neither given, every GPU node (GPU Feature Discovery labels), every node of O(node_plans) and
        O(node_gpus) and every node a config selects.
    type: list
    elements: str
    default: []
  node_selector:
    description: Label selector (C(key=value,...)) of further nodes to verify.
    type: str
  configs:
    description:
      - The sharing plan, in the format of O(gpufleet.sharing.gpu_sharing#module:configs). Given, each
        selected node is expected to carry the label of its config.
      - Omitted, the configs are read from the ConfigMap the ClusterPolicy names and each node's config
        from its label or the ClusterPolicy default.
    type: list
    elements: raw
  node_configs:
    description:
      - Per node, its sharing config, as O(gpufleet.sharing.gpu_sharing#module:node_configs). Merged
        with O(configs) and the O(node_plans[].sharing_config) entries; any of them makes this the plan.
      - A node runs the config its label C(nvidia.com/device-plugin.config) names after the plan (the one a
        config selects it for, else the label it has if that config exists, else none), or without a
        label the default config, as the device plugin does.
    type: dict
    default: {}
  default_config:
    description: With O(configs), the config of nodes no config selects. Omitted, the ClusterPolicy default.
    type: str
  mig_strategy:
    description:
      - MIG strategy of the plan. Omitted, the ClusterPolicy's C(spec.mig.strategy); unset there means the
        chart default V(single); without a ClusterPolicy V(none).
    type: str
    choices: [none, single, mixed]
  cluster_policy_name:
    description: Name of the ClusterPolicy. Omitted, the cluster's only one (or none).
    type: str
  operator_namespace:
    description: Namespace of the device-plugin ConfigMap.
    type: str
    default: gpu-operator
  dra_nodes:
    description:
      - The nodes on the DRA backend (C(gpufleet_gpu_backend=dra)). For each, instead of its extended resources and
        GFD labels, its C(resource.k8s.io/v1) ResourceSlices of the driver C(gpu.nvidia.com) must list exactly the
        planned devices (per parent GPU, type and MIG profile or product; rows of kind C(slice)), and its verification
        pods are one per device kind, each bound to a C(ResourceClaim) of its own (the kind's claim template's spec,
        deleted with the pod) and must see exactly the one device it was allocated. See docs/dra.md.
      - Each needs its GPU plan (O(node_plans)), since no GFD label tells a DRA node's GPUs.
    type: list
    elements: str
    default: []
  pods:
    description: Run verification pods (never in check mode).
    type: bool
    default: true
  namespace:
    description: Namespace for the verification pods; created (and labelled) when missing.
    type: str
    default: gpufleet-verify
  namespace_labels:
    description: Labels set on the namespace when it is created.
    type: dict
    default:
      pod-security.kubernetes.io/enforce: restricted
      app.kubernetes.io/managed-by: gpufleet.sharing
  pod_image:
    description: Image of the verification pods; it needs C(nvidia-smi) (injected by the NVIDIA container toolkit).
    type: str
    default: nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04
  registry:
    description:
      - A mirror registry (V(host[:port][/path]), no scheme, no trailing slash) that O(pod_image) and
        O(probe_image) are pulled from instead, keeping the image's path, name and tag (as M(gpufleet.sharing.gpu_operator) O(registry)).
    type: str
  image_pull_secrets:
    description:
      - Names of C(kubernetes.io/dockerconfigjson) Secrets in O(namespace) the verification and probe pods
        pull O(pod_image) and O(probe_image) with. A name missing from O(namespace) is refused before anything is written.
    type: list
    elements: str
    default: []
  pod_command:
    description: Command of the verification container; its log must contain C(nvidia-smi -L) output.
    type: list
    elements: str
    default: [nvidia-smi, -L]
  pod_run_as_user:
    description: Non-root user id of the verification container (at least V(1)).
    type: int
    default: 65534
  pod_annotations:
    description: Extra annotations for the verification pods.
    type: dict
    default: {}
  pod_tolerations:
    description: Tolerations of the verification pods. Default, tolerate the C(nvidia.com/gpu) NoSchedule taint.
    type: list
    elements: dict
  pod_timeout:
    description:
      - Seconds the pods get to finish (scheduling included); at least V(1).
      - Each pod also gets C(activeDeadlineSeconds) of O(pod_timeout) + 60, so that a pod left behind by a
        killed run stops by itself. A run first deletes the verification pods of earlier runs (other
        run ids) left in O(namespace), see RV(removed_leftover_pods).
    type: int
    default: 120
  poll_interval:
    description: >-
      Seconds between two polls of the pods (one list call per poll) (the longest pause; the first checks of a wait come sooner,
      after 0.25 s, 0.5 s, 1 s and so on); more than V(0).
    type: float
    default: 2.0
  wait_timeout:
    description:
      - Seconds to wait for the nodes to match the plan before judging them (one node list per poll),
        for example right after a MIG change restarted the device plugin. V(0) judges at once.
      - Never waits in check mode.
    type: int
    default: 0
  wait_interval:
    description: Seconds between two polls of O(wait_timeout) (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 2.0
  parallel:
    description:
      - How many pod creations and log reads run at the same time (threads). The number of requests
        does not change, only how long a large verification waits for the API server.
    type: int
    default: 8
  run_id:
    description: Identifier of this run (pod names and labels). Default, random.
    type: str
  checks:
    description: Extra checks, evaluated over each node object (as the API returns it).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name shown in the report.
        type: str
        required: true
      expression:
        description: JMESPath expression.
        type: str
        required: true
      equals:
        description: The value the expression must give. Omitted, its result must be truthy.
        type: raw
  probe:
    description:
      - Also measure what each share delivers (the sharing probe, off by default). Per node and advertised
        resource type, one probe pod runs alone (exclusive); for a time-sliced or MPS resource, then as many
        probe pods as it has replicas run on the same node at the same moment (contended).
      - Each pod runs O(probe_program) (from the ConfigMap C(gpufleet-probe) in O(namespace), created or
        updated and left in place like the namespace) in O(probe_image), with the same
        restricted security context as the verification pods, and prints one JSON line with matrix-multiply
        throughput and time per call at a small and a large size, device-to-device copy bandwidth, the
        memory it could allocate and the device it ran on.
      - The figures go into RV(report) (C(probe)), a second table in RV(report_table) and JUnit properties.
        Unusable probe output (no output, truncated JSON, no GPU, a pod that never finished) fails a check
        naming the node and the pod. Never in check mode.
    type: bool
    default: false
  probe_program:
    description:
      - Source of the probe program; required with O(probe). The C(verify) role passes its
        C(files/gpufleet_probe.py).
    type: str
  probe_image:
    description: Image of the probe pods; it needs Python with PyTorch or CuPy (CUDA).
    type: str
    default: nvcr.io/nvidia/pytorch:25.01-py3
  probe_python:
    description: Python interpreter of O(probe_image) that runs the program.
    type: str
    default: python3
  probe_seconds:
    description: Measurement budget of each probe pod in seconds (more than V(0)); the program stops itself at twice this plus 30.
    type: int
    default: 20
  probe_min_share:
    description:
      - Fail when the worst sharer of a contended resource gets less than this fraction of its fair share
        (the whole GPU's figure / replicas), for the small or the large matrix multiply; for a MIG slice, less than this
        fraction of what its compute slices promise of the whole GPU. V(0) only reports.
      - The whole GPU's figure is the exclusive run under time-slicing. Under MPS the exclusive run is capped at
        1/replicas by the control daemon, so it is a whole GPU of the same model probed in the same run (this node
        first, else the median of the other nodes), else the sharers' sum; RV(report) says which (C(baseline)).
    type: float
    default: 0.0
  probe_max_inflation:
    description: Fail when the small matrix multiply takes more than this many times as long contended as alone. V(0) only reports.
    type: float
    default: 0.0
  metrics:
    description:
      - Also check per-pod GPU metrics (off by default; needs O(pods)). Each verification container runs
        O(pod_command), then waits O(metrics_hold) seconds (C(sh -c), its exit status kept), and while the pods run
        each node's DCGM exporter (pod labelled C(app=nvidia-dcgm-exporter) in O(operator_namespace)) is scraped
        through the API server's pod proxy (C(pods/proxy) C(get), port 9400, C(/metrics)).
      - Every verification pod must appear in a series of its own (labels C(pod), C(namespace)); a pod without one
        fails a C(metrics) check naming the node, the pod and its resource. Time-sliced and MPS pods only get
        series when the exporter attributes replicas (M(gpufleet.sharing.gpu_operator) O(gpufleet.sharing.gpu_operator#module:per_pod_metrics)).
      - Text that is not the Prometheus format, a node without a running exporter or a failed scrape fails the
        node's pods with the reason. Never in check mode.
    type: bool
    default: false
  metrics_hold:
    description: With O(metrics), seconds each verification container waits after its command (at least V(1)).
    type: int
    default: 60
  junit:
    description: Also return the report as JUnit XML (RV(report_junit)).
    type: bool
    default: false
  fail_on_mismatch:
    description: Fail when any check fails (the report is returned either way).
    type: bool
    default: true
notes:
  - Requires the C(kubernetes) and C(jmespath) Python libraries where the module runs (usually the controller).
seealso:
  - module: gpufleet.sharing.gpu_sharing
"""

EXAMPLES = r"""
- name: Verify the inference nodes against the plan
  gpufleet.sharing.gpu_verify:
    nodes: "{{ groups['gpu_inference'] }}"
    node_gpus:
      gpu-a: [{model: H100-80GB, count: 8, product: NVIDIA H100 80GB HBM3}]
    configs: "{{ gpu_sharing_configs }}"
    checks:
      - name: schedulable
        expression: "!spec.unschedulable"
    fail_on_mismatch: false
  delegate_to: localhost
  register: verify

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ verify.report_table.splitlines() }}"

- name: Measure what each share delivers; fail below half the fair share
  gpufleet.sharing.gpu_verify:
    nodes: [gpu-a]
    pods: false
    probe: true
    probe_program: "{{ lookup('ansible.builtin.file', 'gpufleet_probe.py') }}"
    probe_min_share: 0.5
  delegate_to: localhost
"""

RETURN = r"""
device_plugin:
  description:
    - The device-plugin release the expectation was computed for and where its version came from
      (O(device_plugin_version), the ClusterPolicy's C(spec.devicePlugin.version), O(operator_version) or the default chart).
    - C(assumed) (also a warning) when O(operator_version) is not a released chart the collection knows, naming the
      released chart whose device plugin was assumed.
  returned: always
  type: dict
  sample: {version: v0.20.0, source: ClusterPolicy spec.devicePlugin.version}
removed_leftover_pods:
  description: Verification pods of earlier, interrupted runs that this run deleted before creating its own.
  returned: always
  type: list
  elements: str
ok:
  description: Every check passed.
  returned: always
  type: bool
  sample: true
report:
  description:
    - Run id, summary, per node the expectation, every check (node, kind, name, expected, actual, ok, message) and the pods.
    - C(probe), with O(probe), one row per node and resource type (see C(docs/sharing.md), "Measuring your own fleet").
    - C(gpus), per node its GPUs (index, UUID, model, the planned MIG layout) and each planned MIG instance on the
      GPU's memory-slice grid as the planner places it (profile, start, size, compute slices), with the device
      UUID of the instance the host's read found at that place (C(found)); C(other) lists instances found that
      the plan does not have there. The HTML report (C(fleet-report.html), C(docs/report.md)) draws it.
  returned: always
  type: dict
  sample: {run_id: 3f2a9c1e, summary: {ok: true, checks: 14, failed: 0, nodes: 2, failed_nodes: []}}
report_table:
  description: A table for people, one line per node, and a summary line; with O(probe), the probe table after it.
  returned: always
  type: str
  sample: "NODE   RESULT  ADVERTISED  PODS  PROBLEMS\ngpu-a  OK      gpu=32      1/1   -\nPASSED: 9 checks on 1 nodes, 0 failed"
report_junit:
  description: JUnit XML of the checks.
  returned: when O(junit) is true
  type: str
api_requests:
  description: HTTP requests sent to the API server.
  returned: always
  type: int
  sample: 12
"""

import binascii
import os
import time
from typing import Any, Dict, List, Mapping

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import labels_of
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._verify_io import compare
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import FLEET_ARGSPEC, METRICS_ARGSPEC, POD_ARGSPEC, PROBE_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import (
    HAS_JMESPATH, Check, build_report, option_problems, render_junit, render_table)
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pods import PodRun
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._dra_verify import pods_for_devices, report_nodes
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._probe import (
    junit_properties, probe_option_problems, render_probe_table)
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._probe_io import ProbeRun
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_gpus import node_gpu_layouts
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pod_metrics import metrics_option_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._metrics_io import MetricsScrape

ARGUMENT_SPEC = dict(
    **FLEET_ARGSPEC,
    dra_nodes=dict(type="list", elements="str", default=[]),
    pods=dict(type="bool", default=True),
    namespace=dict(type="str", default="gpufleet-verify"),
    namespace_labels=dict(type="dict", default={
        "pod-security.kubernetes.io/enforce": "restricted",
        "app.kubernetes.io/managed-by": "gpufleet.sharing",
    }),
    poll_interval=dict(type="float", default=2.0),
    parallel=dict(type="int", default=8),
    wait_timeout=dict(type="int", default=0),
    wait_interval=dict(type="float", default=2.0),
    run_id=dict(type="str"),
    checks=dict(type="list", elements="dict", default=[],
                options=dict(name=dict(type="str", required=True), expression=dict(type="str", required=True),
                             equals=dict(type="raw"))),
    junit=dict(type="bool", default=False),
    fail_on_mismatch=dict(type="bool", default=True),
    **POD_ARGSPEC,
    **PROBE_ARGSPEC,
    **METRICS_ARGSPEC,
)


def run(mod: ClusterModule) -> None:
    p = mod.params
    if p["checks"] and not HAS_JMESPATH:
        mod.fail("user checks need the jmespath Python library on the host running this module")
    start = time.monotonic()
    problems = option_problems(p) + probe_option_problems(p) + metrics_option_problems(p)
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    run_id = p["run_id"] or binascii.hexlify(os.urandom(4)).decode("ascii")
    checks, expected, nodes, waited, intent, devices = compare(mod)
    pods, probe, metrics = PodRun(mod.k8s, p, run_id, mod.warn), ProbeRun(mod.k8s, p, run_id, mod.warn), MetricsScrape(mod.k8s, p)
    pods.observers.append(metrics.observe)
    if p["pods"] or p["probe"]:
        pods.check_pull_secrets()
    hostnames = {n["metadata"]["name"]: labels_of(n).get("kubernetes.io/hostname") for n in nodes}
    claim_pods = pods_for_devices([d for node in sorted(devices) for d in devices[node]])  # DRA: bound to claims
    if p["pods"] and not mod.check_mode:
        pods.run(expected, hostnames, pods.wanted_for(expected) + claim_pods)
    if p["probe"] and not mod.check_mode:
        probe.run(expected, hostnames)
    checks += pods.checks + metrics.checks(pods.pods) + probe.checks
    mod.result["removed_leftover_pods"] = pods.leftovers
    report(mod, checks, expected, run_id, {"pods": pods.pods, "probe": probe.rows, "gpus": node_gpu_layouts(intent.hosts, expected),
                                           "dra_nodes": report_nodes(devices)},
           {"elapsed": time.monotonic() - start, "waited": waited})


def report(mod: ClusterModule, checks: List[Check], expected: List[ExpectedNode], run_id: str,
           runs: Dict[str, Any], times: Mapping[str, float]) -> None:
    p, requests = mod.params, mod.k8s.request_count
    dra_nodes = runs.pop("dra_nodes")
    summary = build_report(checks, expected, run_id,
                           extra=dict(runs, elapsed_seconds=round(times["elapsed"], 2), waited_seconds=times["waited"],
                                      api_requests=requests, check_mode=mod.check_mode))
    summary["nodes"] += dra_nodes
    table = "\n\n".join(t for t in (render_table(checks), render_probe_table(runs["probe"])) if t)
    mod.result.update(ok=summary["summary"]["ok"], report=summary, report_table=table, api_requests=requests)
    if p["junit"]:
        mod.result["report_junit"] = render_junit(checks, elapsed=times["elapsed"], properties=junit_properties(runs["probe"]))
    if not mod.result["ok"] and p["fail_on_mismatch"]:
        failed = [c.message for c in checks if not c.ok]
        mod.fail("verification failed on %s: %s" % (", ".join(summary["summary"]["failed_nodes"]), " | ".join(failed[:10])))


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


if __name__ == "__main__":
    main()

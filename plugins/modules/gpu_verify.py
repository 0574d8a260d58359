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
    read, plus one delete-collection call.
  - Returns a report as data (O(ignore:report)), a table for people (RV(report_table)) and optionally
    JUnit XML; the C(verify) role writes them to files.
  - Changes nothing lasting; the namespace it creates is left in place (empty) for the next run.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
attributes:
  check_mode:
    support: full
    description:
      - Only compares node status and labels with the plan. No namespace is created and no pod is run,
        so RV(report) has no pod checks.
  diff_mode:
    support: none
    description: Nothing lasting changes, so there is no diff.
  platform:
    platforms: posix
    support: full
    description: Talks to the Kubernetes API from wherever it runs, usually the controller.
options:
  nodes:
    description:
      - Node names to verify. With O(node_selector), the union; exactly these are verified.
      - Neither given, every GPU node (GPU Feature Discovery labels) and every node of the plan.
    type: list
    elements: str
    default: []
  node_selector:
    description: Label selector (C(key=value,...)) of further nodes to verify.
    type: str
  node_gpus:
    description:
      - Planned GPUs per node, a dict node name -> list of C(model), C(count), C(mig) (layout as profile
        -> count; omitted = MIG disabled) and C(product) (product name as nvidia-smi prints it; without it
        only the suffix of product labels is checked); or node name -> C({gpu_facts, mig_config,
        mig_configs}), the host's C(gpufleet_gpus) facts and its C(mig) role selection.
      - Nodes without an entry are read back from their GPU Feature Discovery labels, which checks the
        sharing arithmetic but not the MIG layout.
    type: dict
    default: {}
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
        with O(configs); either one makes this the plan.
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
  pod_command:
    description: Command of the verification container; its log must contain C(nvidia-smi -L) output.
    type: list
    elements: str
    default: [nvidia-smi, -L]
  pod_run_as_user:
    description: Non-root user id of the verification container.
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
    description: Seconds the pods get to finish (scheduling included).
    type: int
    default: 120
  poll_interval:
    description: Seconds between two polls of the pods (one list call per poll).
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
    description: Seconds between two polls of O(wait_timeout).
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
"""

RETURN = r"""
ok:
  description: Every check passed.
  returned: always
  type: bool
  sample: true
report:
  description: Run id, summary, per node the expectation, every check (node, kind, name, expected, actual, ok, message) and the pods.
  returned: always
  type: dict
  sample: {run_id: 3f2a9c1e, summary: {ok: true, checks: 14, failed: 0, nodes: 2, failed_nodes: []}}
report_table:
  description: A table for people, one line per node, and a summary line.
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
import re
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sharing.plugins.module_utils._k8s import (
    BUILTIN_TYPES,
    K8S_AUTH_ARGSPEC,
    K8sError,
    client_from_module,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils._sharing import (
    CONFIG_LABEL,
    SharingError,
    assign_nodes,
    configs_from_nodes,
    effective_config_name,
    expected_node,
    node_gpus_for,
    parse_configs,
    parse_rendered_config,
    selector_matches,
    parse_selector,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils._verify import (
    HAS_JMESPATH,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    RUN_ID_LABEL,
    Check,
    build_report,
    compare_node,
    pending_reason,
    pod_check,
    pod_manifest,
    pod_name,
    pods_for,
    render_junit,
    render_table,
    user_checks,
)

GPU_NODE_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.count")


def _labels(obj):
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def read_pod_log(k8s, name, namespace):
    """The pod's log text, or (None, reason) when it cannot be read."""
    try:
        return k8s.pod_log(name, namespace), None
    except K8sError as exc:
        return None, "cannot read the log: %s" % exc


class Verifier(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.checks = []
        self.expected = []
        self.pods = []
        self.nodes = {}
        self.waited = 0

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def run(self):
        if self.params["checks"] and not HAS_JMESPATH:
            self.fail("user checks need the jmespath Python library on the host running this module")
        start = time.monotonic()
        k8s = client_from_module(self.module)
        run_id = self.params["run_id"] or binascii.hexlify(os.urandom(4)).decode("ascii")
        if not re.match(r"^[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$", run_id):
            self.fail("run_id %r must be 1-16 lower-case letters, digits or '-' (it goes into pod names and labels)" % run_id)
        try:
            self.compare(k8s)
            if self.params["pods"] and not self.module.check_mode:
                self.run_pods(k8s, run_id)
        except K8sError as exc:
            self.fail(str(exc), api_requests=k8s.request_count)
        elapsed = time.monotonic() - start
        report = build_report(self.checks, self.expected, run_id,
                              extra={"pods": self.pods, "elapsed_seconds": round(elapsed, 2), "waited_seconds": self.waited,
                                     "api_requests": k8s.request_count, "check_mode": self.module.check_mode})
        result = dict(changed=False, ok=report["summary"]["ok"], report=report, report_table=render_table(self.checks),
                      api_requests=k8s.request_count)
        if self.params["junit"]:
            result["report_junit"] = render_junit(self.checks, elapsed=elapsed)
        if not result["ok"] and self.params["fail_on_mismatch"]:
            failed = [c.message for c in self.checks if not c.ok]
            self.module.fail_json(msg="verification failed on %s: %s" % (
                ", ".join(report["summary"]["failed_nodes"]), " | ".join(failed[:10])), **result)
        self.module.exit_json(**result)

    # -- node comparison -----------------------------------------------------------------------

    def compare(self, k8s):
        params = self.params
        nodes = dict((n["metadata"]["name"], n) for n in k8s.list("Node"))
        policy = None
        if params["cluster_policy_name"]:
            policy = k8s.get("ClusterPolicy", params["cluster_policy_name"])
            if policy is None:
                self.fail("ClusterPolicy %s not found" % params["cluster_policy_name"])
        else:
            policies = k8s.list("ClusterPolicy")
            if len(policies) > 1:
                self.fail("found %d ClusterPolicies; set cluster_policy_name" % len(policies))
            policy = policies[0] if policies else None
        spec = (policy or {}).get("spec") or {}
        # An unset strategy means the chart default, single (SPECS 7.2); no ClusterPolicy at all: none.
        mig_strategy = params["mig_strategy"] or (spec.get("mig") or {}).get("strategy") or ("single" if policy else "none")
        dp_config = (spec.get("devicePlugin") or {}).get("config") or {}

        try:
            selector = parse_selector(params["node_selector"], "node_selector")
        except SharingError as exc:
            self.fail(str(exc))
        # Explicit nodes/selector: exactly those. Otherwise every GPU node and every planned node.
        scope = set(params["nodes"])
        if selector:
            scope |= set(n for n, obj in nodes.items() if selector_matches(selector, _labels(obj)))
        explicit = bool(params["nodes"] or selector)
        if not explicit:
            scope |= set(params["node_gpus"])
            scope |= set(n for n, obj in nodes.items() if any(k in _labels(obj) for k in GPU_NODE_LABELS))

        # Which config each node should run, and whether it selects it by label.
        assigned = {}
        configs = {}
        default = None
        plan_given = params["configs"] is not None or bool(params["node_configs"])
        if plan_given:
            try:
                raw_configs = configs_from_nodes(params["node_configs"], params["configs"] or [])
                configs = parse_configs(raw_configs, params["default_config"] or None)
                present = dict((n, _labels(o)) for n, o in nodes.items())
                present.update(dict((n, {}) for n in scope if n not in present))
                assigned = assign_nodes(configs, present)
            except SharingError as exc:
                self.fail("invalid sharing plan: %s" % exc, problems=exc.problems)
            default = params["default_config"] if params["default_config"] is not None else dp_config.get("default")
            if not explicit:
                scope |= set(assigned)
        elif dp_config.get("name"):
            cm = k8s.get("ConfigMap", dp_config["name"], params["operator_namespace"])
            for key, text in sorted(((cm or {}).get("data") or {}).items()):
                try:
                    configs[key] = parse_rendered_config(key, text)
                except SharingError as exc:
                    self.checks.append(Check("(cluster)", "plan", key, "valid config", "invalid", False, str(exc)))
            if cm is None:
                self.checks.append(Check("(cluster)", "plan", dp_config["name"], "ConfigMap exists", "absent", False,
                                         "ConfigMap %s/%s named by the ClusterPolicy does not exist"
                                         % (params["operator_namespace"], dp_config["name"])))
            default = dp_config.get("default")

        def evaluate(nodes):
            checks, expected = [], []
            for name in sorted(scope):
                obj = nodes.get(name)
                if obj is None:
                    checks.append(Check(name, "node", "exists", "node exists", "not found", False,
                                        "node %s is not in the cluster" % name))
                    continue
                labels = _labels(obj)
                if plan_given:
                    config_name = assigned.get(name) or default or None
                    labelled = name in assigned
                else:
                    config_name = effective_config_name(labels, list(configs), default)
                    labelled = bool(labels.get(CONFIG_LABEL))
                try:
                    gpus = node_gpus_for(name, params["node_gpus"].get(name), labels, mig_strategy)
                    exp = expected_node(name, gpus, mig_strategy, configs.get(config_name) if config_name else None,
                                        labelled=labelled and config_name is not None)
                except SharingError as exc:
                    for problem in exc.problems:
                        checks.append(Check(name, "plan", "expectation", "computable", "error", False, problem))
                    continue
                expected.append(exp)
                checks.extend(compare_node(exp, obj))
                checks.extend(user_checks(name, obj, params["checks"]))
            return checks, expected

        checks, expected = evaluate(nodes)
        # Optionally give the device plugin and GFD time to publish (after a restart), one node list per poll.
        start = time.monotonic()
        while (params["wait_timeout"] > 0 and not self.module.check_mode and any(not c.ok for c in checks)
               and time.monotonic() - start < params["wait_timeout"]):
            time.sleep(params["wait_interval"])
            nodes = dict((n["metadata"]["name"], n) for n in k8s.list("Node"))
            checks, expected = evaluate(nodes)
        self.waited = round(time.monotonic() - start, 1) if params["wait_timeout"] > 0 else 0
        self.checks.extend(checks)
        self.expected = expected
        self.nodes = nodes

    # -- verification pods ---------------------------------------------------------------------

    def run_pods(self, k8s, run_id):
        params = self.params
        namespace = params["namespace"]
        wanted = [w for exp in self.expected for w in pods_for(exp)]
        if not wanted:
            return
        k8s.ensure_namespace(namespace, labels=params["namespace_labels"])
        created = {}
        selector = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE, RUN_ID_LABEL, run_id)

        def create(indexed):
            index, want = indexed
            name = pod_name(run_id, want.node, want.resource, index)
            hostname = _labels(self.nodes.get(want.node)).get("kubernetes.io/hostname") or want.node
            body = pod_manifest(want, name, namespace, run_id, params["pod_image"], params["pod_command"],
                                tolerations=params["pod_tolerations"], run_as_user=params["pod_run_as_user"],
                                hostname=hostname)
            body["metadata"]["annotations"].update(params["pod_annotations"] or {})
            k8s.create(body)
            created[name] = want

        try:
            self.parallel(create, list(enumerate(wanted)))
            self.collect(k8s, namespace, selector, created)
        finally:
            # by label, so that a pod whose create answer was lost is removed too
            self.cleanup(k8s, namespace, selector, created)

    def parallel(self, func, items):
        """Run func over items with up to O(parallel) threads; the first error is raised after all ran."""
        workers = max(1, min(self.params["parallel"], len(items)))
        if workers == 1:
            return [func(item) for item in items]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(func, items))

    def collect(self, k8s, namespace, selector, created):
        params = self.params
        start = time.monotonic()
        finished = {}
        live = {}
        while True:
            for pod in k8s.list("Pod", namespace=namespace, label_selector=selector):
                live[pod["metadata"]["name"]] = pod
                phase = (pod.get("status") or {}).get("phase")
                name = pod["metadata"]["name"]
                if name in created and phase in ("Succeeded", "Failed") and name not in finished:
                    finished[name] = (phase, round(time.monotonic() - start, 1))
            if len(finished) == len(created) or time.monotonic() - start >= params["pod_timeout"]:
                break
            time.sleep(params["poll_interval"])
        events = []
        if len(finished) < len(created):
            events = k8s.list("Event", namespace=namespace)
        logs = dict(zip(sorted(finished), self.parallel(lambda name: read_pod_log(k8s, name, namespace), sorted(finished))))
        for name, want in sorted(created.items()):
            entry = {"name": name, "node": want.node, "resource": want.resource, "expected": want.describe()}
            if name in finished:
                phase, seconds = finished[name]
                log, log_error = logs[name]
                reason = ""
                if phase == "Failed":
                    reason = pending_reason(live.get(name), []) if log_error is None else log_error
                    status = (live.get(name) or {}).get("status") or {}
                    if status.get("reason"):
                        reason = "%s: %s" % (status.get("reason"), status.get("message") or "")
                check = pod_check(want, phase if log_error is None else "Failed", log or "", reason or (log_error or ""))
                entry.update(outcome=phase, seconds=seconds, log=log or "", reason=reason)
            else:
                mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
                reason = pending_reason(live.get(name), mine)
                check = pod_check(want, "Timeout", reason="%s after %ds" % (reason, params["pod_timeout"]))
                entry.update(outcome="Timeout", seconds=params["pod_timeout"], log="", reason=reason)
            entry["ok"] = check.ok
            self.pods.append(entry)
            self.checks.append(check)

    def cleanup(self, k8s, namespace, selector, created):
        """Delete this run's pods, also after a failure: one delete-collection, one by one as fallback."""
        if not created:
            return
        try:
            k8s.request("DELETE", BUILTIN_TYPES["Pod"].path(namespace=namespace),
                        query=[("labelSelector", selector), ("gracePeriodSeconds", 0)])
            return
        except K8sError as exc:
            if exc.status not in (404, 405):
                self.module.warn("delete-collection of verification pods failed (%s); deleting one by one" % exc)
        for name in created:
            try:
                k8s.delete("Pod", name, namespace=namespace, grace_period_seconds=0)
            except K8sError as exc:
                self.module.warn("could not delete verification pod %s/%s: %s" % (namespace, name, exc))


def main():
    argument_spec = dict(
        nodes=dict(type="list", elements="str", default=[]),
        node_selector=dict(type="str"),
        node_gpus=dict(type="dict", default={}),
        configs=dict(type="list", elements="raw"),
        node_configs=dict(type="dict", default={}),
        default_config=dict(type="str"),
        mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
        cluster_policy_name=dict(type="str"),
        operator_namespace=dict(type="str", default="gpu-operator"),
        pods=dict(type="bool", default=True),
        namespace=dict(type="str", default="gpufleet-verify"),
        namespace_labels=dict(type="dict", default={
            "pod-security.kubernetes.io/enforce": "restricted",
            "app.kubernetes.io/managed-by": "gpufleet.sharing",
        }),
        pod_image=dict(type="str", default="nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"),
        pod_command=dict(type="list", elements="str", default=["nvidia-smi", "-L"]),
        pod_run_as_user=dict(type="int", default=65534),
        pod_annotations=dict(type="dict", default={}),
        pod_tolerations=dict(type="list", elements="dict"),
        pod_timeout=dict(type="int", default=120),
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
    )
    argument_spec.update(K8S_AUTH_ARGSPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    Verifier(module).run()


if __name__ == "__main__":
    main()

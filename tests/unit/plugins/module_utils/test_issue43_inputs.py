"""Issue 43 (4): inputs that used to be accepted silently, refused by the check the module and the preflight
share (each message names the input and where it is)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import MAX_TAINTS, taint_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._probe import probe_option_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import lock_option_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operands import operand_option_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import PER_POD_METRICS_KNOWN, per_pod_metrics_warnings

PROBE = {"probe": True, "probe_program": "print('gpufleet-probe')", "probe_image": "busybox:1",
         "probe_python": "python3", "probe_seconds": 5, "probe_min_share": 0.0, "probe_max_inflation": 0.0}


def test_kubelet_and_cloud_provider_taint_keys_are_refused():
    """The node lifecycle controller, the kubelet and the cloud provider own these keys (k8s.io/api
    core/v1 well_known_taints.go, k8s.io/cloud-provider api/well_known_taints.go): a taint we set there is
    removed or fought over."""
    for key in ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/out-of-service",
                "node.cloudprovider.kubernetes.io/uninitialized", "node.cloudprovider.kubernetes.io/shutdown",
                "node-role.kubernetes.io/control-plane", "kubernetes.io/x", "k8s.io/x", "sub.k8s.io/x"):
        problems = taint_problems([{"key": key, "effect": "NoSchedule"}], "host a (gpufleet_node_taints)")
        assert problems and "host a (gpufleet_node_taints): taint 1: key %r" % key in problems[0], key
        assert "reserved for Kubernetes" in problems[0]
    for key in ("dedicated", "example.com/gpu", "kubernetes.io.example.com/x", "mykubernetes.io/x"):
        assert taint_problems([{"key": key, "effect": "NoSchedule"}], "x") == [], key


def test_too_many_taints_on_one_node_are_refused():
    taints = [{"key": "t%d" % i, "effect": "NoSchedule"} for i in range(1500)]
    assert taint_problems(taints, "node gpu-1") == ["node gpu-1: 1500 taints, at most %d per node" % MAX_TAINTS]
    assert taint_problems(taints[:MAX_TAINTS], "node gpu-1") == []


def test_probe_python_is_an_interpreter_never_a_shell_string():
    for bad in ("python3; id", "python3 -c", "$(id)", "`id`", "python3\nid", "../python3", "-c", "python3|sh", "py thon"):
        problems = probe_option_problems(dict(PROBE, probe_python=bad))
        assert any(p.startswith("probe_python %r is not an interpreter" % bad) for p in problems), (bad, problems)
    for good in ("python3", "python3.12", "/usr/bin/python3", "/opt/conda/bin/python"):
        assert probe_option_problems(dict(PROBE, probe_python=good)) == [], good


def test_rollout_lock_node_annotation_must_be_an_annotation_key():
    assert lock_option_problems({"node_annotation": "bad annotation", "namespace": "kube-system",
                                 "name": "gpufleet-sharing-rollout"}) == [
        "node_annotation: key 'bad annotation' is not a valid label or annotation key ([DNS-1123 subdomain/]name of "
        "at most 63 letters, digits, '-', '_' or '.')"]
    assert lock_option_problems({"node_annotation": "gpufleet.sharing/rollout", "namespace": "kube-system",
                                 "name": "gpufleet-sharing-rollout"}) == []


def test_an_empty_operand_list_is_refused():
    assert operand_option_problems([]) == ["operands: empty: name at least one operand (or leave the option out for "
                                           "the default list)"]
    assert operand_option_problems(["device-plugin", "nope"])[0].startswith("operands: unknown operand(s) nope")
    assert operand_option_problems(["device-plugin"]) == []


def test_per_pod_metrics_on_an_exporter_release_not_known_warns():
    newest = ".".join(map(str, PER_POD_METRICS_KNOWN))
    assert per_pod_metrics_warnings("4.6.0-%s-distroless" % newest) == []
    warnings = per_pod_metrics_warnings("4.9.0-9.9.9-ubuntu22.04")
    assert len(warnings) == 1 and "exporter 9.9.9" in warnings[0] and "per_pod_metrics" in warnings[0]

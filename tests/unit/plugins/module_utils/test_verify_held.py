"""Verification pods only for devices that are free (issue 38): after a per-GPU MIG change the pods on
the untouched GPUs keep their devices, and a verification pod for a resource they hold entirely would
never be scheduled. Such a resource is reported as not tested by a pod, with the reason."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _expected, _node_gpus
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof import _verify as v


def pod(requests, phase="Running", labels=None):
    return {"metadata": {"name": "p", "namespace": "w", "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": requests}}]}, "status": {"phase": phase}}


def expected():
    gpus = _node_gpus.node_gpus_from_plan([
        {"model": "H100-80GB", "count": 1}, {"model": "H100-80GB", "count": 1, "mig": {"1g.10gb": 7}}])
    return _expected.expected_node("n", gpus, "mixed", None)


def test_held_resources_count_the_running_pods_requests_only():
    pods = [pod({"nvidia.com/gpu": "1"}), pod({"nvidia.com/gpu": 1}, phase="Succeeded"),
            pod({"nvidia.com/mig-1g.10gb": "2", "cpu": "1"}),
            pod({"nvidia.com/gpu": "1"}, labels={"app.kubernetes.io/managed-by": "gpufleet.sharing"})]
    assert v.held_resources(pods, skip_label=("app.kubernetes.io/managed-by", "gpufleet.sharing")) == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2}


def test_a_resource_held_entirely_gets_no_pod_and_says_why():
    exp = expected()
    wanted = v.pods_for(exp, {"nvidia.com/gpu": 1})
    assert [w.resource for w in wanted] == ["nvidia.com/mig-1g.10gb"]
    checks = v.held_checks(exp, {"nvidia.com/gpu": 1})
    assert [(c.kind, c.name, c.ok) for c in checks] == [("pod", "nvidia.com/gpu", True)]
    assert "all 1 in use by running pods" in checks[0].actual


def test_free_devices_are_tested_as_before():
    exp = expected()
    assert [w.resource for w in v.pods_for(exp, {"nvidia.com/mig-1g.10gb": 6})] == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    assert v.held_checks(exp, {}) == [] and v.pods_for(exp) == v.pods_for(exp, {})

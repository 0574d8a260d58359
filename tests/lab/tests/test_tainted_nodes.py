"""Issue 13 (4): tainted GPU nodes. node_taints sets the inventory's taints; the operand DaemonSets
tolerate them through gpu_operator's tolerations (daemonsets.tolerations, docs/reference/specs.md §17.3);
the lab's DaemonSet controller places no pod on a node whose taint its template does not tolerate.
"""

from __future__ import annotations

# The harness and the fixtures (lab, helm, helm_binary) of the operator module tests.
from test_cluster_modules_operator import helm, helm_binary, lab, operator_args  # noqa: F401 pylint: disable=unused-import

DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def operand_nodes(lab) -> dict:  # noqa: F811
    found: dict = {}
    for pod in lab.store.items("v1/pods", "gpu-operator"):
        found.setdefault(pod["metadata"]["labels"].get("app"), set()).add(pod["spec"].get("nodeName"))
    return found


def test_invalid_taint_is_refused_and_changes_nothing(lab):  # noqa: F811
    before = lab.rv()
    failed = lab.run("node_taints", {"kubeconfig": lab.kubeconfig, "nodes": [
        {"node": "gpu-a", "taints": [dict(DEDICATED, effect="NoScheduleX")]},
        {"node": "gpu-c", "taints": [DEDICATED]}]})
    assert failed.get("failed"), failed
    assert "node gpu-a: taint 1 (dedicated): invalid effect 'NoScheduleX'" in failed["msg"]
    assert "node gpu-c: not found" in failed["msg"]
    assert lab.rv() == before


def test_operands_tolerate_the_declared_taints(lab, helm):  # noqa: F811
    args = {"kubeconfig": lab.kubeconfig, "nodes": [{"node": "gpu-a", "taints": [DEDICATED]}]}
    tainted = lab.run("node_taints", args)
    assert tainted["changed"] and tainted["nodes"]["gpu-a"] == [DEDICATED], tainted
    assert not lab.run("node_taints", args)["changed"]
    plain = lab.run("gpu_operator", operator_args(lab, helm), env=helm.environment)
    assert plain["cluster_policy_state"] == "ready", plain
    assert "gpu-a" not in operand_nodes(lab)["nvidia-device-plugin-daemonset"]  # the product without tolerations
    tolerating = lab.run("gpu_operator", operator_args(lab, helm, tolerations=[TOLERATION]), env=helm.environment)
    assert tolerating["cluster_policy_state"] == "ready", tolerating
    for ds in lab.store.items("apps/v1/daemonsets", "gpu-operator"):
        tolerations = ds["spec"]["template"]["spec"]["tolerations"]
        assert TOLERATION in tolerations and {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert "gpu-a" in operand_nodes(lab)["nvidia-device-plugin-daemonset"]
    removed = lab.run("node_taints", {"kubeconfig": lab.kubeconfig, "nodes": [{"node": "gpu-a", "taints": []}]})
    assert removed["changed"] and removed["nodes"]["gpu-a"] == []

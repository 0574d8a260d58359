"""Issue 13 (4): tainted GPU nodes. node_taints sets the inventory's taints; the operand DaemonSets
tolerate them through gpu_operator's tolerations (daemonsets.tolerations, docs/reference/specs.md §17.3);
the lab's DaemonSet controller places no pod on a node whose taint its template does not tolerate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from labtools import BUILD, REPO, wait_until
# The harness and the fixtures (lab, helm, helm_binary) of the operator module tests.
from test_cluster_modules_operator import CHART, helm, lab, operator_args  # noqa: F401 pylint: disable=unused-import

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


def _role_run(lab, helm, tmp_path, host_vars: dict, name: str):  # noqa: F811
    """The gpu_operator role as site.yml runs it: the inventory's GPU host gpu-a with ``host_vars``."""
    inventory, playbook = tmp_path / ("%s-hosts.json" % name), tmp_path / ("%s.yml" % name)
    inventory.write_text(json.dumps({"gpu_hosts": {"hosts": {"gpu-a": host_vars}}}))
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "roles": [{
        "role": "gpufleet.sharing.gpu_operator", "gpu_operator_chart_ref": CHART, "gpu_operator_chart_version": "",
        "gpu_operator_repo_url": "", "gpu_operator_helm_binary": helm.binary, "gpu_operator_kubeconfig": lab.kubeconfig,
        "gpu_operator_mig_manager_enabled": False, "gpu_operator_driver_enabled": False,
        "gpu_operator_wait_timeout": 60, "gpu_operator_wait_interval": 0.5}]}]))
    return subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-i", "localhost,",
                           "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, **helm.environment))


def test_taints_no_longer_declared_are_removed_before_the_tolerations_go(lab, helm, tmp_path):  # noqa: F811
    """Issue 21 (1): removing gpufleet_node_taints from the inventory left the taint on the node while the
    operator's tolerations were dropped: the device plugin left and the node advertised no GPU."""
    tainted = _role_run(lab, helm, tmp_path, {"gpufleet_node_taints": [DEDICATED]}, "tainted")
    assert tainted.returncode == 0, tainted.stdout[-3000:] + tainted.stderr[-2000:]
    assert DEDICATED in lab.store.get("v1/nodes", None, "gpu-a")["spec"]["taints"]
    assert "gpu-a" in operand_nodes(lab)["nvidia-device-plugin-daemonset"]
    plain = _role_run(lab, helm, tmp_path, {}, "plain")
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-2000:]
    node = lab.store.get("v1/nodes", None, "gpu-a")
    assert DEDICATED not in (node["spec"].get("taints") or []), node["spec"]
    wait_until("the device plugin back on gpu-a",
               lambda: "gpu-a" in operand_nodes(lab).get("nvidia-device-plugin-daemonset", set()), timeout=60)
    for ds in lab.store.items("apps/v1/daemonsets", "gpu-operator"):
        assert TOLERATION not in ds["spec"]["template"]["spec"]["tolerations"]


def test_a_declared_taint_no_operand_tolerates_is_refused_before_any_change(lab):  # noqa: F811
    """Issue 21 (1): node_taints refuses to leave a taint it sets where the operands' tolerations (the ones
    the release will have) tolerate it not, naming the node and the taint; nothing is changed."""
    before = lab.rv()
    refused = lab.run("node_taints", {"kubeconfig": lab.kubeconfig, "operand_tolerations": [],
                                      "nodes": [{"node": "gpu-a", "taints": [DEDICATED]}]})
    assert refused.get("failed"), refused
    assert "node gpu-a: taint dedicated=gpu:NoSchedule would be tolerated by no operand" in refused["msg"], refused
    assert lab.rv() == before
    ok = lab.run("node_taints", {"kubeconfig": lab.kubeconfig, "operand_tolerations": [TOLERATION],
                                 "nodes": [{"node": "gpu-a", "taints": [DEDICATED]}, {"node": "no-such-node", "taints": []}]})
    assert ok["changed"] and ok["nodes"] == {"gpu-a": [DEDICATED]}, ok

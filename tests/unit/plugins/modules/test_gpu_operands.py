"""gpu_operands in process over FakeK8s: pause, restore to previous values, idempotence, check mode,
an interrupted run, bad input."""

from __future__ import annotations

import json

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operands import PAUSED, PAUSED_ANNOTATION
from ansible_collections.gpufleet.sharing.plugins.modules import gpu_operands
from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

DP = "nvidia.com/gpu.deploy.device-plugin"
DCGMX = "nvidia.com/gpu.deploy.dcgm-exporter"
NS = "gpu-operator"


def _fake():
    fake = FakeK8s()
    fake.add("Namespace", NS)
    fake.add("Node", "n1", metadata={"name": "n1", "labels": {DP: "true", DCGMX: "false", "other": "x"}})
    return fake


def _pod(fake, app, ready=True):
    fake.add("DaemonSet", app, NS)
    fake.add("Pod", app + "-abcde", NS, metadata={"name": app + "-abcde", "namespace": NS, "labels": {"app": app}},
             spec={"nodeName": "n1"},
             status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]})


def _node(fake):
    return fake.obj("Node", "n1")["metadata"]


def test_pause_then_restore_keeps_false_false(monkeypatch):
    fake = _fake()
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and result["changed"]
    assert _node(fake)["labels"][DP] == PAUSED and _node(fake)["labels"][DCGMX] == "false"
    assert json.loads(_node(fake)["annotations"][PAUSED_ANNOTATION])[DCGMX] == "false"
    again, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and not again["changed"]
    _pod(fake, "nvidia-device-plugin-daemonset")
    result, failed = run(gpu_operands, {"node": "n1", "state": "restored"}, fake, monkeypatch)
    assert not failed and result["changed"]
    assert _node(fake)["labels"][DP] == "true" and _node(fake)["labels"][DCGMX] == "false"
    assert PAUSED_ANNOTATION not in _node(fake)["annotations"]
    again, failed = run(gpu_operands, {"node": "n1", "state": "restored"}, fake, monkeypatch)
    assert not failed and not again["changed"]


def test_pause_waits_for_the_pods_to_go_and_fails_with_the_record_kept(monkeypatch):
    fake = _fake()
    _pod(fake, "nvidia-device-plugin-daemonset")  # nothing deletes it in the fake
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused", "timeout": 4}, fake, monkeypatch)
    assert failed and "nvidia-device-plugin-daemonset still on the node" in result["msg"]
    assert "state=restored" in result["msg"]
    assert PAUSED_ANNOTATION in _node(fake)["annotations"]


def test_restore_waits_until_the_operands_are_ready(monkeypatch):
    fake = _fake()
    run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    _pod(fake, "nvidia-device-plugin-daemonset", ready=False)
    result, failed = run(gpu_operands, {"node": "n1", "state": "restored", "timeout": 4}, fake, monkeypatch)
    assert failed and "not Ready" in result["msg"]
    assert PAUSED_ANNOTATION in _node(fake)["annotations"]  # a re-run can still restore


def test_check_mode_sends_dry_runs_only(monkeypatch):
    fake = _fake()
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch, check_mode=True)
    assert not failed and result["changed"] and result["labels"] == {DP: PAUSED}
    assert fake.writes == [] and fake.dry_writes


def test_unknown_operand_is_a_clear_error_and_changes_nothing(monkeypatch):
    fake = _fake()
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused", "operands": ["device-plugin", "drivr"]},
                         fake, monkeypatch)
    assert failed and "unknown operand(s) drivr" in result["msg"]
    assert fake.writes == [] and fake.dry_writes == []


def _validator_pod(fake, app, name, uid, daemonset=True):
    if daemonset:
        fake.add("DaemonSet", app, NS)
    fake.add("Pod", name, NS, metadata={"name": name, "namespace": NS, "labels": {"app": app}, "uid": uid},
             spec={"nodeName": "n1"}, status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})


def test_pause_deletes_the_finished_validation_pods(monkeypatch):
    fake = _fake()
    _validator_pod(fake, "nvidia-cuda-validator", "nvidia-cuda-validator-x1", "u1", daemonset=False)
    _validator_pod(fake, "nvidia-device-plugin-validator", "nvidia-device-plugin-validator-x2", "u2", daemonset=False)
    _validator_pod(fake, "nvidia-operator-validator", "nvidia-operator-validator-x3", "u3")
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed
    assert sorted(result["restarted"]) == [NS + "/nvidia-cuda-validator-x1", NS + "/nvidia-device-plugin-validator-x2"]
    assert fake.obj("Pod", "nvidia-operator-validator-x3", NS) is not None  # not stopped


def test_restore_restarts_the_operator_validator_and_waits_for_its_replacement(monkeypatch):
    fake = _fake()
    run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    _validator_pod(fake, "nvidia-operator-validator", "nvidia-operator-validator-x3", "u3")
    result, failed = run(gpu_operands, {"node": "n1", "state": "restored", "timeout": 4}, fake, monkeypatch)
    # The fake has no DaemonSet controller: no replacement comes, and the record stays for a re-run.
    assert failed and "nvidia-operator-validator not Ready yet" in result["msg"], result
    assert fake.obj("Pod", "nvidia-operator-validator-x3", NS) is None
    assert PAUSED_ANNOTATION in _node(fake)["annotations"]
    _validator_pod(fake, "nvidia-operator-validator", "nvidia-operator-validator-y4", "u4")
    fake.objects.pop(("DaemonSet", NS, "nvidia-operator-validator"))  # a validator without its DaemonSet
    result, failed = run(gpu_operands, {"node": "n1", "state": "restored", "timeout": 4}, fake, monkeypatch)
    assert not failed and result["restarted"] == [NS + "/nvidia-operator-validator-y4"]
    assert PAUSED_ANNOTATION not in _node(fake)["annotations"]


CLIENT = "nvidia.com/gpu.deploy.client"


def _client_node(fake, value="true"):
    _node(fake)["labels"][CLIENT] = value


def _agent(fake, name="agent-abcde", namespace="monitoring"):
    fake.add("Pod", name, namespace, metadata={
        "name": name, "namespace": namespace,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": True}]},
        spec={"nodeName": "n1", "nodeSelector": {CLIENT: "true"}}, status={"phase": "Running"})


def test_pause_pauses_the_client_label_and_restore_puts_it_back(monkeypatch):
    fake = _fake()
    _client_node(fake)
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and result["labels"] == {DP: PAUSED, CLIENT: PAUSED}
    assert _node(fake)["labels"][CLIENT] == PAUSED
    assert json.loads(_node(fake)["annotations"][PAUSED_ANNOTATION])[CLIENT] == "true"
    assert CLIENT in result["waited_for"]
    again, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and not again["changed"]
    _pod(fake, "nvidia-device-plugin-daemonset")
    result, failed = run(gpu_operands, {"node": "n1", "state": "restored"}, fake, monkeypatch)
    assert not failed and result["labels"][CLIENT] == "true" and _node(fake)["labels"][CLIENT] == "true"


def test_pause_leaves_a_node_without_the_client_label_or_with_false_alone(monkeypatch):
    fake = _fake()
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and CLIENT not in result["labels"] and CLIENT not in _node(fake)["labels"]
    assert CLIENT not in json.loads(_node(fake)["annotations"][PAUSED_ANNOTATION])
    fake = _fake()
    _client_node(fake, "false")
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch)
    assert not failed and CLIENT not in result["labels"] and _node(fake)["labels"][CLIENT] == "false"


def test_pause_waits_for_the_third_party_client_pods_and_names_them(monkeypatch):
    fake = _fake()
    _client_node(fake)
    _agent(fake)  # nothing deletes it in the fake
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused", "timeout": 4}, fake, monkeypatch)
    assert failed and "monitoring/agent-abcde" in result["msg"] and CLIENT in result["msg"], result
    assert _node(fake)["labels"][CLIENT] == PAUSED
    assert json.loads(_node(fake)["annotations"][PAUSED_ANNOTATION])[CLIENT] == "true"  # a re-run restores it


def test_client_label_check_mode_and_opt_out(monkeypatch):
    fake = _fake()
    _client_node(fake)
    _agent(fake)
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused"}, fake, monkeypatch, check_mode=True)
    assert not failed and result["labels"][CLIENT] == PAUSED and fake.writes == []
    assert _node(fake)["labels"][CLIENT] == "true"
    result, failed = run(gpu_operands, {"node": "n1", "state": "paused", "gpu_clients": False, "timeout": 4},
                         fake, monkeypatch)
    assert not failed and CLIENT not in result["labels"] and _node(fake)["labels"][CLIENT] == "true"

"""node_maintenance as the rollout uses it: a node is never left cordoned without its reason (issue 10 #8)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _cluster_module
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.modules import node_maintenance

from test_node_maintenance import NODE, Api, run  # pylint: disable=import-error

KEY = "gpufleet.sharing/rollout"
OWNER = "gpufleet.sharing/cordoned-by"


@pytest.fixture
def api(monkeypatch):
    server = Api()
    # The rollout's own cordon: marked as the collection's (gpufleet.sharing/cordoned-by), with its reason.
    server.add(NODE, {"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": "gpu-a", "annotations": {KEY: "failed: x", OWNER: "run-1"}},
                      "spec": {"unschedulable": True}})
    monkeypatch.setattr(_cluster_module, "client_from_module",
                        lambda _module, dry_run=False: K8sClient(server, sleep=lambda s: None, dry_run=dry_run))
    return server


def test_uncordon_lifts_the_cordon_before_removing_the_reason(api, capsys):
    states = []
    api.on_label = lambda _api, _path, body: states.append(
        (bool(body["spec"].get("unschedulable")), KEY in (body["metadata"].get("annotations") or {})))
    result = run(node_maintenance, {"node": "gpu-a", "state": "uncordon", "annotations": {KEY: None}}, capsys)
    assert result["changed"] and not result.get("failed"), result
    assert (True, False) not in states, "the node was cordoned without its reason: %s" % states
    assert states[-1] == (False, False)


def test_cordon_writes_the_reason_before_the_cordon(api, capsys):
    api.objects[NODE]["spec"] = {}
    api.objects[NODE]["metadata"]["annotations"] = {}
    states = []
    api.on_label = lambda _api, _path, body: states.append(
        (bool(body["spec"].get("unschedulable")), KEY in (body["metadata"].get("annotations") or {})))
    run(node_maintenance, {"node": "gpu-a", "state": "cordon", "annotations": {KEY: "in progress"}}, capsys)
    assert (True, False) not in states and states[-1] == (True, True), states

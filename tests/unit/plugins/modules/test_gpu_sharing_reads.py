# -*- coding: utf-8 -*-
"""gpu_sharing reads the node list once on a run that writes nothing (issue 26 item 3).

The wait for the nodes to advertise the plan judges the plan's own read first when the run wrote
nothing; a later poll, and every poll after a real write, lists the nodes again.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import gpu_sharing  # noqa: E402

TS2 = {"name": "ts2", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}], "nodes": ["gpu-a"]}
ADVERTISED = {"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "time-slicing",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED", "nvidia.com/mps.capable": "false",
              "nvidia.com/mig.strategy": "mixed"}


class CountingK8s(FakeK8s):
    """FakeK8s that counts the node lists, and whose gpu-a advertises the plan once ``advertises``
    says so (given the fake's clock and whether its config label was written)."""

    def __init__(self, advertises):
        super().__init__()
        self.node_lists = 0
        self.advertises = advertises
        self.labelled = False

    def list(self, kind, namespace=None, label_selector=None, field_selector=None):
        if kind == "Node":
            self.node_lists += 1
            if self.advertises(self):
                node = self.obj("Node", "gpu-a")
                node["status"] = {"capacity": {"nvidia.com/gpu": "16"}, "allocatable": {"nvidia.com/gpu": "16"}}
                node["metadata"]["labels"].update(ADVERTISED)
        return super().list(kind, namespace, label_selector, field_selector)

    def set_node_labels(self, node, labels, dry_run=None):
        self.labelled = self.labelled or not (self.dry_run if dry_run is None else dry_run)
        return super().set_node_labels(node, labels, dry_run)


def cluster(advertises, labelled=True):
    fake = CountingK8s(advertises)
    fake.add("ClusterPolicy", "cluster-policy", spec={"mig": {}, "devicePlugin": {}})
    labels = {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.replicas": "1"}
    if labelled:
        labels["nvidia.com/device-plugin.config"] = "ts2"
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a", "labels": labels},
             status={"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}})
    fake.add("Node", "cpu-1", metadata={"name": "cpu-1", "labels": {}})
    return fake


def converged(advertises, monkeypatch):
    """The ConfigMap and the ClusterPolicy as a first run leaves them; gpu-a labelled."""
    fake = cluster(advertises)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": False}, fake, monkeypatch)
    assert not failed, result.get("msg")
    fake.node_lists = 0
    return fake


def test_a_no_op_reads_the_node_list_once(monkeypatch):
    fake = converged(lambda _fake: True, monkeypatch)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": True}, fake, monkeypatch)
    assert not failed, result.get("msg")
    assert result["changed"] is False and result["wait"]["nodes"] == ["gpu-a"] and result["wait"]["waited"] == 0
    assert fake.node_lists == 1


def test_a_no_op_whose_nodes_do_not_advertise_yet_still_waits_reading_again(monkeypatch):
    """Nothing written, but gpu-a still restarting from an earlier run: the first read is judged
    (not advertised), then each poll lists the nodes again until it is."""
    fake = converged(lambda f: f.time >= 4, monkeypatch)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": True, "wait_interval": 2}, fake, monkeypatch)
    assert not failed, result.get("msg")
    assert result["changed"] is False and result["wait"]["waited"] == 4
    assert result["wait"]["progress"][0].startswith("0s: waiting for 1 node(s): gpu-a capacity nvidia.com/gpu is 8")
    assert fake.node_lists == 3  # the plan's read (t=0), then t=2 and t=4


def test_a_no_op_that_never_advertises_times_out_as_before(monkeypatch):
    fake = converged(lambda _fake: False, monkeypatch)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": True, "wait_timeout": 4, "wait_interval": 2},
                         fake, monkeypatch)
    assert failed and "timed out after 4s waiting for 1 node(s)" in result["msg"]
    assert fake.node_lists == 3


def test_after_a_write_the_wait_reads_the_nodes_again(monkeypatch):
    """The label is written, the node advertises right after: the first poll must not judge the
    read taken before the write (it would see the old capacity and wait one interval more)."""
    fake = cluster(lambda f: f.labelled, labelled=False)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": True}, fake, monkeypatch)
    assert not failed, result.get("msg")
    assert result["changed"] is True and result["labels_changed"] == {"gpu-a": {"before": None, "after": "ts2"}}
    assert result["wait"]["waited"] == 0 and result["wait"]["progress"] == []
    assert fake.node_lists == 2


def test_check_mode_reads_once_and_waits_for_nothing(monkeypatch):
    fake = cluster(lambda _fake: False, labelled=False)
    result, failed = run(gpu_sharing, {"configs": [TS2], "wait": True}, fake, monkeypatch, check_mode=True)
    assert not failed, result.get("msg")
    assert result["changed"] is True and "wait" not in result and fake.writes == [] and fake.node_lists == 1

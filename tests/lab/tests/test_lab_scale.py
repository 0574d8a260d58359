"""The lab's own cost per node (issue 26, item 4): what the kubelet reads to admit one pod.

Counted, not timed: the objects the store copies out for a read. Admitting a pod asks the node's
device plugin for its devices; that read must cost the node's pods, not every operand pod of the
cluster (which made starting N nodes' operands cost N^2 copies: 1,000 pods at 200 nodes did not
start within the lab inventory's 120 s on a slower machine).
"""

from __future__ import annotations

from typing import Any, List, Tuple

from gpulab.cluster.operator import migmanager

from test_cluster_behaviour_operator import Lab, wait_for  # pylint: disable=import-error

NODES = 8


def _count_reads(store: Any, reads: List[Tuple[str, Any, int]]) -> None:
    items = store.items

    def counted(key, namespace=None, label_selector=None, field_selector=None):
        found = items(key, namespace, label_selector, field_selector)
        reads.append((key, field_selector, len(found)))
        return found
    store.items = counted


def test_admission_reads_only_the_nodes_pods(tmp_path):
    lab = Lab(tmp_path, {"gpu-%02d" % n: [("H100-80GB", 1)] for n in range(NODES)})
    try:
        lab.policy({"mig": {"strategy": "single"}})
        wait_for("ClusterPolicy ready", lambda: lab.policy_state() == "ready", timeout=300)  # a loaded machine is slow
        wait_for("device plugins", lambda: all(lab.controllers.device_plugin.node_devices("gpu-%02d" % n)
                                               for n in range(NODES)), timeout=120)
        operand_pods = len(lab.store.items("v1/pods", "gpu-operator"))
        assert operand_pods >= 3 * NODES
        reads: List[Tuple[str, Any, int]] = []
        _count_reads(lab.controllers.store, reads)
        lab.controllers.stop()  # the loop's own passes would add their reads
        reads.clear()
        assert lab.controllers.device_plugin.node_devices("gpu-03") is not None  # what _admit asks
        copied = sum(count for key, _selector, count in reads if key == "v1/pods")
        assert copied <= operand_pods // NODES + 2, reads
    finally:
        lab.stop()


def test_mig_managers_parse_one_configmap_once(tmp_path, monkeypatch):
    """Each node's MIG manager reads the same mig-parted ConfigMap: parsed once per text, not once per node."""
    parses: List[int] = []
    real = migmanager.yaml.safe_load

    def counted(text):
        parses.append(len(text))
        return real(text)
    monkeypatch.setattr(migmanager.yaml, "safe_load", counted)
    lab = Lab(tmp_path, {"mig-%02d" % n: [("H100-80GB", 1)] for n in range(4)})
    try:
        lab.policy({"mig": {"strategy": "single"}})
        wait_for("every MIG manager applied its config", lambda: all(
            lab.labels("mig-%02d" % n).get("nvidia.com/mig.config.state") == "success" for n in range(4)), timeout=300)
        assert len(parses) == 1, parses
    finally:
        lab.stop()

"""Each node's GPUs for the reports (issue 24): the planner's placements, the host's instances and UUIDs."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import HostPlan
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_gpus import node_gpu_layouts, placed
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import NodeGpus

A100 = find_model("A100-40GB")
LAYOUT = {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}


def fact(instances, index=0):
    return {"index": index, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-%d" % index, "pci_device_id": "0x20B010DE",
            "mig": {"capable": True, "current": bool(instances), "pending": bool(instances), "instances": [
                {"profile": p, "placement": {"start": s, "size": z}, "uuid": "MIG-%s-%d" % (p, s), "compute_instances": []}
                for p, s, z in instances]}}


# where the lab's (and a real) driver puts them without explicit starts: not where the planner would
AS_CREATED = [("3g.20gb", 4, 4), ("2g.10gb", 2, 2), ("1g.5gb", 0, 1), ("1g.5gb", 1, 1)]


def test_the_planned_layout_on_the_host_is_drawn_as_found_with_its_uuids():
    drawn = placed(A100, LAYOUT, [{"profile": p, "start": s, "size": z, "uuid": "MIG-%d" % s} for p, s, z in AS_CREATED])
    assert drawn["other"] == [] and all(i["found"] for i in drawn["instances"])
    assert {(i["profile"], i["start"], i["uuid"], i["compute_slices"]) for i in drawn["instances"]} == {
        ("3g.20gb", 4, "MIG-4", 3), ("2g.10gb", 2, "MIG-2", 2), ("1g.5gb", 0, "MIG-0", 1), ("1g.5gb", 1, "MIG-1", 1)}


def test_a_layout_changed_by_hand_shows_the_plan_and_what_the_host_holds():
    by_hand = [("3g.20gb", 4, 4), ("1g.5gb", 0, 1), ("1g.5gb", 1, 1), ("1g.5gb", 2, 1), ("1g.5gb", 3, 1)]
    layouts = node_gpu_layouts({"n": HostPlan(node="n", gpu_facts=(fact(by_hand),), mig_config="mine",
                                              mig_configs={"mine": [{"devices": "all", "mig-enabled": True,
                                                                     "mig-devices": LAYOUT}]})},
                               [ExpectedNode("n", None, "none", "mixed")])
    gpu, = layouts["n"]
    assert (gpu["uuid"], gpu["model"], gpu["memory_slices"], gpu["layout"]) == ("GPU-0", "A100-40GB", 8, LAYOUT)
    # the planner puts 2g.10gb on slices 0-1, where the host now has two 1g.5gb; the rest is in place
    assert [(i["profile"], i["start"], i["found"], i["uuid"]) for i in gpu["instances"]] == [
        ("2g.10gb", 0, False, None), ("1g.5gb", 2, True, "MIG-1g.5gb-2"), ("1g.5gb", 3, True, "MIG-1g.5gb-3"),
        ("3g.20gb", 4, True, "MIG-3g.20gb-4")]
    assert [(o["profile"], o["start"], o["uuid"], o["compute_slices"]) for o in gpu["other"]] == [
        ("1g.5gb", 0, "MIG-1g.5gb-0", 1), ("1g.5gb", 1, "MIG-1g.5gb-1", 1)]


def test_declared_gpus_are_expanded_and_planned_without_uuids():
    plan = HostPlan(node="n", gpus=({"model": "A100-40GB", "count": 2, "mig": LAYOUT},))
    gpus = node_gpu_layouts({"n": plan}, [ExpectedNode("n", None, "none", "mixed")])["n"]
    assert [g["index"] for g in gpus] == [0, 1] and all(g["uuid"] is None for g in gpus)
    assert all(len(g["instances"]) == 4 and not any(i["found"] for i in g["instances"]) for g in gpus)


def test_an_impossible_layout_is_reported_not_drawn():
    drawn = placed(A100, {"3g.20gb": 3}, [])
    assert drawn["instances"] == [] and "3g.20gb" in drawn["problem"]


def test_nodes_without_a_plan_get_their_gpus_from_the_expectation():
    expected = ExpectedNode("l", None, "none", "none", gpus=NodeGpus(full_gpus=3, product="NVIDIA-H100"))
    gpus = node_gpu_layouts({}, [expected])["l"]
    assert [(g["index"], g["name"], g["mig"]) for g in gpus] == [(i, "NVIDIA-H100", False) for i in range(3)]

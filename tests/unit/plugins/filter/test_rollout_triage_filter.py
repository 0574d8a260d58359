"""The rollout_triage filter: plans from the read when it can, leaves the rest to the host, then sorts them."""

from __future__ import annotations

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.rollout_triage import DOCUMENTATION, rollout_restart_selectors, rollout_triage
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._read_plan import read_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import plan_from_read

GPU = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x233010DE",
       "memory_total_mib": 81559, "mig": {"capable": True, "current": False, "pending": False, "instances": []}}
DEST, OVERRIDE = "/etc/nvidia-mig-manager/config.yaml", "/etc/override.d/override.conf"
SELECTION = {"config": "all-balanced", "configs": {}, "include_defaults": True,
             "config_dest": DEST, "selected_config_override": OVERRIDE}
MISSING = {"content": None, "mode": None}


def read(**extra):
    base = {"ansible_facts": {"gpufleet_gpus": [GPU]}, "files": {DEST: MISSING, OVERRIDE: MISSING}}
    base.update(extra)
    return base


def test_read_plan_is_plan_from_read():
    cache = {}
    assert read_plan(read(), SELECTION, cache) == plan_from_read({"version": "v1", "mig-configs": {}}, True, "all-balanced",
                                                                 [GPU], read()["files"], DEST, OVERRIDE)
    assert len(cache) == 1
    read_plan(read(), dict(SELECTION, config="all-1g.10gb"), cache)
    assert len(cache) == 1  # one document parsed once for the whole fleet


def test_unusable_reads_leave_the_plan_to_the_host():
    cache = {}
    for unusable in ({}, read(skipped=True), read(failed=True), read(unreachable=True),
                     read(ansible_facts={"gpufleet_gpus": [], "gpufleet_gpus_reason": "no GPU"}),
                     read(files={DEST: MISSING})):  # the override was not read
        assert read_plan(unusable, SELECTION, cache) == {}
    assert read_plan(read(), {}, cache) == {}
    assert read_plan(read(files={}), dict(SELECTION, config_dest="", selected_config_override=""), cache)["files"] == []


def test_fleet_triage_then_the_hosts_planned_on_the_host():
    hostvars = {
        "a": {"gpufleet_gpu_read": read(), "mig_selection": SELECTION},                  # needs all-balanced
        "b": {"gpufleet_gpu_read": read(skipped=True), "mig_selection": SELECTION,       # no read: the host plans
              "gpufleet_node_name": "node-b"},
        "c": {"gpufleet_gpu_read": read(), "mig_selection": dict(SELECTION, config="nope")},  # failed plan
    }
    first = rollout_triage(hostvars, ["a", "b", "c"], {})
    assert {host: entry["outcome"] for host, entry in first.items()} == {"a": "mig_change", "b": "unplanned", "c": "mig_change"}
    assert first["a"]["gpus"] == [0] and first["a"]["planned_on"] == "controller" and first["b"]["node"] == "node-b"
    hostvars["b"]["mig_run"] = {"changed_gpus": [], "config_dest_changed": False, "selected_config_override_changed": False}
    second = rollout_triage(hostvars, ["a", "b", "c"], {"node-b": {"annotation": "failed: x"}}, previous=first)
    assert second["a"] is first["a"] and second["b"]["planned_on"] == "host"
    assert second["b"]["outcome"] == "mig_change"  # annotated by an earlier failed run: never settled
    assert rollout_triage(hostvars, ["b"], {}, previous=first)["b"]["outcome"] == "unchanged"


def test_a_stale_read_is_not_used():
    hostvars = {"a": {"gpufleet_gpu_read": read(), "mig_selection": SELECTION}}
    assert rollout_triage(hostvars, ["a"], {}, use_read=False)["a"]["outcome"] == "unplanned"


def test_documentation_parses():
    doc = yaml.safe_load(DOCUMENTATION)
    assert doc["name"] == "rollout_triage" and set(doc["options"]) == {"annotated_nodes", "use_read", "previous", "moves"}
    assert doc["extends_documentation_fragment"] == ["gpufleet.sharing.fleet_filter"]  # _input (hostvars), hosts


def test_each_node_carries_the_plan_its_host_applies():
    """Issue 20 item 3: the controller's plan (or the host's, for a host planned there) goes to the host as it is."""
    hostvars = {"a": {"gpufleet_gpu_read": read(), "mig_selection": SELECTION},
                "b": {"gpufleet_gpu_read": read(skipped=True), "mig_selection": SELECTION},
                "c": {"gpufleet_gpu_read": read(), "mig_selection": dict(SELECTION, config="nope")}}
    first = rollout_triage(hostvars, ["a", "b", "c"], {})
    assert first["a"]["plan"] == read_plan(read(), SELECTION, {})["plan"] and first["a"]["config"] == "all-balanced"
    assert first["a"]["plan"]["config_name"] == "all-balanced" and first["a"]["error"] == ""
    assert first["c"]["plan"] == {} and "nope" in first["c"]["error"]
    hostvars["b"]["mig_run"] = {"changed_gpus": [0], "selected": "all-balanced", "plan": {"config_name": "all-balanced"}}
    second = rollout_triage(hostvars, ["a", "b", "c"], {}, previous=first)
    assert second["b"]["plan"] == {"config_name": "all-balanced"} and second["b"]["config"] == "all-balanced"


def test_a_node_moving_between_backends_is_not_settled():
    """The dra role's rollout_plan names the hosts whose node moves (device plugin <-> DRA): a settled
    layout still goes through the batches there, with the host's backend in its entry."""
    hostvars = {"a": {"gpufleet_gpu_backend": "dra",
                      "mig_run": {"changed_gpus": [], "config_dest_changed": False, "selected_config_override_changed": False}}}
    unplanned = {"a": {"outcome": "unplanned"}}
    settled = rollout_triage(hostvars, ["a"], {}, use_read=False, previous=unplanned)["a"]
    moved = rollout_triage(hostvars, ["a"], {}, use_read=False, previous=unplanned, moves=["a"])["a"]
    assert settled["backend"] == "dra" and not settled["move"] and settled["outcome"] == "unchanged"
    assert moved["move"] and moved["outcome"] == "mig_change" and moved["gpus"] == []


def test_restart_selectors_filter():
    """issue 26 (2): the filter reads gpu_operands' restored answer (its waited_for), or nothing."""
    assert rollout_restart_selectors({"waited_for": ["nvidia-device-plugin-daemonset"]}) == ["app=gpu-feature-discovery"]
    assert rollout_restart_selectors(None) == ["app=nvidia-device-plugin-daemonset", "app=gpu-feature-discovery"]
    assert rollout_restart_selectors({"skipped": True}) == ["app=nvidia-device-plugin-daemonset", "app=gpu-feature-discovery"]

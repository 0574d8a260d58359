"""The mig_read_plan filter: when it plans from the read, and when it leaves the plan to the host."""

from __future__ import annotations

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.mig_read_plan import DOCUMENTATION, mig_read_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils._mig_read_plan import plan_from_read

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


def test_plans_from_the_read_like_plan_from_read():
    plan = mig_read_plan(read(), SELECTION)
    assert plan == plan_from_read({"version": "v1", "mig-configs": {}}, True, "all-balanced", [GPU],
                                  read()["files"], DEST, OVERRIDE)
    assert plan["changed_gpus"] == [0] and plan["config_dest_changed"] and plan["selected_config_override_changed"]


def test_unusable_reads_leave_the_plan_to_the_host():
    assert mig_read_plan({}, SELECTION) == {}
    assert mig_read_plan(read(skipped=True), SELECTION) == {}
    assert mig_read_plan(read(failed=True), SELECTION) == {}
    assert mig_read_plan(read(unreachable=True), SELECTION) == {}
    assert mig_read_plan(read(ansible_facts={"gpufleet_gpus": [], "gpufleet_gpus_reason": "no GPU"}), SELECTION) == {}
    assert mig_read_plan(read(files={DEST: MISSING}), SELECTION) == {}  # the override was not read
    assert mig_read_plan(read(), {}) == {}


def test_files_not_maintained_are_not_needed():
    plan = mig_read_plan(read(files={}), dict(SELECTION, config_dest="", selected_config_override=""))
    assert plan["files"] == [] and not plan["config_dest_changed"]


def test_a_selection_that_cannot_apply_fails_with_the_module_message():
    plan = mig_read_plan(read(), dict(SELECTION, config="nope"))
    assert plan["failed"] and "nope" in plan["msg"]


def test_documentation_parses():
    doc = yaml.safe_load(DOCUMENTATION)
    assert doc["name"] == "mig_read_plan" and set(doc["options"]) == {"_input", "selection"}

"""The fleet_drift filter: the whole fleet's rows from the run's reads and plans, and its report files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.fleet_drift import DOCUMENTATION, fleet_drift
from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift_report import item_of, table

GPU = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA A100-SXM4-40GB", "pci_device_id": "0x20B010DE",
       "memory_total_mib": 40960, "mig": {"capable": True, "current": False, "pending": False, "instances": []}}
SELECTION = {"config": "all-disabled", "configs": {}, "include_defaults": True, "config_dest": "", "selected_config_override": ""}
READ = {"ansible_facts": {"gpufleet_gpus": [GPU]}, "files": {}}
ADVERTISED = {"node": "node-b", "kind": "capacity", "name": "nvidia.com/gpu", "expected": "1", "actual": "0", "ok": False}


def hostvars():
    return {"a": {"gpufleet_gpu_read": READ, "mig_selection": dict(SELECTION, config="all-1g.5gb")},
            "b": {"gpufleet_gpu_read": READ, "mig_selection": SELECTION, "gpufleet_node_name": "node-b"},
            "c": {"gpufleet_gpu_model": "A100-SXM4-40GB", "gpufleet_gpu_read": {"skipped": True}}}


def test_the_documentation_is_yaml():
    assert yaml.safe_load(DOCUMENTATION)["name"] == "fleet_drift"


def test_a_fleet_as_planned():
    result = fleet_drift(hostvars(), ["b", "c"], info={"nodes": {"node-b": {}, "c": {}}, "lease": None, "now": 0})
    assert result["drift"] == [] and result["summary"] == {"rows": 0, "nodes": 2, "drifted": [], "ok": True}
    assert result["table"] == "No drift: the fleet is as planned."
    suite = ET.fromstring(result["files"]["fleet-drift.xml"])
    assert suite.get("failures") == "0" and int(suite.get("tests")) == 4 + 7 * 2


def test_every_source_one_row_each():
    verify = {"report": {"checks": [ADVERTISED, dict(ADVERTISED, node="a")]}}
    info = {"nodes": {"a": {}, "node-b": {"labels": {"nvidia.com/mig.config.state": "failed"}}},
            "lease": None, "now": 0}
    sharing = {"labels_changed": {"node-b": {"before": None, "after": "ts"}}}
    result = fleet_drift(hostvars(), ["a", "b"], operator={"action": "unchanged"}, sharing=sharing, verify=verify, info=info)
    assert [(r["node"], r["what"]) for r in result["drift"]] == [
        ("a", "MIG GPU 0"), ("node-b", "label nvidia.com/device-plugin.config"), ("node-b", "label nvidia.com/mig.config.state")]
    assert result["drift"][0]["converge"] == "ansible-playbook playbooks/rollout.yml --limit a"
    assert json.loads(result["files"]["fleet-drift.json"])["drift"] == result["drift"]
    suite = ET.fromstring(result["files"]["fleet-drift.xml"])
    failures = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failures == ["drift MIG mode and layout: MIG GPU 0", "drift device-plugin config label: label nvidia.com/device-plugin.config",
                        "drift operator state labels: label nvidia.com/mig.config.state"]
    assert result["files"]["fleet-drift.txt"].splitlines()[0].split() == ["NODE", "WHAT", "PLANNED", "FOUND", "SINCE"]


def test_items_of_rows():
    assert item_of({"node": "(cluster)", "what": "rollout lock"}) == "rollout lock"
    assert item_of({"node": "(cluster)", "what": "something new"}) == "other"
    assert item_of({"node": "n", "what": "label nvidia.com/gpu.product"}) == "advertised resources and labels"
    assert "-" in table([{"node": "n", "what": "w", "planned": "p", "found": "f", "since": None}])


def test_the_kueue_quotas_are_compared():
    """Issue 43 (5): drift.yml passes gpu_quotas' verified answer; a hand-edited quota is a cluster row."""
    quotas = {"checks": [{"node": "team/nlp", "kind": "quota", "name": "gpufleet-a100 nvidia.com/mig-1g.5gb",
                          "expected": "1", "actual": "50", "ok": False, "message": "live quota differs from the plan"}]}
    info = {"nodes": {"node-b": {}, "c": {}}, "lease": None, "now": 0}
    result = fleet_drift(hostvars(), ["b", "c"], quotas=quotas, info=info)
    assert result["drift"] == [{"node": "(cluster)", "what": "Kueue team/nlp quota gpufleet-a100 nvidia.com/mig-1g.5gb",
                                "planned": "1", "found": "50", "since": None, "converge": "ansible-playbook playbooks/site.yml"}]
    suite = ET.fromstring(result["files"]["fleet-drift.xml"])
    failures = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failures == ["drift Kueue team quotas: Kueue team/nlp quota gpufleet-a100 nvidia.com/mig-1g.5gb"]

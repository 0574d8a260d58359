"""The preflight_problems filter: every host's problems in one pass, prefixed, then the hosts not checked."""

from __future__ import annotations

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.preflight_problems import DOCUMENTATION, preflight_notes, preflight_problems

H100 = {"pci_device_id": "0x233010DE"}
SELECTION = {"config": "all-balanced", "configs": {}, "include_defaults": True}


def test_every_host_in_one_pass():
    hostvars = {
        "good": {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [H100]}},
        "bad-config": {"mig_selection": dict(SELECTION, config="no-such-config"), "gpufleet_gpu_model": "H100-80GB"},
        "no-gpu": {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [], "gpufleet_gpus_reason": "no driver"}},
        "bad-vars": {"mig_selection": dict(SELECTION, configs="x"), "mig_configs": "x", "ansible_facts": {"gpufleet_gpus": [H100]}},
        "tainted": {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [H100]},
                    "gpufleet_node_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "failed": {"mig_selection": SELECTION},
        "no-selection": {},
    }
    problems = preflight_problems(hostvars, list(hostvars), [], checked=[h for h in hostvars if h != "failed"])
    assert problems[0].startswith("bad-config: ") and "no-such-config" in problems[0]
    assert problems[1:3] == ["no-gpu: no GPU found (no driver)",
                             'bad-vars: mig_configs must be a mapping of config name to mig-parted items, got "x"']
    assert problems[3].startswith("host tainted (gpufleet_node_taints): taint dedicated=gpu:NoSchedule is tolerated by no operand")
    assert problems[4:] == ["failed: not checked (unreachable or failed before planning)",
                            "no-selection: not checked (unreachable or failed before planning)"]


def test_tolerated_taints_and_a_host_setting_pass():
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    hostvars = {"a": {"mig_selection": SELECTION, "gpufleet_node_taints": [taint], "ansible_facts": {"gpufleet_gpus": [H100]}},
                "b": {"mig_selection": SELECTION, "gpufleet_node_taints": [taint], "ansible_facts": {"gpufleet_gpus": [H100]},
                      "gpu_operator_tolerations": [toleration]}}
    assert preflight_problems(hostvars, ["a"], [toleration]) == []
    assert preflight_problems(hostvars, ["b"], []) == []


def test_documentation_parses():
    doc = yaml.safe_load(DOCUMENTATION)
    assert doc["name"] == "preflight_problems" and set(doc["options"]) == {"tolerations", "checked", "report_dir", "fleet"}
    assert doc["extends_documentation_fragment"] == ["gpufleet.sharing.fleet_filter"]  # _input (hostvars), hosts


def test_two_hosts_naming_one_node_are_refused():
    """Issue 21 (11): one Kubernetes node named by two inventory hosts (gpufleet_node_name) would be planned,
    tainted and rolled out twice with conflicting values; refused naming the node and both hosts."""
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    host = {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [H100]}}
    hostvars = {"rack1-a": dict(host, gpufleet_node_name="gpu-7", gpufleet_node_taints=[taint]),
                "rack1-b": dict(host, gpufleet_node_name="gpu-7", gpufleet_node_taints=[]),
                "gpu-7": dict(host), "gpu-8": dict(host)}
    problems = preflight_problems(hostvars, list(hostvars), [toleration])
    assert problems == ["node gpu-7: named by more than one inventory host (rack1-a, rack1-b, gpu-7): each node must "
                        "be one host (gpufleet_node_name)"]
    assert preflight_problems(hostvars, ["rack1-a", "gpu-8"], [toleration]) == []


A100_READ = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "pci_device_id": "0x20B010DE", "mig": {"capable": True}}
H100_READ = {"index": 1, "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x233010DE", "mig": {"capable": True}}


def _selection(*items):
    return {"config": "x", "configs": {"x": list(items)}, "include_defaults": False}


def test_devices_the_read_host_lacks_are_refused():
    """Issue 21 (11): ``devices: [5]`` on a host whose read found one GPU used to pass preflight (mig_config
    refused it later, on the host, after the operator and sharing steps had run)."""
    item = {"devices": [5], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    hostvars = {"a100": {"mig_selection": _selection(item), "ansible_facts": {"gpufleet_gpus": [A100_READ]}}}
    assert preflight_problems(hostvars, ["a100"]) == ["a100: config x item 0: devices lists GPU 5, but this host has GPU 0"]
    hostvars["a100"]["mig_selection"] = _selection(dict(item, devices=[0]))
    assert preflight_problems(hostvars, ["a100"]) == []


def test_a_config_that_selects_no_gpu_of_the_read_host_is_refused():
    """Issue 21 (11): every item's filter matches one of the host's models, and its index another GPU: the
    config selects nothing (nvidia-mig-parted would change nothing and report success)."""
    a100_item = {"device-filter": "0x20B010DE", "devices": [1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    h100_item = {"device-filter": "0x233010DE", "devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    hostvars = {"mixed": {"mig_selection": _selection(a100_item, h100_item),
                          "ansible_facts": {"gpufleet_gpus": [A100_READ, H100_READ]}}}
    problems = preflight_problems(hostvars, ["mixed"])
    assert len(problems) == 1 and problems[0].startswith("mixed: config x matches no GPU of this host"), problems
    assert "GPU 0 NVIDIA A100-SXM4-40GB (0x20B010DE)" in problems[0]


def test_indexes_a_declared_model_cannot_check_are_noted():
    """With gpufleet_gpu_model declared preflight reads no GPU: an explicit index cannot be checked, and
    the preflight says so (a note, not a problem: mig_config checks it on the host before any change)."""
    item = {"devices": [5], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    hostvars = {"a100": {"mig_selection": _selection(item), "gpufleet_gpu_model": "A100-40GB"},
                "read": {"mig_selection": _selection(dict(item, devices=[0])), "ansible_facts": {"gpufleet_gpus": [A100_READ]}},
                "all": {"mig_selection": SELECTION, "gpufleet_gpu_model": "H100-80GB"}}
    assert preflight_problems(hostvars, list(hostvars)) == []
    assert preflight_notes(hostvars, list(hostvars)) == [
        "a100: config x item 0 names GPU 5: not checked against the host's GPUs (gpufleet_gpu_model is declared, "
        "so preflight did not read the host; mig_config refuses an index the host lacks, on the host, before any change)"]


def test_a_team_share_of_a_profile_no_gpu_of_the_fleet_has_is_refused():
    """Issue 43 (4): a share of nvidia.com/mig-9g.99gb was accepted and the team's ClusterQueue rewritten with no
    GPU quota; the preflight names the team, the input and the fleet's models, once for the fleet."""
    shares = {"nvidia.com/mig-9g.99gb": 1, "nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-1g.10gb.me.shared": 1}
    teams = [{"name": "vision", "namespaces": ["v"], "shares": shares}]
    host = {"mig_selection": SELECTION, "gpufleet_teams": teams}
    hostvars = {"a100": dict(host, ansible_facts={"gpufleet_gpus": [A100_READ]}),
                "h100": dict(host, gpufleet_gpu_model="H100-80GB")}
    problems = preflight_problems(hostvars, list(hostvars))
    assert problems == ["gpufleet_teams (team 'vision'): resource nvidia.com/mig-9g.99gb: no GPU of the fleet has MIG "
                        "profile 9g.99gb (the fleet's MIG-capable models: A100-40GB, H100-80GB)"]
    assert preflight_problems({"a100": hostvars["a100"]}, ["a100"]) == [
        "gpufleet_teams (team 'vision'): resource nvidia.com/mig-1g.10gb.me.shared: no GPU of the fleet has MIG "
        "profile 1g.10gb+me (the fleet's MIG-capable models: A100-40GB)",
        problems[0].replace("A100-40GB, H100-80GB", "A100-40GB")]
    unknown = dict(host, ansible_facts={})  # a host whose GPUs are not known: nothing is judged
    assert preflight_problems(dict(hostvars, unknown=unknown), list(hostvars) + ["unknown"]) == []

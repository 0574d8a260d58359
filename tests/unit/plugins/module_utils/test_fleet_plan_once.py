"""Planning a fleet does once per distinct input what does not depend on the host (issue 26 item 3):
a MIG layout is planned once per GPU model and layout, a host group's own mig_configs are parsed once
per document, a GPU model is looked up once per name. Counted, not timed; the plans themselves are
checked against the recorded sample in test_fleet_plan_sample.py."""

from __future__ import annotations

import copy

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu import _mig_catalog
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_parted
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _node_gpus
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import parse_configs

A100 = ("NVIDIA A100-SXM4-40GB", "0x20B010DE")
MIXED = {"inference-mixed": [{"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
                              "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]}


def counting(monkeypatch, module, name, calls):
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)


def fleet(hosts, gpus=8):
    """``hosts`` A100 hosts with ``gpus`` GPUs each (facts of their own: a UUID per GPU), the group's
    own mig_configs (each host its own copy, as Ansible gives host variables), one time-sliced config."""
    names = ["gpu-%04d" % i for i in range(hosts)]
    plans = [{"node": n, "mig_config": "inference-mixed", "mig_configs": copy.deepcopy(MIXED),
              "gpu_facts": [{"index": g, "name": A100[0], "pci_device_id": A100[1], "uuid": "GPU-%d-%d" % (h, g),
                             "mig": {"capable": True, "current": False, "pending": False, "instances": []}}
                            for g in range(gpus)]} for h, n in enumerate(names)]
    configs = parse_configs([{"name": "small", "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}],
                              "nodes": names}])
    view = _fleet_plan.ClusterView.read([{"metadata": {"name": n, "labels": {"nvidia.com/gpu.present": "true"}}}
                                         for n in names], {"spec": {"mig": {"strategy": "mixed"}}})
    return _fleet_plan.Intent(configs=configs, hosts=_fleet_plan.host_plans(plans, {})), view


def test_a_mig_layout_is_planned_once_per_model_and_layout(monkeypatch):
    intent, view = fleet(50)
    calls = []
    counting(monkeypatch, _node_gpus, "plan_layout", calls)
    plan = _fleet_plan.plan_fleet(intent, view)
    assert not plan.problems and len(plan.expectations) == 50
    assert plan.expectations["gpu-0049"].resources["nvidia.com/mig-1g.5gb"] == 8 * 2 * 2
    assert len(calls) <= 1  # 400 GPUs, one layout (none when an earlier test planned it already)


def test_a_groups_mig_configs_are_parsed_once(monkeypatch):
    intent, view = fleet(50, gpus=1)
    calls = []
    counting(monkeypatch, _mig_parted, "parse_config", calls)
    _fleet_plan.plan_fleet(intent, view)
    assert len(calls) <= 1


def test_a_gpu_model_is_looked_up_once_per_name(monkeypatch):
    intent, view = fleet(50)
    calls = []
    counting(monkeypatch, _mig_catalog, "normalize_pci_device_id", calls)
    _fleet_plan.plan_fleet(intent, view)
    assert len(calls) <= 2  # the facts' PCI id, the planned model's key


def test_an_invalid_layout_still_names_each_host(monkeypatch):
    plans = [{"node": "n%d" % i, "gpus": [{"model": "A100-40GB", "mig": {"7g.40gb": 2}}]} for i in range(3)]
    view = _fleet_plan.ClusterView.read([{"metadata": {"name": "n%d" % i, "labels": {}}} for i in range(3)],
                                        {"spec": {"mig": {"strategy": "mixed"}}})
    plan = _fleet_plan.plan_fleet(_fleet_plan.Intent(hosts=_fleet_plan.host_plans(plans, {})), view)
    assert [p.split(":")[0] for p in plan.problems] == ["node 'n0' gpus[0]", "node 'n1' gpus[0]", "node 'n2' gpus[0]"]
    assert all("2 x 7g.40gb requested but A100-40GB allows at most 1" in p for p in plan.problems)


def test_unchanged_layout_results_are_not_shared_between_hosts():
    """A result kept for a second host is a copy: changing one host's expectation changes no other."""
    intent, view = fleet(2, gpus=1)
    plan = _fleet_plan.plan_fleet(intent, view)
    first, second = plan.expectations["gpu-0000"], plan.expectations["gpu-0001"]
    first.resources["nvidia.com/mig-1g.5gb"] = 999
    first.labels["x"] = "y"
    assert second.resources["nvidia.com/mig-1g.5gb"] == 4 and "x" not in second.labels
    again = _fleet_plan.plan_fleet(intent, view).expectations["gpu-0000"]
    assert again.resources["nvidia.com/mig-1g.5gb"] == 4 and "x" not in again.labels


def test_hosts_that_differ_only_in_what_no_plan_reads_are_planned_once(monkeypatch):
    """UUIDs, bus ids and memory differ on every host; the plan reads index, model, PCI ids and MIG state."""
    intent, view = fleet(50)
    for number, plan in enumerate(intent.hosts.values()):
        for gpu in plan.gpu_facts:
            gpu.update({"pci_bus_id": "0000:%02X:00.0" % number, "memory_total_mib": 40960 + number})
    calls = []
    counting(monkeypatch, _fleet_plan, "plan_from_host", calls)
    plan = _fleet_plan.plan_fleet(intent, view)
    assert not plan.problems and len(calls) <= 1


def test_a_host_whose_mig_state_differs_gets_its_own_plan():
    base = {"index": 0, "name": A100[0], "pci_device_id": A100[1], "mig": {"capable": True, "current": True, "pending": False,
                                                                           "instances": [{"profile": "3g.20gb"}] * 2}}
    other = copy.deepcopy(base)
    other["mig"]["instances"] = [{"profile": "7g.40gb"}]
    keep = {"keep": [{"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": False}]}  # touches no A100
    plans = _fleet_plan.host_plans([{"node": n, "gpu_facts": [f], "mig_config": "keep", "mig_configs": keep}
                                    for n, f in (("a", base), ("b", other), ("c", dict(base, uuid="GPU-c")))], {})
    assert [p.planned_gpus()[0]["mig"] for p in plans.values()] == [{"3g.20gb": 2}, {"7g.40gb": 1}, {"3g.20gb": 2}]


def test_a_failing_host_plan_names_each_host():
    facts = [{"index": 0, "name": A100[0], "pci_device_id": A100[1], "mig": {"capable": True}}]
    plans = _fleet_plan.host_plans([{"node": n, "gpu_facts": facts, "mig_config": "nope"} for n in ("x", "y")], {})
    view = _fleet_plan.ClusterView.read([{"metadata": {"name": n, "labels": {}}} for n in ("x", "y")], None)
    problems = _fleet_plan.plan_fleet(_fleet_plan.Intent(hosts=plans), view).problems
    assert [p.split(":")[0] for p in problems] == ["node 'x'", "node 'y'"]
    assert all("selected mig-config not present: nope" in p for p in problems)


def test_hosts_of_one_shape_share_their_gpus_and_expectation(monkeypatch):
    """50 hosts with the same planned GPUs, config and strategy: their GPUs and expectation are made once
    per plan_fleet (each node still gets its own expectation, under its own name)."""
    intent, view = fleet(50)
    gpus_calls, expected_calls = [], []
    counting(monkeypatch, _fleet_plan, "node_gpus_for", gpus_calls)
    counting(monkeypatch, _fleet_plan, "expected_node", expected_calls)
    plan = _fleet_plan.plan_fleet(intent, view)
    assert len(gpus_calls) == 1 and len(expected_calls) == 1
    assert sorted(e.node for e in plan.expectations.values()) == sorted(intent.hosts)
    assert len({e.resources["nvidia.com/mig-1g.5gb"] for e in plan.expectations.values()}) == 1

"""Issue 43 (3): three of the quota inputs were refused only by gpu_quotas, in its own play after the operator
play had run. The preflight now runs gpu_quotas' own plan (fleet plan, then quota plan) over the planned hosts."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.filter.preflight_problems import preflight_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_inventory import plan_entry, planned_nodes
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import plan_problems, plan_quotas
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import parse_teams
from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import fleet_team_problems

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x233010DE", "mig": {"capable": True}}
PLANNED = "gpufleet_teams over the planned hosts (gpu-a, gpu-b): "


def _host(name, config, teams, **more):
    return dict({"inventory_hostname": name, "mig_selection": {"config": config, "configs": {}, "include_defaults": True},
                 "ansible_facts": {"gpufleet_gpus": [H100, dict(H100, index=1)]}, "gpufleet_teams": teams}, **more)


def _team(name, shares):
    return {"name": name, "namespaces": [name], "shares": shares}


def test_counts_over_the_planned_capacity_are_refused_in_preflight():
    teams = [_team("vision", {"nvidia.com/gpu": 3}), _team("nlp", {"nvidia.com/gpu": 2})]
    hostvars = {h: _host(h, "all-disabled", teams) for h in ("gpu-a", "gpu-b")}
    assert preflight_problems(hostvars, list(hostvars)) == [
        PLANNED + "resource nvidia.com/gpu, flavor gpufleet-nvidia-h100-80gb-hbm3: the teams' quotas add up to 5 "
        "(vision 3, nlp 2), the nodes advertise 4; lower the shares or set gpufleet_quota_overcommit: true"]
    over = {h: dict(v, gpufleet_quota_overcommit=True) for h, v in hostvars.items()}
    assert preflight_problems(over, list(over)) == []
    fits = [_team("vision", {"nvidia.com/gpu": 2}), _team("nlp", {"nvidia.com/gpu": "50%"})]
    assert fleet_team_problems([_host(h, "all-disabled", fits) for h in ("gpu-a", "gpu-b")]) == []


def test_a_profile_the_catalog_knows_but_no_planned_host_advertises_is_refused():
    """1g.20gb is an H100 profile (not refused as unknown), but all-balanced plans none of it."""
    teams = [_team("vision", {"nvidia.com/mig-1g.20gb": 1, "nvidia.com/mig-1g.10gb": 2})]
    hosts = [_host(h, "all-balanced", teams) for h in ("gpu-a", "gpu-b")]
    assert fleet_team_problems(hosts) == [
        PLANNED + "team vision: resource nvidia.com/mig-1g.20gb: no planned node advertises it, no quota for it"]


def test_judged_only_when_every_host_was_read():
    """A declared model gives no layout to plan (gpu_quotas reads its node's labels): nothing is judged here."""
    teams = [_team("vision", {"nvidia.com/gpu": 99})]
    hosts = [_host("gpu-a", "all-disabled", teams), _host("gpu-b", "all-disabled", teams, gpufleet_gpu_model="H100-80GB")]
    assert fleet_team_problems(hosts) == []
    assert fleet_team_problems(hosts[:1]) != []


def test_the_module_and_the_preflight_judge_with_one_function():
    """gpu_quotas refuses with ``plan_problems`` over its node list; the preflight's node list of the same hosts
    gives the same refusals (the preflight prefixes them)."""
    teams, problems = parse_teams([_team("vision", {"nvidia.com/gpu": 3}), _team("nlp", {"nvidia.com/gpu": 2})])
    assert problems == []
    nodes = planned_nodes([plan_entry(_host(h, "all-disabled", [])) for h in ("gpu-a", "gpu-b")], "mixed")
    assert [n["resources"] for n in nodes] == [{"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 2}]
    hosts = [_host(h, "all-disabled", [_team("vision", {"nvidia.com/gpu": 3}), _team("nlp", {"nvidia.com/gpu": 2})])
             for h in ("gpu-a", "gpu-b")]
    assert fleet_team_problems(hosts) == [PLANNED + p for p in plan_problems(plan_quotas(nodes, teams), teams)]


def test_a_limited_play_is_not_judged_against_part_of_the_fleet():
    """``--limit`` (the EDA rulebook's jobs, a group at a time) leaves GPU hosts of the inventory out of the play:
    their capacity and profiles count for the teams, so the fleet-wide checks are left to gpu_quotas, which
    also reads the nodes the play does not plan. The whole fleet in play: judged as before."""
    teams = [_team("vision", {"nvidia.com/gpu": 3, "nvidia.com/mig-1g.10gb": 1})]
    hostvars = {h: _host(h, "all-disabled", teams) for h in ("gpu-a", "gpu-b")}
    limited = {"gpu-a": hostvars["gpu-a"]}
    fleet = ["gpu-a", "gpu-b", "gpu-c"]
    assert preflight_problems(limited, ["gpu-a"], fleet=fleet) == []
    assert preflight_problems(hostvars, ["gpu-a", "gpu-b"], fleet=fleet) == []
    whole = preflight_problems(hostvars, ["gpu-a", "gpu-b"], fleet=["gpu-a", "gpu-b"])
    assert whole and all(p.startswith(PLANNED) for p in whole), whole
    assert preflight_problems(limited, ["gpu-a"]) != []  # no fleet given: the hosts in play are the fleet

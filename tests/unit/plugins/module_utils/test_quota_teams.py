"""_quota_teams: gpufleet_teams parsed and checked, each problem naming the team, the resource and why."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import variable_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import parse_share, parse_teams, team_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import mig_resource_name

VISION = {"name": "vision", "namespaces": ["vision-train", "vision-dev"],
          "shares": {"nvidia.com/mig-1g.10gb": "50%", "nvidia.com/gpu": 2}, "cohort": "research",
          "borrowing_limit": 2, "lending_limit": 1}
NLP = {"name": "nlp", "namespaces": ["nlp"], "shares": {"nvidia.com/mig-1g.10gb": 0.25}}


def test_valid_teams():
    teams, problems = parse_teams([VISION, NLP])
    assert problems == []
    assert teams[0].name == "vision" and teams[0].namespaces == ("vision-train", "vision-dev")
    assert teams[0].share("nvidia.com/mig-1g.10gb") == Fraction(1, 2) and teams[0].share("nvidia.com/gpu") == 2
    assert teams[0].cohort == "research" and teams[0].borrowing_limit == 2 and teams[0].lending_limit == 1
    assert teams[1].share("nvidia.com/mig-1g.10gb") == Fraction(1, 4) and teams[1].cohort is None


def test_no_teams_is_fine():
    assert parse_teams(None) == ([], [])
    assert parse_teams([]) == ([], [])
    assert team_problems({}) == []


@pytest.mark.parametrize("value,share", [
    ("50%", Fraction(1, 2)), ("12.5%", Fraction(1, 8)), (0.5, Fraction(1, 2)), (1.0, Fraction(1)), (0.0, Fraction(0)),
    (1, 1), (0, 0), (7, 7), ("100%", Fraction(1)),
    (-1, None), (1.5, None), ("half", None), (True, None), ("-5%", None), (None, None)])
def test_parse_share(value, share):
    assert parse_share(value) == share


@pytest.mark.parametrize("change,expected", [
    ({"name": "Vision"}, "gpufleet_teams[0] (team 'Vision'): name must be a DNS label"),
    ({"name": "x" * 64}, "name must be a DNS label"),
    ({"namespaces": ["ok", "Bad_NS"]}, "gpufleet_teams[0] (team 'vision'): namespace 'Bad_NS' is not a DNS label"),
    ({"namespaces": []}, "namespaces must be a non-empty list"),
    ({"shares": {"nvidia.com/tpu": 1}}, "gpufleet_teams[0] (team 'vision'): resource 'nvidia.com/tpu': unknown resource"),
    ({"shares": {"cpu": "10%"}}, "resource 'cpu': unknown resource"),
    ({"shares": {"nvidia.com/gpu": "150%"}}, "resource nvidia.com/gpu: share '150%' is not a fraction"),
    ({"shares": {"nvidia.com/gpu": -2}}, "resource nvidia.com/gpu: share -2 is not"),
    ({"shares": {}}, "shares must be a mapping"),
    ({"cohort": "Research!"}, "cohort 'Research!' is not a DNS subdomain"),
    ({"cohort": None}, "borrowing_limit needs a cohort"),
    ({"borrowing_limit": -1}, "borrowing_limit must be a whole number of units >= 0, got -1"),
    ({"lending_limit": "2"}, "lending_limit must be a whole number"),
    ({"colour": "blue"}, "unknown key 'colour'"),
])
def test_bad_team_names_team_resource_and_reason(change, expected):
    team = dict(VISION, **change)
    _teams, problems = parse_teams([team])
    assert any(expected in p for p in problems), problems


def test_fractions_over_100_percent_name_every_team():
    greedy = {"name": "greedy", "namespaces": ["g"], "shares": {"nvidia.com/mig-1g.10gb": "30%"}}
    _teams, problems = parse_teams([VISION, NLP, greedy])
    assert problems == ["gpufleet_teams: resource nvidia.com/mig-1g.10gb: the teams' shares add up to 105% "
                        "(vision 50%, nlp 25%, greedy 30%), over 100%"]


def test_duplicate_team_and_shapes():
    _teams, problems = parse_teams([NLP, NLP])
    assert "gpufleet_teams: team 'nlp' is declared 2 times" in problems
    assert parse_teams({"name": "x"})[1] == ["gpufleet_teams must be a list of teams, got dict"]
    assert parse_teams(["x"])[1] == ["gpufleet_teams[0]: must be a mapping with name, namespaces and shares"]


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb",
                                      "nvidia.com/mig-3g.40gb.shared", "nvidia.com/mig-1c.3g.40gb",
                                      # the device plugin's names of suffixed profiles: '+' becomes '.' (issue 42)
                                      "nvidia.com/mig-1g.10gb.me", "nvidia.com/mig-1g.24gb.gfx", "nvidia.com/mig-1g.24gb.me.all",
                                      "nvidia.com/mig-1g.24gb-me", "nvidia.com/mig-1g.10gb.me.shared",
                                      "nvidia.com/mig-1g.24gb.gfx.shared", "nvidia.com/mig-1g.24gb.me.all.shared",
                                      "nvidia.com/mig-1g.24gb-me.shared"])
def test_known_resources(resource):
    assert parse_teams([dict(NLP, shares={resource: 1})])[1] == []


@pytest.mark.parametrize("resource", ["nvidia.com/mig-1g.10gb+me", "nvidia.com/mig-1g.24gb+me.all", "nvidia.com/mig-1g.24gb+gfx",
                                      "nvidia.com/mig-1g.10gb.foo", "nvidia.com/mig-1g.10gb.me.me"])
def test_names_no_node_advertises_are_refused(resource):
    """No node advertises a '+' (the device plugin turns it into '.'), and Kueue refuses it as a resource name."""
    problems = parse_teams([dict(NLP, shares={resource: 1})])[1]
    assert problems and "resource %r: unknown resource" % resource in problems[0], problems


def test_preflight_reports_teams_and_overcommit_flag():
    problems = variable_problems({"gpufleet_teams": [dict(NLP, namespaces=["NLP"])], "gpufleet_quota_overcommit": "yes"})
    assert problems == ["gpufleet_teams[0] (team 'nlp'): namespace 'NLP' is not a DNS label (lower case letters, digits, '-', at most 63)",
                        "gpufleet_quota_overcommit must be true or false, got 'yes'"]


def test_every_catalog_profile_can_get_quota():
    """Every GI profile of every catalog model, under the name the device plugin advertises, and its .shared form."""
    names = {mig_resource_name(p.name) for m in MODELS for p in m.profiles}
    assert {"nvidia.com/mig-1g.10gb.me", "nvidia.com/mig-1g.24gb-me", "nvidia.com/mig-1g.24gb.me.all"} & names
    for name in sorted(names):
        for resource in (name, name + ".shared"):
            assert parse_teams([dict(NLP, shares={resource: 1})])[1] == [], resource

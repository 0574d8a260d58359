"""Issue 43 #1: the inputs of gpufleet_dra_claim_templates are bounded (a count of 10^9 reached the API
server): ``parse_requests`` (the module and preflight) and ``capacity_problems`` (the module, with the plan)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import (
    capacity_problems, fleet_kinds, node_devices, parse_requests)

MIG_GPUS = [{"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}}]
FULL_GPUS = [{"model": "H100-80GB", "count": 2}]


@pytest.mark.parametrize("entry, words", [
    ({"namespaces": ["a"], "count": 10 ** 9}, "count must be at most 32"),
    ({"namespaces": ["a"], "count": 33}, "count must be at most 32"),
    ({"namespaces": ["a"], "count": 1.5}, "count must be a whole number >= 1"),
    ({"namespaces": ["a"], "count": True}, "count must be a whole number >= 1"),
    ({"namespaces": ["a" * 64]}, "is not a DNS label"),
    ({"namespaces": ["vision\n"]}, "is not a DNS label"),
    ({"namespaces": ["n%d" % i for i in range(257)]}, "257 namespaces, at most 256"),
    ({"namespaces": ["a"], "kinds": ["k%d" % i for i in range(65)]}, "65 kinds, at most 64"),
    ({"namespaces": ["a"], "kinds": ["x" * 254]}, "a string of at most 253"),
    ({"namespaces": ["a"], "kinds": [{"profile": "1g.10gb"}]}, "must be a device kind"),
    ({"namespaces": {"a": 1}}, "namespaces must be a non-empty list"),
], ids=["count-1e9", "count-33", "count-float", "count-bool", "ns-64-chars", "ns-newline", "257-namespaces",
        "65-kinds", "kind-254-chars", "kind-mapping", "namespaces-mapping"])
def test_claim_template_inputs_are_bounded(entry, words):
    """Issue 43 #1: a count of 10^9 reached the API server; every number and size has a bound."""
    requests, problems = parse_requests([entry])
    assert requests == [] and any(p.startswith("claim_templates[0]: ") and words in p for p in problems), problems


def test_too_many_entries_are_refused():
    requests, problems = parse_requests([{"namespaces": ["a"]}] * 65)
    assert requests == [] and problems == ["claim_templates: 65 entries, at most 64 (one entry names many namespaces "
                                           "and kinds)"]


def test_a_count_no_node_can_meet_is_refused_naming_the_most_one_node_has():
    devices = {"mig-1": node_devices("mig-1", MIG_GPUS), "full-1": node_devices("full-1", FULL_GPUS)}
    kinds = fleet_kinds(devices)
    requests, problems = parse_requests([{"namespaces": ["a"], "kinds": ["1g.10gb"], "count": 14},
                                         {"namespaces": ["a"], "count": 15}])
    assert problems == []
    assert capacity_problems(requests, kinds, devices) == [
        "claim_templates[1]: count 15 for gpu-nvidia-h100-80gb-hbm3, but no DRA node has more than 2 such devices "
        "(a claim's devices come from one node): no pod could ever get them",
        "claim_templates[1]: count 15 for mig-1g-10gb, but no DRA node has more than 14 such devices "
        "(a claim's devices come from one node): no pod could ever get them"]

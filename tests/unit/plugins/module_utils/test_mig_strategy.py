"""The MIG strategy each node's device plugin runs with, and strategy x sharing (issue 25 part 2).

Every combination of ClusterPolicy strategy, config flags.migStrategy and sharing kind, and the resources
the collection expects for each strategy x sharing x renaming on MIG-off and MIG-on GPUs: the table of
docs/reference/mig-strategy-sharing.md.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _gpu_operator as gop
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _mig_strategy as ms
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import (
    SharingError,
    parse_config,
    render_config,
    with_rendered_strategies)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import expected_node
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import node_gpus_from_plan

POLICIES = (None, "none", "single", "mixed")
FLAGS = (None, "none", "single", "mixed")
KINDS = ("none", "time-slicing", "mps")


@pytest.mark.parametrize("policy, flags, kind, replicated", list(itertools.product(POLICIES, FLAGS, KINDS, (True, False))))
def test_every_policy_flag_and_sharing_combination(policy, flags, kind, replicated):
    strategy = ms.plugin_strategy(policy, ms.rendered_strategy(policy, flags, kind))
    # the operator's MIG_STRATEGY wins; else the config file; else the collection's per-node choice
    if policy:
        assert strategy == policy
    elif flags:
        assert strategy == flags
    else:
        assert strategy == ("none" if kind == "mps" else "mixed")
    refused = ms.start_refusal(strategy, kind, replicated)
    assert (refused is not None) == (kind == "mps" and replicated and strategy == "mixed")
    if refused:
        assert refused == "using --mig-strategy=mixed is not supported with MPS"
    # only a ClusterPolicy mixed, or a config saying mixed itself, can make MPS fail
    assert not (refused and policy is None and flags is None)


def test_plugin_default_without_any_strategy_is_none():
    assert ms.plugin_strategy(None, None) == "none" == ms.PLUGIN_DEFAULT


def test_rendered_strategy_keeps_a_given_value_and_fills_only_per_node():
    assert ms.rendered_strategy("mixed", None, "mps") is None  # under a policy nothing is added
    assert ms.rendered_strategy("mixed", "mixed", "time-slicing") == "mixed"
    assert ms.rendered_strategy(None, None, "mps") == "none"
    assert ms.rendered_strategy(None, None, "time-slicing") == ms.rendered_strategy(None, None, "none") == "mixed"
    assert ms.rendered_strategy(None, "single", "mps") == "single"


def test_per_node_configs_are_rendered_with_their_strategy():
    configs = {"mps": parse_config({"name": "mps", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}),
               "ts": parse_config({"name": "ts", "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]})}
    per_node = with_rendered_strategies(configs, None)
    assert "  migStrategy: none\n" in render_config(per_node["mps"])
    assert "  migStrategy: mixed\n" in render_config(per_node["ts"])
    assert with_rendered_strategies(configs, "mixed") == configs  # unchanged under a ClusterPolicy strategy


@pytest.mark.parametrize("policy, groups, expected", [
    ("mixed", ["all", "gpu_hosts", "h200_shared"], "group gpu_hosts/h200_shared, sharing config 'mps4'"),
    ("", ["h200_shared"], None),
    ("single", ["h200_shared"], None),
    ("none", [], None),
])
def test_preflight_names_the_group_the_config_and_the_reason(policy, groups, expected):
    config = {"name": "mps4", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    problem = ms.preflight_problem(policy, config, groups)
    if expected is None:
        assert problem is None
    else:
        assert problem.startswith(expected) and ms.MPS_MIXED_MESSAGE in problem and "gpu_operator_mig_strategy" in problem
    flagged = ms.preflight_problem("", dict(config, mig_strategy="mixed"), ["h200_shared"])
    assert "flags.migStrategy mixed" in flagged and "set mig_strategy none or single" in flagged
    assert ms.preflight_problem("mixed", dict(config, strategy="time-slicing"), groups) is None
    assert ms.preflight_problem("mixed", "not a mapping", groups) is None


def _cfg(kind, resource, rename):
    if kind == "none":
        return parse_config({"name": "c", "strategy": "none"})
    return parse_config({"name": "c", "strategy": kind, "rename_by_default": rename,
                         "resources": [{"name": resource, "replicas": 4}]})


MIG_OFF = [{"model": "H200", "count": 2}]
MIG_ON = [{"model": "A100-40GB", "count": 2, "mig": {"1g.5gb": 7}}]
REFUSED = "refused"

# strategy, sharing, GPUs -> what the plugin advertises (renamed resources: `<name>.shared`, `<name>` 0).
TABLE = [
    ("none", "none", MIG_OFF, {"nvidia.com/gpu": 2}),
    ("none", "time-slicing", MIG_OFF, {"nvidia.com/gpu": 8}),
    ("none", "mps", MIG_OFF, {"nvidia.com/gpu": 8}),
    ("single", "none", MIG_OFF, {"nvidia.com/gpu": 2}),
    ("single", "time-slicing", MIG_OFF, {"nvidia.com/gpu": 8}),
    ("single", "mps", MIG_OFF, {"nvidia.com/gpu": 8}),
    ("mixed", "none", MIG_OFF, {"nvidia.com/gpu": 2}),
    ("mixed", "time-slicing", MIG_OFF, {"nvidia.com/gpu": 8}),
    ("mixed", "mps", MIG_OFF, REFUSED),  # validateFlags
    ("none", "none", MIG_ON, REFUSED),  # the collection's own refusal: the MIG devices are not advertised
    ("none", "time-slicing", MIG_ON, REFUSED),
    ("none", "mps", MIG_ON, REFUSED),
    ("single", "none", MIG_ON, {"nvidia.com/gpu": 14}),
    ("single", "time-slicing", MIG_ON, {"nvidia.com/gpu": 56}),
    ("single", "mps", MIG_ON, REFUSED),  # sharing using MPS is not supported for MIG devices
    ("mixed", "none", MIG_ON, {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 14}),
    ("mixed", "time-slicing", MIG_ON, {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 56}),
    ("mixed", "mps", MIG_ON, REFUSED),
]


@pytest.mark.parametrize("rename", [False, True])
@pytest.mark.parametrize("strategy, kind, gpus, expected", TABLE)
@pytest.mark.parametrize("per_node", [False, True])
def test_strategy_x_sharing_table(strategy, kind, gpus, expected, rename, per_node):
    resource = "nvidia.com/mig-1g.5gb" if gpus is MIG_ON and strategy == "mixed" and kind != "mps" else "nvidia.com/gpu"
    cfg = _cfg(kind, resource, rename)
    if per_node and cfg is not None:  # the same strategy, given by the config itself
        cfg = with_rendered_strategies({"c": dataclasses.replace(cfg, mig_strategy=strategy)}, None)["c"]
    node_gpus = node_gpus_from_plan(gpus)
    if expected == REFUSED:
        with pytest.raises(SharingError):
            expected_node("n", node_gpus, strategy, cfg, per_node=per_node)
        return
    got = expected_node("n", node_gpus, strategy, cfg, per_node=per_node).resources
    if rename and kind != "none":
        shared = {name for name, count in expected.items() if count and name == resource}
        expected = dict(expected, **{name: 0 for name in shared}, **{name + ".shared": expected[name] for name in shared})
    assert got == expected


def test_gpu_operator_values_leave_the_strategy_to_the_nodes():
    # "" is written as the chart value, which the chart renders as no spec.mig.strategy at all
    assert gop.build_values(mig_strategy="") == {"mig": {"strategy": ""}}
    assert gop.build_values(mig_strategy="mixed") == {"mig": {"strategy": "mixed"}}
    with pytest.raises(gop.ValuesError) as err:
        gop.build_values(mig_strategy="both")
    assert "per node" in str(err.value.problems)

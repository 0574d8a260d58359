"""_taints: declared node taints, their tolerations and what tolerates what (issue 13, specs §17.3)."""

from __future__ import annotations

import json

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import (
    GPU_TOLERATION, OWNED_ANNOTATION, node_taints, stranding_problems, taint_problems, tolerations_for, untolerated)

DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_invalid_effect_and_key_are_named():
    problems = taint_problems([{"key": "dedicated", "value": "gpu", "effect": "NoSchedul"}, {"key": "bad key", "effect": "NoExecute"}],
                              "host gpu-a")
    assert problems[0] == "host gpu-a: taint 1 (dedicated): invalid effect 'NoSchedul', expected one of NoSchedule, PreferNoSchedule, NoExecute"
    assert "host gpu-a: taint 2: key 'bad key' is not a qualified name" in problems[1]
    assert taint_problems([DEDICATED], "x") == []


def test_tolerations_keep_the_chart_default_and_add_each_taint_once():
    tolerations = tolerations_for([DEDICATED, DEDICATED, {"key": "nvidia.com/gpu", "effect": "NoSchedule"}], [GPU_TOLERATION])
    assert tolerations == [GPU_TOLERATION, {"key": "dedicated", "effect": "NoSchedule", "operator": "Equal", "value": "gpu"}]
    assert untolerated([DEDICATED], [GPU_TOLERATION]) == [DEDICATED]
    assert untolerated([DEDICATED], tolerations) == []
    assert untolerated([{"key": "soft", "effect": "PreferNoSchedule"}], []) == []


def test_node_taints_replace_ours_and_keep_others():
    node = {"metadata": {"annotations": {OWNED_ANNOTATION: json.dumps([["old", "NoSchedule"]])}},
            "spec": {"taints": [{"key": "old", "effect": "NoSchedule"}, {"key": "theirs", "effect": "NoExecute"}]}}
    taints, annotation = node_taints(node, [DEDICATED])
    assert taints == [{"key": "theirs", "effect": "NoExecute"}, DEDICATED]
    assert json.loads(annotation) == [["dedicated", "NoSchedule"]]


def test_a_taint_no_operand_tolerates_would_strand_the_node():
    """Issue 21 (1): the operands (the chart's nvidia.com/gpu toleration plus the given ones) must tolerate
    every scheduling taint the collection leaves on a node."""
    assert stranding_problems("gpu-a", [DEDICATED], tolerations_for([DEDICATED])) == []
    assert stranding_problems("gpu-a", [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], []) == []
    assert stranding_problems("gpu-a", [{"key": "soft", "effect": "PreferNoSchedule"}], []) == []
    assert stranding_problems("gpu-a", [DEDICATED], []) == [
        "node gpu-a: taint dedicated=gpu:NoSchedule would be tolerated by no operand of the GPU Operator "
        "(operand_tolerations): its device plugin would leave and the node would advertise no GPU"]

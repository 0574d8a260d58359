"""Node-group templates (issue 39 part 1): the resources a new node of a group advertises are the ones verify
expects of the group's hosts, for every catalog model and sharing mode; the autoscalers' forms of them."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import jsonschema
import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_groups import (
    CAPI_GPU_LABEL, CAPI_PREFIX, NodeGroup, node_group_templates, plan_groups, render_files)
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import expected_node
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import node_gpus_from_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError, parse_config

# The contract of node-group-templates.json (docs/autoscaling.md): a change here is a change users' pipelines see.
SCHEMA: Dict[str, Any] = {
    "type": "object", "required": ["groups"], "additionalProperties": False,
    "properties": {"groups": {"type": "object", "additionalProperties": {
        "type": "object", "additionalProperties": False,
        "required": ["resources", "labels", "taints", "clusterapi", "aws_asg_tags", "karpenter_node_overlay"],
        "properties": {
            "resources": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "taints": {"type": "array", "items": {"type": "object", "required": ["key", "effect"]}},
            "clusterapi": {"type": "object", "additionalProperties": False,
                           "required": ["expressible", "reason", "annotations"],
                           "properties": {"expressible": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1},
                                          "annotations": {"type": "object", "additionalProperties": {"type": "string"},
                                                          "propertyNames": {"pattern": "^capacity\\.cluster-autoscaler\\.kubernetes\\.io/"}}}},
            "aws_asg_tags": {"type": "object", "additionalProperties": {"type": "string"},
                             "propertyNames": {"pattern": "^k8s\\.io/cluster-autoscaler/node-template/(resources|label|taint)/"}},
            "karpenter_node_overlay": {"type": "object"},
        }}}}}

TS2 = {"strategy": "time-slicing", "replicas": 2}


def model_gpu(model: Any, mig: Optional[Dict[str, int]] = None, count: int = 2) -> Dict[str, Any]:
    gpu: Dict[str, Any] = {"model": model.key, "count": count, "product": model.product_names[0]}
    return dict(gpu, mig=mig) if mig else gpu


def modes(model: Any) -> List[Any]:
    """(name, planned GPU, sharing config or None, MIG strategy) for every sharing mode on this model."""
    smallest = min(model.profiles, key=lambda p: (p.compute_slices, p.memory_slices)).name
    res = "nvidia.com/mig-" + smallest.replace("+", ".")
    return [
        ("whole", model_gpu(model), None, "none"),
        ("time-slicing", model_gpu(model), {"name": "ts", "strategy": "time-slicing",
                                            "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}, "none"),
        ("mps", model_gpu(model), {"name": "mps", "strategy": "mps",
                                   "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}, "none"),
        ("renamed", model_gpu(model), {"name": "rn", "strategy": "time-slicing", "rename_by_default": True,
                                       "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}, "none"),
        ("mig-mixed", model_gpu(model, dict(model.balanced)), None, "mixed"),
        ("mig-single", model_gpu(model, {smallest: 1}), None, "single"),
        ("mig-time-sliced", model_gpu(model, {smallest: 1}), {"name": "mts", "strategy": "time-slicing",
                                                              "resources": [{"name": res, "replicas": 2}]}, "mixed"),
    ]


def templates(node_gpus: Dict[str, List[Dict[str, Any]]], groups: List[NodeGroup], config: Optional[Dict[str, Any]] = None,
              strategy: Optional[str] = None) -> Dict[str, Any]:
    params = {"node_gpus": node_gpus, "node_plans": [], "mig_strategy": strategy,
              "node_configs": {n: config for n in node_gpus} if config else {}}
    fleet, hosts = plan_groups(params, groups)
    return node_group_templates(groups, fleet, hosts)


CASES = [(m, mode) for m in MODELS for mode in modes(m)]


@pytest.mark.parametrize("model,mode", CASES, ids=["%s-%s" % (m.key, mode[0]) for m, mode in CASES])
def test_the_template_is_what_verify_expects_of_every_host(model, mode) -> None:
    _name, gpu, config, strategy = mode
    group = NodeGroup("g", ("n-0", "n-1"))
    doc = templates({"n-0": [gpu], "n-1": [gpu]}, [group], config, strategy)
    jsonschema.validate(doc, SCHEMA)
    cfg = parse_config(config, "c") if config else None
    wanted = expected_node("n-0", node_gpus_from_plan([gpu]), strategy, cfg, labelled=cfg is not None)
    template = doc["groups"]["g"]
    assert template["resources"] == {r: n for r, n in wanted.resources.items() if n} != {}
    assert {k: v for k, v in template["labels"].items() if k in wanted.labels} == wanted.labels
    one = len(template["resources"]) == 1
    assert template["clusterapi"]["expressible"] is one, template["clusterapi"]
    if one:
        (resource, count), = template["resources"].items()
        assert template["clusterapi"]["annotations"][CAPI_PREFIX + "gpu-type"] == resource
        assert template["clusterapi"]["annotations"][CAPI_PREFIX + "gpu-count"] == str(count)
    assert (CAPI_GPU_LABEL in template["labels"]) is ("nvidia.com/gpu" in template["resources"])
    for resource, count in template["resources"].items():
        assert template["aws_asg_tags"]["k8s.io/cluster-autoscaler/node-template/resources/" + resource] == str(count)
        assert template["karpenter_node_overlay"]["spec"]["capacity"][resource] == str(count)


def test_a_mixed_layout_is_not_expressible_and_says_what_to_do() -> None:
    a100 = {"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
    doc = templates({"a-0": [a100]}, [NodeGroup("inference", ("a-0",), capacity={"cpu": "32", "memory": "256Gi"})],
                    strategy="mixed")
    capi = doc["groups"]["inference"]["clusterapi"]
    assert capi["expressible"] is False and capi["annotations"] == {}
    assert "split the group" in capi["reason"] and "minimum size at 1 or more" in capi["reason"]
    assert "nvidia.com/mig-1g.5gb, nvidia.com/mig-2g.10gb, nvidia.com/mig-3g.20gb" in capi["reason"]
    assert doc["groups"]["inference"]["resources"] == {"nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-2g.10gb": 1,
                                                       "nvidia.com/mig-3g.20gb": 1}


def test_whole_gpus_give_the_annotations_known_from_the_inventory_only() -> None:
    h100 = {"model": "H100-80GB", "count": 2, "product": "NVIDIA H100 80GB HBM3"}
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    doc = templates({"t-0": [h100], "t-1": [h100]},
                    [NodeGroup("training", ("t-0", "t-1"), taints=(taint,), capacity={"maxPods": 110})])
    template = doc["groups"]["training"]
    notes = template["clusterapi"]["annotations"]
    assert {k[len(CAPI_PREFIX):] for k in notes} == {"maxPods", "labels", "taints", "gpu-type", "gpu-count"}
    assert notes[CAPI_PREFIX + "gpu-type"] == "nvidia.com/gpu" and notes[CAPI_PREFIX + "gpu-count"] == "2"
    assert notes[CAPI_PREFIX + "taints"] == "nvidia.com/gpu=present:NoSchedule"
    assert notes[CAPI_PREFIX + "maxPods"] == "110"
    assert "cluster-api/accelerator=NVIDIA-H100-80GB-HBM3" in notes[CAPI_PREFIX + "labels"].split(",")
    assert template["aws_asg_tags"]["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert template["taints"] == [taint]
    overlay = template["karpenter_node_overlay"]
    assert overlay["apiVersion"] == "karpenter.sh/v1alpha1" and overlay["kind"] == "NodeOverlay"
    assert overlay["spec"]["requirements"] == [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["training"]}]


def test_a_renamed_shared_gpu_gets_no_accelerator_label() -> None:
    """gpu_processor.go: a node with the GPU label and no allocatable nvidia.com/gpu is held unready."""
    h200 = {"model": "H200", "count": 1, "product": "NVIDIA H200"}
    config = {"name": "rn", "strategy": "time-slicing", "rename_by_default": True,
              "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    template = templates({"s-0": [h200]}, [NodeGroup("shared", ("s-0",))], config)["groups"]["shared"]
    assert template["resources"] == {"nvidia.com/gpu.shared": 4}
    assert CAPI_GPU_LABEL not in template["labels"]


def test_dra_whole_gpus_name_the_driver_and_dra_mig_cannot_scale_from_zero() -> None:
    whole = {"model": "H100-80GB", "count": 4}
    mig = {"model": "A100-40GB", "count": 1, "mig": {"3g.20gb": 2}}
    doc = templates({"d-0": [whole], "m-0": [mig]},
                    [NodeGroup("dra-whole", ("d-0",), backend="dra"), NodeGroup("dra-mig", ("m-0",), backend="dra")],
                    strategy="mixed")
    notes = doc["groups"]["dra-whole"]["clusterapi"]["annotations"]
    assert notes == {CAPI_PREFIX + "dra-driver": "gpu.nvidia.com", CAPI_PREFIX + "gpu-count": "4"}
    capi = doc["groups"]["dra-mig"]["clusterapi"]
    assert capi["expressible"] is False and "MIG on DRA cannot scale from zero" in capi["reason"]
    assert "kubernetes/autoscaler#10199" in capi["reason"]


def test_hosts_that_differ_are_refused_naming_the_group_and_the_hosts() -> None:
    with pytest.raises(SharingError) as caught:
        templates({"a-0": [{"model": "A100-40GB", "count": 1}], "a-1": [{"model": "A100-40GB", "count": 2}]},
                  [NodeGroup("inference", ("a-0", "a-1"))])
    text = " ".join(caught.value.problems)
    assert ("node group 'inference': its hosts differ, so no one template describes a new node of it: "
            "a-0: 1 x A100-40GB, MIG off, sharing config none, advertising nvidia.com/gpu=1; "
            "a-1: 2 x A100-40GB, MIG off, sharing config none, advertising nvidia.com/gpu=2; put hosts") in text, text


def test_a_host_in_two_groups_and_bad_inputs_are_refused_all_at_once() -> None:
    gpu = [{"model": "H200", "count": 1}]
    with pytest.raises(SharingError) as caught:
        templates({"x": gpu}, [NodeGroup("one", ("x",), backend="cuda"), NodeGroup("two", ("x",), capacity={"gpu": 1}),
                               NodeGroup("three", (), taints=({"key": "k"},))])
    text = "\n".join(caught.value.problems)
    for part in ("node group 'one': backend must be one of device-plugin, dra, got 'cuda'",
                 "node group 'two': capacity key 'gpu' is not one of cpu, memory, maxPods",
                 "node group 'three': has no hosts", "node group 'three': a taint needs key and effect",
                 "host 'x' is in the node groups 'one' and 'two'"):
        assert part in text, text


def test_a_host_without_a_plan_is_refused() -> None:
    with pytest.raises(SharingError, match="node group 'g': node 'ghost': no GPU plan given"):
        templates({"x": [{"model": "H200", "count": 1}]}, [NodeGroup("g", ("x", "ghost"))])


def test_the_yaml_file_holds_the_same_data_as_the_json() -> None:
    a100 = {"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 7}}
    doc = templates({"a-0": [a100]}, [NodeGroup("small", ("a-0",), taints=({"key": "k", "effect": "NoSchedule"},))],
                    strategy="mixed")
    files = render_files(doc)
    assert json.loads(files["node-group-templates.json"]) == doc == yaml.safe_load(files["node-group-templates.yaml"])
    odd = {"groups": {"e": {"labels": {"yes": "1", "a b": "x"}, "taints": [], "x": [[1, {"a": []}]]}}}
    assert render_files(odd)["node-group-templates.yaml"] == (
        '---\ngroups:\n  e:\n    labels:\n      "yes": "1"\n      "a b": "x"\n    taints: []\n    x:\n      - - 1\n        - a: []\n')
    assert yaml.safe_load(render_files(odd)["node-group-templates.yaml"]) == odd


def test_hosts_alike_in_summary_show_all_they_differ_in() -> None:
    """One host selects its config by label, the other by the default: the labels differ, the summary does not."""
    gpu = [{"model": "H200", "count": 1}]
    config = {"name": "ts", "strategy": "time-slicing", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}
    params = {"node_gpus": {"x-0": gpu, "x-1": gpu}, "node_plans": [], "node_configs": {"x-0": config},
              "configs": [dict(config, nodes=[])], "default_config": "ts"}
    group = NodeGroup("g", ("x-0", "x-1"))
    fleet, hosts = plan_groups(params, [group])
    with pytest.raises(SharingError) as caught:
        node_group_templates([group], fleet, hosts)
    assert '"nvidia.com/device-plugin.config": "ts"' in caught.value.problems[0], caught.value.problems

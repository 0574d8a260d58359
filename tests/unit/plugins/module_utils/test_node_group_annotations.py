"""Which MachineDeployments get which scale-from-zero annotations (issue 39): the template's where one resource
describes the group, the GPU keys removed where none does, every other annotation kept; bad entries refused at once."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_group_annotations import (
    AnnotationError, annotated, targets, wanted)

P = "capacity.cluster-autoscaler.kubernetes.io/"
TEMPLATES = {"groups": {
    "train": {"clusterapi": {"expressible": True, "reason": "", "annotations": {P + "gpu-type": "nvidia.com/gpu", P + "gpu-count": "2"}}},
    "mixed": {"clusterapi": {"expressible": False, "reason": "split", "annotations": {}}}}}


def test_the_template_annotations_are_set_and_others_kept() -> None:
    before = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0", P + "cpu": "64"}
    assert annotated(before, wanted(TEMPLATES, "train")) == dict(before, **{P + "gpu-type": "nvidia.com/gpu", P + "gpu-count": "2"})


def test_a_group_no_annotation_describes_loses_only_the_gpu_keys() -> None:
    before = {P + "gpu-type": "nvidia.com/gpu", P + "gpu-count": "1", P + "dra-driver": "gpu.nvidia.com", P + "cpu": "8", "x": "y"}
    assert annotated(before, wanted(TEMPLATES, "mixed")) == {P + "cpu": "8", "x": "y"}


def test_targets_default_the_namespace_and_refuse_every_bad_entry_at_once() -> None:
    assert targets([{"name": "train", "machine_deployments": [{"name": "md-a"}]}], TEMPLATES) == [("train", "default", "md-a")]
    with pytest.raises(AnnotationError) as caught:
        targets([{"name": "train", "machine_deployments": [{"name": "Bad_Name"}, {"name": "ok", "namespace": "a/b"}, "md"]},
                 {"name": "ghost", "machine_deployments": [{"name": "md-g"}]},
                 {"name": "mixed", "machine_deployments": [{"name": "md-a", "namespace": "default"}]},
                 {"name": "train", "machine_deployments": [{"name": "md-a"}]}], TEMPLATES)
    text = "\n".join(caught.value.problems)
    for part in ("node group 'train' machine_deployments[0]: name 'Bad_Name' is not a valid object name",
                 "machine_deployments[1]: namespace 'a/b' is not a valid namespace name",
                 "machine_deployments[2]: must be {name, namespace}, got 'md'",
                 "node group 'ghost' machine_deployments[0]: the group has no template",
                 "MachineDeployment default/md-a is named by the node groups 'mixed' and 'train'"):
        assert part in text, text

# -*- coding: utf-8 -*-
"""Unit tests for _sharing: every docs/reference/specs.md §9-10 example plus the validation rules."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan as fp
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _sharing as s
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _expected
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _node_gpus

H100 = "NVIDIA H100 80GB HBM3"


def cfg(name="ts", strategy="time-slicing", resources=None, **extra):
    raw = {"name": name, "strategy": strategy}
    if resources is not None:
        raw["resources"] = resources
    elif strategy != "none":
        raw["resources"] = [{"name": "nvidia.com/gpu", "replicas": 4}]
    raw.update(extra)
    return s.parse_config(raw)


def problems_of(func, *args, **kwargs):
    with pytest.raises(s.SharingError) as info:
        func(*args, **kwargs)
    return info.value.problems


# ---------------------------------------------------------------------------------------------
# docs/reference/specs.md §9.3: full GPUs, time-slicing


def test_eight_h100_replicas_4_advertise_32_with_shared_product():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "count": 8, "product": H100}])
    exp = _expected.expected_node("n1", gpus, "none", cfg())
    assert exp.resources == {"nvidia.com/gpu": 32}
    assert exp.labels["nvidia.com/gpu.count"] == "8"  # physical count stays
    assert exp.labels["nvidia.com/gpu.replicas"] == "4"
    assert exp.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert exp.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert exp.labels["nvidia.com/mps.capable"] == "false"
    assert "nvidia.com/mig.strategy" not in exp.labels
    assert exp.sharing == "time-slicing"


def test_rename_by_default_advertises_gpu_shared_and_zero_gpu_without_suffix():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "count": 8, "product": H100}])
    exp = _expected.expected_node("n1", gpus, "none", cfg(rename_by_default=True))
    assert exp.resources == {"nvidia.com/gpu.shared": 32, "nvidia.com/gpu": 0}
    assert exp.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_replicas_10_on_8_gpus_is_80():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 8}])
    exp = _expected.expected_node("n", gpus, "none", cfg(resources=[{"name": "gpu", "replicas": 10}]))
    assert exp.resources == {"nvidia.com/gpu": 80}


def test_operator_doc_t4_example_with_and_without_rename():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 4, "product": "Tesla T4"}])
    plain = _expected.expected_node("t4", gpus, "none", cfg())
    assert plain.resources == {"nvidia.com/gpu": 16}
    assert plain.labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert plain.labels["nvidia.com/gpu.count"] == "4"
    renamed = _expected.expected_node("t4", gpus, "none", cfg(rename_by_default=True))
    assert renamed.resources == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16}
    assert renamed.labels["nvidia.com/gpu.product"] == "Tesla-T4"


def test_no_config_means_no_sharing():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 2, "product": H100}])
    exp = _expected.expected_node("n", gpus, "none", None)
    assert exp.resources == {"nvidia.com/gpu": 2}
    assert exp.labels["nvidia.com/gpu.replicas"] == "1"
    assert exp.labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert exp.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert exp.sharing == "none" and exp.config is None


def test_strategy_none_config_shares_nothing():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 2}])
    exp = _expected.expected_node("n", gpus, "none", cfg(strategy="none"))
    assert exp.resources == {"nvidia.com/gpu": 2}
    assert s.render_config(cfg(strategy="none")) == "version: v1\n"


def test_unknown_product_is_checked_by_suffix():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 2}])
    exp = _expected.expected_node("n", gpus, "none", cfg())
    assert "nvidia.com/gpu.product" not in exp.labels
    assert exp.product_suffixes == {"nvidia.com/gpu.product": "-SHARED"}
    assert _expected.product_matches("NVIDIA-H100-80GB-HBM3-SHARED", "-SHARED")
    assert not _expected.product_matches("NVIDIA-H100-80GB-HBM3", "-SHARED")
    assert _expected.product_matches("NVIDIA-H100-80GB-HBM3", "")
    assert not _expected.product_matches("NVIDIA-H100-80GB-HBM3-SHARED", "")
    assert _expected.product_matches("A100-SXM4-40GB-MIG-1g.5gb-SHARED", "-MIG-1g.5gb-SHARED")
    assert not _expected.product_matches(None, "")


def test_labelled_node_expects_the_config_label():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 1}])
    exp = _expected.expected_node("n", gpus, "none", cfg(name="ts4"), labelled=True)
    assert exp.labels[s.CONFIG_LABEL] == "ts4"
    assert s.CONFIG_LABEL not in _expected.expected_node("n", gpus, "none", cfg(name="ts4")).labels


# ---------------------------------------------------------------------------------------------
# docs/reference/specs.md §10: A100 fine-grained mixed example

FINE = {
    "name": "a100-40gb",
    "strategy": "time-slicing",
    "mig_strategy": "mixed",
    "resources": [
        {"name": "nvidia.com/gpu", "replicas": 8},
        {"name": "nvidia.com/mig-1g.5gb", "replicas": 2},
        {"name": "nvidia.com/mig-2g.10gb", "replicas": 2},
        {"name": "nvidia.com/mig-3g.20gb", "replicas": 3},
        {"name": "nvidia.com/mig-7g.40gb", "replicas": 7},
    ],
}
BALANCED_A100_40 = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


def test_a100_fine_grained_mixed_example():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "A100-40GB", "mig": BALANCED_A100_40, "product": "A100-SXM4-40GB"}])
    exp = _expected.expected_node("a100", gpus, "mixed", s.parse_config(FINE))
    # gpu 0: the only GPU is MIG-enabled; 7g.40gb is listed but absent, so skipped.
    assert exp.resources == {
        "nvidia.com/gpu": 0,
        "nvidia.com/mig-1g.5gb": 4,
        "nvidia.com/mig-2g.10gb": 2,
        "nvidia.com/mig-3g.20gb": 3,
    }
    assert exp.labels["nvidia.com/mig-1g.5gb.replicas"] == "2"
    assert exp.labels["nvidia.com/mig-1g.5gb.sharing-strategy"] == "time-slicing"
    assert exp.labels["nvidia.com/mig-1g.5gb.product"] == "A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    assert exp.labels["nvidia.com/mig-1g.5gb.count"] == "2"
    assert exp.labels["nvidia.com/mig-3g.20gb.replicas"] == "3"
    assert exp.labels["nvidia.com/mig.strategy"] == "mixed"
    # A MIG-enabled parent: gpu.count physical, replicas 0, unshared product (docs/reference/specs.md §8 mixed example).
    assert exp.labels["nvidia.com/gpu.count"] == "1"
    assert exp.labels["nvidia.com/gpu.replicas"] == "0"
    assert exp.labels["nvidia.com/gpu.product"] == "A100-SXM4-40GB"


def test_fine_grained_config_renders_the_documented_shape():
    text = s.render_config(s.parse_config(FINE))
    doc = yaml.safe_load(text)
    assert doc["version"] == "v1"
    assert doc["flags"] == {"migStrategy": "mixed"}
    ts = doc["sharing"]["timeSlicing"]
    assert ts["renameByDefault"] is False and ts["failRequestsGreaterThanOne"] is False
    assert ts["resources"] == FINE["resources"]


def test_mixed_with_rename_names_mig_shared():
    raw = dict(FINE, rename_by_default=True)
    gpus = _node_gpus.node_gpus_from_plan([{"model": "A100-40GB", "mig": BALANCED_A100_40}])
    exp = _expected.expected_node("a100", gpus, "mixed", s.parse_config(raw))
    assert exp.resources["nvidia.com/mig-1g.5gb.shared"] == 4
    assert exp.resources["nvidia.com/mig-1g.5gb"] == 0
    assert exp.product_suffixes["nvidia.com/mig-1g.5gb.product"] == "-MIG-1g.5gb"


def test_mixed_node_with_full_and_mig_gpus():
    gpus = _node_gpus.node_gpus_from_plan([
        {"model": "H100-80GB", "count": 6, "product": H100},
        {"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}, "product": H100},
    ])
    config = cfg(resources=[{"name": "nvidia.com/gpu", "replicas": 2}, {"name": "nvidia.com/mig-1g.10gb", "replicas": 3}],
                 mig_strategy="mixed")
    exp = _expected.expected_node("n", gpus, "mixed", config)
    assert exp.resources == {"nvidia.com/gpu": 12, "nvidia.com/mig-1g.10gb": 42}
    assert exp.labels["nvidia.com/gpu.count"] == "8"
    assert exp.labels["nvidia.com/gpu.replicas"] == "2"
    assert exp.labels["nvidia.com/mig-1g.10gb.count"] == "14"
    assert exp.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"


def test_mixed_unshared_mig_resource_labels():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "product": H100}])
    exp = _expected.expected_node("n", gpus, "mixed", None)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1,
                             "nvidia.com/mig-3g.40gb": 1}
    assert exp.labels["nvidia.com/mig-1g.10gb.replicas"] == "1"
    assert exp.labels["nvidia.com/mig-1g.10gb.sharing-strategy"] == "none"
    assert exp.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"


# ---------------------------------------------------------------------------------------------
# single strategy (docs/reference/specs.md §8, 10)


def test_single_strategy_mig_devices_are_gpu():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "A100-40GB", "count": 8, "mig": {"1g.5gb": 7}, "product": "A100-SXM4-40GB"}])
    exp = _expected.expected_node("n", gpus, "single", None)
    assert exp.resources == {"nvidia.com/gpu": 56}
    assert exp.labels["nvidia.com/gpu.count"] == "56"
    assert exp.labels["nvidia.com/gpu.product"] == "A100-SXM4-40GB-MIG-1g.5gb"
    assert exp.labels["nvidia.com/mig.strategy"] == "single"


def test_single_strategy_time_sliced_gets_shared_mig_product():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 7}, "product": "A100-SXM4-40GB"}])
    exp = _expected.expected_node("n", gpus, "single", cfg(resources=[{"name": "nvidia.com/gpu", "replicas": 2}]))
    assert exp.resources == {"nvidia.com/gpu": 14}
    assert exp.labels["nvidia.com/gpu.product"] == "A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    assert exp.labels["nvidia.com/gpu.replicas"] == "2"


def test_single_strategy_needs_one_profile_and_all_gpus_mig():
    two = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 2, "2g.20gb": 1}}])
    assert "one MIG profile" in " ".join(problems_of(_expected.expected_node, "n", two, "single", None))
    some = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}, {"model": "H100-80GB"}])
    assert "every GPU MIG-enabled" in " ".join(problems_of(_expected.expected_node, "n", some, "single", None))


def test_mig_layout_under_strategy_none_is_rejected():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}])
    assert "strategy is none" in " ".join(problems_of(_expected.expected_node, "n", gpus, "none", None))


# ---------------------------------------------------------------------------------------------
# MPS (docs/reference/specs.md §9.2)


def test_mps_on_full_gpus():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H200", "count": 8, "product": "NVIDIA H200"}])
    config = cfg(name="mps10", strategy="mps", resources=[{"name": "nvidia.com/gpu", "replicas": 10}])
    exp = _expected.expected_node("h200", gpus, "none", config)
    assert exp.resources == {"nvidia.com/gpu": 80}
    assert exp.labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert exp.labels["nvidia.com/gpu.product"] == "NVIDIA-H200-SHARED"
    assert exp.labels["nvidia.com/mps.capable"] == "true"
    assert exp.sharing == "mps"
    assert config.fail_requests_greater_than_one is True
    doc = yaml.safe_load(s.render_config(config))
    assert doc == {"version": "v1", "sharing": {"mps": {"renameByDefault": False,
                                                        "resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}}


def test_mps_on_mig_enabled_gpus_is_refused():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}])
    problems = problems_of(_expected.expected_node, "n", gpus, "mixed", cfg(name="m", strategy="mps"))
    assert any("MPS is not supported on MIG-enabled GPUs" in p and "'m'" in p for p in problems)


def test_mps_only_shares_gpu():
    problems = problems_of(s.parse_config, {"name": "m", "strategy": "mps",
                                            "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]})
    assert any("MPS shares only nvidia.com/gpu" in p for p in problems)
    # fail_requests_greater_than_one false with MPS depends on the device-plugin release:
    # test_component_versions.py (docs/reference/specs.md §9.9)


# ---------------------------------------------------------------------------------------------
# Validation: clear errors naming config and field


@pytest.mark.parametrize("replicas, words", [
    (1, "replicas 1 means sharing off"),
    (0, "replicas must be >= 2"),
    (-3, "replicas must be >= 2"),
    ("4", "must be an integer"),
    (True, "must be an integer"),
    (None, "must be an integer"),
])
def test_replicas_rules(replicas, words):
    problems = problems_of(s.parse_config, {"name": "bad", "resources": [{"name": "gpu", "replicas": replicas}]})
    assert any(words in p and "'bad'" in p and "resources[0]" in p for p in problems), problems


@pytest.mark.parametrize("raw, words", [
    ({"name": "x", "resources": []}, "resources is required"),
    ({"name": "x", "version": "v2", "resources": [{"name": "gpu", "replicas": 2}]}, "version must be v1"),
    ({"name": "x", "strategy": "vgpu", "resources": [{"name": "gpu", "replicas": 2}]}, "strategy must be one of"),
    ({"name": "x", "resources": [{"name": "amd.com/gpu", "replicas": 2}]}, "resource name must be"),
    ({"name": "x", "resources": [{"name": "nvidia.com/mig-big", "replicas": 2}]}, "resource name must be"),
    ({"name": "x", "resources": [{"name": "gpu", "replicas": 2}, {"name": "nvidia.com/gpu", "replicas": 3}]}, "listed twice"),
    ({"name": "x", "resources": [{"replicas": 2}]}, "needs a name"),
    ({"name": "Bad Name!", "resources": [{"name": "gpu", "replicas": 2}]}, "valid label value"),
    ({"name": "x" * 64, "resources": [{"name": "gpu", "replicas": 2}]}, "valid label value"),
    ({"name": "x", "mig_strategy": "both", "resources": [{"name": "gpu", "replicas": 2}]}, "mig_strategy must be"),
    ({"name": "x", "strategy": "none", "resources": [{"name": "gpu", "replicas": 2}]}, "strategy none shares nothing"),
    ({"name": "x", "rename_by_default": "yes", "resources": [{"name": "gpu", "replicas": 2}]}, "rename_by_default must be"),
    ({"name": "x", "nodes": "n1", "resources": [{"name": "gpu", "replicas": 2}]}, "nodes must be a list"),
    ({"name": "x", "node_selector": "a!=b", "resources": [{"name": "gpu", "replicas": 2}]}, "must be key=value"),
    ({"name": "x", "node_selector": 5, "resources": [{"name": "gpu", "replicas": 2}]}, "node_selector must be"),
])
def test_config_validation(raw, words):
    problems = problems_of(s.parse_config, raw)
    assert any(words in p for p in problems), problems


def test_nameless_config():
    assert problems_of(s.parse_config, {"resources": []}) == ["a sharing config has no name"]


def test_parse_configs_collects_every_problem_and_checks_default():
    problems = problems_of(s.parse_configs, [
        {"name": "a", "resources": [{"name": "gpu", "replicas": 1}]},
        {"name": "b", "version": "v0", "resources": [{"name": "gpu", "replicas": 2}]},
    ])
    assert len(problems) == 2
    problems = problems_of(s.parse_configs, [{"name": "a", "resources": [{"name": "gpu", "replicas": 2}]},
                                             {"name": "a", "resources": [{"name": "gpu", "replicas": 3}]}])
    assert problems == ["sharing config 'a': defined twice"]
    problems = problems_of(s.parse_configs, [{"name": "a", "resources": [{"name": "gpu", "replicas": 2}]}], "zzz")
    assert "default config 'zzz' is not one of the configs (a)" in problems[0]
    assert set(s.parse_configs([{"name": "a", "resources": [{"name": "gpu", "replicas": 2}]}], "a")) == {"a"}


def test_resource_prefix_is_added():
    config = cfg(resources=[{"name": "mig-1g.10gb", "replicas": 2}])
    assert config.resources[0].name == "nvidia.com/mig-1g.10gb"
    assert s.normalize_resource_name(" gpu ") == "nvidia.com/gpu"


def test_mig_resources_time_sliced_only_with_mixed():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}])
    config = cfg(resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}])
    problems = problems_of(_expected.expected_node, "n", gpus, "single", config)
    assert any("only be time-sliced with the mixed MIG strategy" in p for p in problems)
    assert _expected.expected_node("n", gpus, "mixed", config).resources["nvidia.com/mig-1g.10gb"] == 14


def test_mig_resource_must_exist_for_the_node_models():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "mig": {"1g.10gb": 7}}])
    config = cfg(resources=[{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}])
    problems = problems_of(_expected.expected_node, "n", gpus, "mixed", config)
    assert any("nvidia.com/mig-1g.5gb is not a MIG profile of H100-80GB" in p and "nvidia.com/mig-1g.10gb" in p
               for p in problems), problems


def test_flags_mig_strategy_must_agree_with_cluster_policy():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 1}])
    problems = problems_of(_expected.expected_node, "n", gpus, "none", cfg(mig_strategy="mixed"))
    assert any("takes precedence" in p for p in problems)


def test_unknown_mig_strategy():
    gpus = _node_gpus.node_gpus_from_plan([{"count": 1}])
    assert "MIG strategy must be one of" in problems_of(_expected.expected_node, "n", gpus, "dual", None)[0]


def test_plan_problems_name_the_gpu():
    problems = problems_of(_node_gpus.node_gpus_from_plan, [{"model": "Z9000"}, {"count": 0}, {"mig": {"1g.10gb": 1}}], "node 'x'")
    joined = " | ".join(problems)
    assert "node 'x' gpus[0]: unknown GPU model 'Z9000'" in joined
    assert "node 'x' gpus[1]: count must be" in joined
    assert "node 'x' gpus[2]: a MIG layout needs the GPU model" in joined
    problems = problems_of(_node_gpus.node_gpus_from_plan, [{"model": "H100-80GB", "mig": {"7g.80gb": 2}}])
    assert "MIG layout" in problems[0] and "invalid for H100-80GB" in problems[0]
    problems = problems_of(_node_gpus.node_gpus_from_plan, [{"product": "A"}, {"product": "B"}])
    assert "different products" in problems[0]


# ---------------------------------------------------------------------------------------------
# Rendering and node assignment


def test_render_is_deterministic_and_ordered():
    configs = s.parse_configs([
        {"name": "zeta", "resources": [{"name": "gpu", "replicas": 2}]},
        {"name": "alpha", "strategy": "mps", "resources": [{"name": "gpu", "replicas": 4}], "rename_by_default": True},
    ])
    data = s.render_configmap_data(configs)
    assert list(data) == ["alpha", "zeta"]
    assert data == s.render_configmap_data(configs)
    assert data["alpha"] == ("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
                             "    - name: nvidia.com/gpu\n      replicas: 4\n")


def test_assign_nodes_by_list_and_selector():
    configs = s.parse_configs([
        {"name": "ts", "nodes": ["a", "b"], "resources": [{"name": "gpu", "replicas": 2}]},
        {"name": "mps", "strategy": "mps", "node_selector": "pool=inference", "resources": [{"name": "gpu", "replicas": 4}]},
    ])
    nodes = {"a": {}, "b": {"pool": "train"}, "c": {"pool": "inference"}, "d": {}}
    assert s.assign_nodes(configs, nodes) == {"a": "ts", "b": "ts", "c": "mps"}


def test_assign_nodes_errors():
    configs = s.parse_configs([
        {"name": "ts", "nodes": ["a", "ghost"], "resources": [{"name": "gpu", "replicas": 2}]},
        {"name": "mps", "strategy": "mps", "node_selector": {"pool": "x"}, "resources": [{"name": "gpu", "replicas": 4}]},
    ])
    problems = problems_of(s.assign_nodes, configs, {"a": {"pool": "x"}})
    assert "sharing config 'ts': node 'ghost' does not exist in the cluster" in problems
    assert "node 'a' is selected by two sharing configs: 'mps' and 'ts'" in problems


def test_selector_parsing():
    assert s.parse_selector("a=b, c=d", "x") == (("a", "b"), ("c", "d"))
    assert s.parse_selector({"c": "d", "a": None}, "x") == (("a", ""), ("c", "d"))
    assert s.parse_selector(None, "x") == ()
    assert not s.selector_matches((), {"a": "b"})


def test_effective_config_name():
    assert s.effective_config_name({s.CONFIG_LABEL: "a"}, ["a", "b"], "b") == "a"
    assert s.effective_config_name({}, ["a", "b"], "b") == "b"
    assert s.effective_config_name({s.CONFIG_LABEL: "zzz"}, ["a"], "a") is None
    assert s.effective_config_name({}, ["a"], None) is None


# ---------------------------------------------------------------------------------------------
# NodeGpus from GFD labels (nodes without a plan)


def test_labels_full_gpus():
    gpus = _node_gpus.node_gpus_from_labels({"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "Tesla-T4-SHARED"}, "none")
    assert (gpus.full_gpus, gpus.product, gpus.mig_enabled, gpus.source) == (4, "Tesla-T4", False, "labels")


def test_labels_single_strategy():
    labels = {"nvidia.com/gpu.count": "7", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"}
    gpus = _node_gpus.node_gpus_from_labels(labels, "single")
    assert gpus.mig_dict() == {"nvidia.com/mig-1g.10gb": 7}
    assert gpus.product == "NVIDIA-H100-80GB-HBM3"
    exp = _expected.expected_node("n", gpus, "single", None)
    assert exp.resources == {"nvidia.com/gpu": 7}
    assert exp.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"


def test_labels_mixed_all_mig():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/mig-1g.10gb.count": "2", "nvidia.com/mig-3g.40gb.count": "1"}
    gpus = _node_gpus.node_gpus_from_labels(labels, "mixed")
    assert (gpus.full_gpus, gpus.mig_gpus) == (0, 1)
    assert gpus.mig_dict() == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-3g.40gb": 1}


def test_labels_name_the_model_so_a_mig_resource_it_cannot_have_is_refused():
    """Issue 21 (5): a node known only by its labels (no GPU plan) used to accept any mig-* resource."""
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    gpus = _node_gpus.node_gpus_from_labels(labels, "mixed")
    assert gpus.models == ("H100-80GB",) and "nvidia.com/mig-7g.80gb" in gpus.known_mig_resources
    cfg = s.parse_configs([{"name": "ts", "resources": [{"name": "nvidia.com/mig-7g.141gb", "replicas": 2}]}], None)["ts"]
    problems = problems_of(_expected.expected_node, "gpu-h", gpus, "mixed", cfg)
    assert problems == ["sharing config 'ts' on node 'gpu-h': nvidia.com/mig-7g.141gb is not a MIG profile of "
                        "H100-80GB (valid: %s)" % ", ".join(sorted(gpus.known_mig_resources))]
    unknown = _node_gpus.node_gpus_from_labels({"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "Tesla-T4"}, "none")
    assert (unknown.models, unknown.known_mig_resources) == ((), None)


def test_labels_that_cannot_tell():
    assert "no nvidia.com/gpu.count label" in problems_of(_node_gpus.node_gpus_from_labels, {}, "none")[0]
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1", "nvidia.com/mig-1g.10gb.count": "7"}
    assert "give its GPU plan" in problems_of(_node_gpus.node_gpus_from_labels, labels, "mixed")[0]
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/mig.config": "all-1g.10gb"}
    assert "give its GPU plan" in problems_of(_node_gpus.node_gpus_from_labels, labels, "none")[0]


def test_helpers():
    assert _node_gpus.sanitize_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert _node_gpus.sanitize_product("NVIDIA A100-SXM4-40GB (rev)") == "NVIDIA-A100-SXM4-40GB-rev"
    assert _node_gpus.mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert _node_gpus.profile_of_mig_resource("nvidia.com/mig-3g.40gb") == "3g.40gb"
    config = cfg()
    assert config.as_dict()["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert config.replicas_for("nvidia.com/mig-1g.10gb") == 1
    assert str(s.SharingError(["a", "b"])) == "a; b"


def test_parse_rendered_config_round_trips():
    for raw in (FINE, {"name": "m", "strategy": "mps", "resources": [{"name": "gpu", "replicas": 3}], "rename_by_default": True},
                {"name": "off", "strategy": "none"}):
        config = s.parse_config(raw)
        again = s.parse_rendered_config(config.name, s.render_config(config))
        assert again == config


def test_parse_rendered_config_errors_name_the_key():
    assert "ConfigMap key 'k': not YAML" in problems_of(s.parse_rendered_config, "k", "a: [")[0]
    assert "not a device-plugin config" in problems_of(s.parse_rendered_config, "k", "- 1")[0]
    text = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 1\n"
    assert "ConfigMap key 'k': sharing config 'k'" in problems_of(s.parse_rendered_config, "k", text)[0]
    assert "version must be v1" in problems_of(s.parse_rendered_config, "k", "version: v2\n")[0]


def test_node_gpus_for_plan_or_labels():
    # the host's intent in its other shapes is _fleet_plan.HostPlan's job (test_fleet_plan.py)
    assert _node_gpus.node_gpus_for("n", [{"count": 2}], {}, "none").full_gpus == 2
    assert _node_gpus.node_gpus_for("n", None, {"nvidia.com/gpu.count": "4"}, "none").source == "labels"
    assert "must be a list" in problems_of(_node_gpus.node_gpus_for, "n", "8xH100", {}, "none")[0]
    assert "must be a list" in problems_of(_node_gpus.node_gpus_for, "n", {"gpus": [{"count": 3}]}, {}, "none")[0]


def h100_fact(index, mig=None):
    instances = [{"profile": p, "compute_instances": [{"profile": p}]} for p, n in (mig or {}).items() for _i in range(n)]
    return {"index": index, "name": H100, "pci_device_id": "0x233010DE",
            "mig": {"capable": True, "current": bool(mig), "pending": bool(mig), "instances": instances}}


def test_plan_from_host_applies_the_mig_selection():
    facts = [h100_fact(0), h100_fact(1, {"1g.10gb": 7})]
    # no selection: the current layout is the plan
    assert fp.plan_from_host(facts) == [
        {"count": 1, "product": H100, "model": "H100-80GB"},
        {"count": 1, "product": H100, "model": "H100-80GB", "mig": {"1g.10gb": 7}},
    ]
    planned = fp.plan_from_host(facts, "all-3g.40gb")
    assert [p.get("mig") for p in planned] == [{"3g.40gb": 2}, {"3g.40gb": 2}]
    custom = {"half": [{"devices": [0], "mig-enabled": False}, {"devices": [1], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}
    assert [p.get("mig") for p in fp.plan_from_host(facts, "half", custom)] == [None, {"7g.80gb": 1}]
    gpus = _node_gpus.node_gpus_for("n", fp.plan_from_host(facts, "all-disabled"), {}, "mixed")
    assert (gpus.full_gpus, gpus.mig_gpus, gpus.product) == (2, 0, "NVIDIA-H100-80GB-HBM3")
    assert "selected mig-config not present: nope" in problems_of(fp.plan_from_host, facts, "nope")[0]


def test_plan_from_host_non_catalog_gpu():
    facts = [{"index": 0, "name": "Tesla T4", "pci_device_id": "0x1EB810DE", "mig": {"capable": False}}]
    assert fp.plan_from_host(facts) == [{"count": 1, "product": "Tesla T4"}]


def test_configs_from_nodes_groups_by_name():
    ts = {"name": "ts4", "resources": [{"name": "gpu", "replicas": 4}]}
    merged = s.configs_from_nodes({"b": ts, "a": dict(ts), "c": None, "d": {"name": "off", "strategy": "none"}})
    assert merged == [{"name": "off", "strategy": "none", "nodes": ["d"]}, dict(ts, nodes=["a", "b"])]
    problems = problems_of(s.configs_from_nodes, {"a": ts, "b": dict(ts, resources=[{"name": "gpu", "replicas": 2}])})
    assert problems == ["node 'b': sharing config 'ts4' differs from the one given by node 'a'"]
    problems = problems_of(s.configs_from_nodes, {"a": ts}, [dict(ts, rename_by_default=True, nodes=["x"])])
    assert problems == ["node 'a': sharing config 'ts4' differs from the one given by configs"]
    assert s.configs_from_nodes({"a": ts}, [dict(ts, nodes=["x"])])[0]["nodes"] == ["x", "a"]
    assert "must be a mapping with a name" in problems_of(s.configs_from_nodes, {"a": "ts4"})[0]


# ---------------------------------------------------------------------------------------------
# GFD edge cases read back from the labels (docs/reference/specs.md §8.1, §8.2)


def test_labels_of_an_invalid_single_layout_are_reported_not_read_as_a_profile():
    """§8.1: k8s-device-plugin internal/lm/mig-strategy.go newInvalidMigStrategyLabeler."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID", "nvidia.com/gpu.count": "0",
              "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.memory": "0", "nvidia.com/gpu.sharing-strategy": "",
              "nvidia.com/mig.strategy": "single"}
    problems = problems_of(_node_gpus.node_gpus_from_labels, labels, "single", "node 'n1'")
    assert any("NVIDIA-H100-80GB-HBM3-MIG-INVALID" in p and "single" in p for p in problems)


def test_labels_of_mig_enabled_gpus_under_none_are_mig_gpus():
    """§8.2: under strategy none GFD labels MIG-enabled GPUs without sharing (replicas 0); the
    expectation then says why the plan cannot work instead of expecting replicas that never show."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2",
              "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.sharing-strategy": "none"}
    gpus = _node_gpus.node_gpus_from_labels(labels, "none")
    assert (gpus.full_gpus, gpus.mig_gpus) == (0, 2)
    problems = problems_of(_expected.expected_node, "n1", gpus, "none", cfg())
    assert any("MIG strategy is none" in p for p in problems)


def test_expected_node_carries_a_typed_record_per_resource():
    """Issue 20 item 5: count, replicas, strategy, device kind and MIG profile without parsing labels."""
    gpus = _node_gpus.NodeGpus(mig_devices=(("nvidia.com/mig-1g.5gb", 2), ("nvidia.com/mig-3g.20gb", 1)), mig_gpus=1, product="NVIDIA-A100")
    cfg = s.parse_config({"name": "ts", "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 3}], "rename_by_default": True})
    expected = _expected.expected_node("n", gpus, "mixed", cfg)
    record = expected.record_for("nvidia.com/mig-1g.5gb.shared")
    assert (record.count, record.replicas, record.strategy, record.device_kind, record.mig_profile) == (
        2, 3, "time-slicing", "mig", "1g.5gb")
    assert expected.record_for("nvidia.com/mig-3g.20gb").replicas == 1
    assert expected.record_for("nvidia.com/mig-3g.20gb").strategy == "none"

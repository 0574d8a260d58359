# -*- coding: utf-8 -*-
"""The device-plugin release behind a GPU Operator chart and the sharing rules that depend on it
(docs/reference/specs.md §9.8-§9.11). Each test names the public source of its fact."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils import _component_versions as cv
from ansible_collections.gpufleet.sharing.plugins.module_utils import _sharing as s

OLD = cv.DevicePlugin((0, 19, 3), "test")
NEW = cv.DevicePlugin((0, 20, 0), "test")


def cfg(**raw):
    raw.setdefault("name", "c")
    return s.parse_config(raw)


# ---------------------------------------------------------------------------------------------
# §9.8 chart -> device plugin (GPU Operator release notes: 24.9.0 lists Device Plugin v0.17.0,
# 25.3.0 v0.17.1, 25.3.1 v0.17.2, 25.3.2 v0.17.3, 25.10.1 v0.18.1, 26.3.2 v0.19.2; the operator's
# bundle: 26.3.3 v0.19.3, 26.7.0 v0.20.0, 26.7.1 v0.20.1)


@pytest.mark.parametrize("chart, plugin", [
    ("v24.9.0", "v0.17.0"), ("v25.3.0", "v0.17.1"), ("v25.3.2", "v0.17.3"), ("v25.10.1", "v0.18.1"),
    ("v26.3.2", "v0.19.2"), ("v26.3.3", "v0.19.3"), ("v26.7.0", "v0.20.0"), ("26.7.1", "v0.20.1"),
])
def test_chart_table_from_the_release_notes(chart, plugin):
    version, exact = cv.device_plugin_for_chart(cv.parse_version(chart, "chart"))
    assert (cv.show(version), exact) == (plugin, True)


def test_a_chart_between_rows_takes_the_nearest_older_row():
    assert cv.device_plugin_for_chart((24, 9, 2)) == ((0, 17, 0), False)  # 24.9.1/.2 list no plugin change
    assert cv.device_plugin_for_chart((26, 3, 0)) == ((0, 18, 1), False)
    assert cv.device_plugin_for_chart((27, 1, 0)) == ((0, 20, 1), False)
    assert cv.device_plugin_for_chart((23, 9, 0)) == ((0, 17, 0), False)  # upper bound: older than every rule


def test_the_default_chart_is_the_gpu_operator_role_default():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(repo, "roles", "gpu_operator", "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["gpu_operator_chart_version"] == cv.DEFAULT_CHART_VERSION


@pytest.mark.parametrize("text", ["26.7", "latest", "v0.20", "", None, 26])
def test_a_version_that_does_not_parse_is_named(text):
    with pytest.raises(cv.VersionError) as info:
        cv.resolve_device_plugin(None, None, text) if text else cv.parse_version(text, "GPU Operator chart version")
    assert repr(text) in str(info.value) and "does not parse" in str(info.value)
    with pytest.raises(cv.VersionError, match="option device_plugin_version"):
        cv.resolve_device_plugin("0.20", None, None)


def test_resolution_order():
    policy = {"spec": {"devicePlugin": {"version": "v0.19.3"}}}
    assert cv.resolve_device_plugin("v0.18.1", policy, "v26.7.0").name == "v0.18.1"
    assert cv.resolve_device_plugin(None, policy, "v26.7.0").describe() == \
        "device plugin v0.19.3 (ClusterPolicy spec.devicePlugin.version)"
    digest = {"spec": {"devicePlugin": {"version": "sha256:abc"}}}
    assert cv.resolve_device_plugin(None, digest, "v25.10.1").name == "v0.18.1"
    assert cv.resolve_device_plugin(None, None, None).name == "v0.20.0"


# ---------------------------------------------------------------------------------------------
# §9.9 MPS failRequestsGreaterThanOne: ignored (always enforced) before v0.20.0, honoured from it
# (k8s-device-plugin PR #574 "setting is ignored for MPS sharing"; PR #1762 "honor an explicit
# sharing.mps.failRequestsGreaterThanOne: false", released in v0.20.0)


def test_mps_fail_requests_false_refused_before_v0_20_with_the_reason():
    mps = cfg(strategy="mps", fail_requests_greater_than_one=False, resources=[{"name": "gpu", "replicas": 4}])
    problems = s.release_problems({"c": mps}, OLD)
    assert len(problems) == 1
    assert "the plugin always enforces it" in problems[0] and "v0.19.3" in problems[0] and "v0.20.0" in problems[0]
    assert s.release_problems({"c": mps}, NEW) == []
    assert "    failRequestsGreaterThanOne: false\n" in s.render_config(mps)


def test_mps_default_renders_as_before_and_reads_back():
    mps = cfg(strategy="mps", resources=[{"name": "gpu", "replicas": 4}])
    assert "failRequestsGreaterThanOne" not in s.render_config(mps)  # omitted = enforced (PR #1762)
    allowed = cfg(strategy="mps", fail_requests_greater_than_one=False, resources=[{"name": "gpu", "replicas": 4}])
    assert s.parse_rendered_config("c", s.render_config(allowed)).fail_requests_greater_than_one is False


# ---------------------------------------------------------------------------------------------
# §9.10 suffixed MIG profiles (k8s-device-plugin v0.20.0 changelog, PR #1972: "Fix bug which
# prevented similar MIG profiles with different suffixes (-me, +me.all, +gfx) showing up as separate
# Kubernetes resources (#1807)"; issue #1462: 1g.10gb+me counted under nvidia.com/mig-1g.10gb)


def _a100_me():
    return s.node_gpus_from_plan([{"model": "A100-40GB", "mig": {"1g.5gb": 5, "1g.5gb+me": 1},
                                   "product": "NVIDIA A100-SXM4-40GB"}])


def test_suffixed_profiles_are_their_own_resource_from_v0_20():
    exp = s.expected_node("n", _a100_me(), "mixed", None, plugin=NEW)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 5, "nvidia.com/mig-1g.5gb.me": 1}


def test_before_v0_20_a_suffixed_profile_is_counted_under_its_base_profile():
    exp = s.expected_node("n", _a100_me(), "mixed", None, plugin=OLD)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 6}
    assert exp.labels["nvidia.com/mig-1g.5gb.count"] == "6"
    assert exp.labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert "nvidia.com/mig-1g.5gb.me.count" not in exp.labels
    assert s.advertised_mig_resource("nvidia.com/mig-1g.24gb-me", OLD) == "nvidia.com/mig-1g.24gb"
    assert s.advertised_mig_resource("nvidia.com/mig-1g.24gb.gfx", OLD) == "nvidia.com/mig-1g.24gb"


def test_sharing_a_suffixed_resource_before_v0_20_says_what_to_share_instead():
    shared = cfg(resources=[{"name": "nvidia.com/mig-1g.5gb.me", "replicas": 2}])
    with pytest.raises(s.SharingError) as info:
        s.expected_node("n", _a100_me(), "mixed", shared, plugin=OLD)
    assert any("advertises nvidia.com/mig-1g.5gb.me as nvidia.com/mig-1g.5gb" in p and "v0.20.0" in p
               for p in info.value.problems)
    assert s.expected_node("n", _a100_me(), "mixed", shared, plugin=NEW).resources["nvidia.com/mig-1g.5gb.me"] == 2


# ---------------------------------------------------------------------------------------------
# §9.11 flags.plugin.sharedDevicesAllocationPolicy distributed|packed (k8s-device-plugin PR #1621,
# api/config/v1/flags.go; released in v0.20.0, changelog in PR #1972)


def test_allocation_policy_rendered_read_back_and_validated():
    packed = cfg(resources=[{"name": "gpu", "replicas": 4}], shared_devices_allocation_policy="packed",
                 mig_strategy="none")
    text = s.render_config(packed)
    assert text.startswith("version: v1\nflags:\n  migStrategy: none\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n")
    assert yaml.safe_load(text)["flags"]["plugin"] == {"sharedDevicesAllocationPolicy": "packed"}
    assert s.parse_rendered_config("c", text) == packed
    with pytest.raises(s.SharingError, match="shared_devices_allocation_policy must be one of distributed, packed"):
        cfg(shared_devices_allocation_policy="spread", resources=[{"name": "gpu", "replicas": 2}])


def test_allocation_policy_needs_v0_20():
    packed = cfg(resources=[{"name": "gpu", "replicas": 4}], shared_devices_allocation_policy="packed")
    problems = s.release_problems({"c": packed}, OLD)
    assert len(problems) == 1 and "needs device plugin v0.20.0" in problems[0] and "v0.19.3" in problems[0]
    assert s.release_problems({"c": packed}, NEW) == []

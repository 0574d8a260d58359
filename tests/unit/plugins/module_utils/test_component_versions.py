# -*- coding: utf-8 -*-
"""The device-plugin release behind a GPU Operator chart and the sharing rules that depend on it
(docs/reference/specs.md §9.8-§9.11). Each test names the public source of its fact."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu import _component_versions as cv
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _sharing as s
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _expected
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _node_gpus

OLD = cv.DevicePlugin((0, 19, 3), "test")
NEW = cv.DevicePlugin((0, 20, 0), "test")


def cfg(**raw):
    raw.setdefault("name", "c")
    return s.parse_config(raw)


# ---------------------------------------------------------------------------------------------
# §9.8 chart -> device plugin. Ground truth: every release tag of NVIDIA/gpu-operator (v22.9.0 to
# v26.7.0; there is no v26.7.1 tag, and NVIDIA/k8s-device-plugin has no v0.20.1 tag) and the
# `devicePlugin.version` of deployments/gpu-operator/values.yaml at that tag (a `-ubi8`/`-ubi9` suffix
# is the image flavour, not another release). Written here from those tags, independently of the table.

RELEASED = {
    "v22.9.0": "v0.12.3", "v22.9.1": "v0.13.0", "v22.9.2": "v0.13.0",
    "v23.3.0": "v0.14.0", "v23.3.1": "v0.14.0", "v23.3.2": "v0.14.0",
    "v23.6.0": "v0.14.1", "v23.6.1": "v0.14.1", "v23.6.2": "v0.14.1",
    "v23.9.0": "v0.14.2", "v23.9.1": "v0.14.3", "v23.9.2": "v0.14.5",
    "v24.3.0": "v0.15.0", "v24.6.0": "v0.16.1", "v24.6.1": "v0.16.2", "v24.6.2": "v0.16.2",
    "v24.9.0": "v0.17.0", "v24.9.1": "v0.17.0", "v24.9.2": "v0.17.0",
    "v25.3.0": "v0.17.1", "v25.3.1": "v0.17.2", "v25.3.2": "v0.17.3", "v25.3.3": "v0.17.4", "v25.3.4": "v0.17.4",
    "v25.10.0": "v0.18.0", "v25.10.1": "v0.18.1",
    "v26.3.0": "v0.19.0", "v26.3.1": "v0.19.0", "v26.3.2": "v0.19.2", "v26.3.3": "v0.19.3",
    "v26.7.0": "v0.20.0",
}


@pytest.mark.parametrize("chart, plugin", sorted(RELEASED.items()))
def test_every_released_chart_is_a_row(chart, plugin):
    version, exact = cv.device_plugin_for_chart(cv.parse_version(chart, "chart"))
    assert (cv.show(version), exact) == (plugin, True)


def test_the_table_lists_exactly_the_released_charts():
    assert [cv.show(chart) for chart, _plugin in cv.CHART_DEVICE_PLUGIN] == sorted(
        RELEASED, key=lambda text: cv.parse_version(text, "chart"))
    assert cv.NEWEST.name == "v0.20.0"  # no chart ships v0.20.1 (no such tag)


def test_a_chart_between_rows_takes_the_nearest_older_row():
    assert cv.device_plugin_for_chart((25, 3, 5)) == ((0, 17, 4), False)  # not released: v25.3.4's row
    assert cv.device_plugin_for_chart((27, 1, 0)) == ((0, 20, 0), False)
    assert cv.device_plugin_for_chart((22, 3, 0)) == ((0, 12, 3), False)  # older than every row


@pytest.mark.parametrize("chart, row, plugin", [
    ("v26.7.1", "v26.7.0", "v0.20.0"), ("27.1.0", "v26.7.0", "v0.20.0"), ("v25.3.5", "v25.3.4", "v0.17.4"),
    ("v1.11.0", "v22.9.0", "v0.12.3"),
])
def test_an_unknown_chart_says_what_it_assumes(chart, row, plugin):
    found = cv.resolve_device_plugin(None, None, chart)
    assert found.name == plugin
    assert found.assumed and "is not a released GPU Operator chart" in found.assumed
    assert "assuming device plugin %s, as chart %s deploys" % (plugin, row) in found.assumed
    assert found.as_dict()["assumed"] == found.assumed
    assert cv.resolve_device_plugin(None, None, "v26.3.3").assumed is None
    assert "assumed" not in cv.resolve_device_plugin(None, None, "v26.3.3").as_dict()


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
    return _node_gpus.node_gpus_from_plan([{"model": "A100-40GB", "mig": {"1g.5gb": 5, "1g.5gb+me": 1},
                                            "product": "NVIDIA A100-SXM4-40GB"}])


def test_suffixed_profiles_are_their_own_resource_from_v0_20():
    exp = _expected.expected_node("n", _a100_me(), "mixed", None, plugin=NEW)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 5, "nvidia.com/mig-1g.5gb.me": 1}


def test_before_v0_20_a_suffixed_profile_is_counted_under_its_base_profile():
    exp = _expected.expected_node("n", _a100_me(), "mixed", None, plugin=OLD)
    assert exp.resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 6}
    assert exp.labels["nvidia.com/mig-1g.5gb.count"] == "6"
    assert exp.labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert "nvidia.com/mig-1g.5gb.me.count" not in exp.labels
    assert _node_gpus.advertised_mig_resource("nvidia.com/mig-1g.24gb-me", OLD) == "nvidia.com/mig-1g.24gb"
    assert _node_gpus.advertised_mig_resource("nvidia.com/mig-1g.24gb.gfx", OLD) == "nvidia.com/mig-1g.24gb"


def test_sharing_a_suffixed_resource_before_v0_20_says_what_to_share_instead():
    shared = cfg(resources=[{"name": "nvidia.com/mig-1g.5gb.me", "replicas": 2}])
    with pytest.raises(s.SharingError) as info:
        _expected.expected_node("n", _a100_me(), "mixed", shared, plugin=OLD)
    assert any("advertises nvidia.com/mig-1g.5gb.me as nvidia.com/mig-1g.5gb" in p and "v0.20.0" in p
               for p in info.value.problems)
    assert _expected.expected_node("n", _a100_me(), "mixed", shared, plugin=NEW).resources["nvidia.com/mig-1g.5gb.me"] == 2


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


def test_the_sharing_modules_warn_what_they_assume():
    """gpu_sharing and gpu_verify resolve the release through _fleet_plan.device_plugin_of, which hands
    the assumption to the module's warn (and the result's device_plugin carries it)."""
    from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan as fp
    warned = []
    plugin = fp.device_plugin_of({"operator_version": "v26.7.1"}, None, warned.append)
    assert warned == [plugin.assumed] and plugin.name == "v0.20.0"
    assert plugin.source == "option operator_version: chart v26.7.1, assumed as chart v26.7.0"
    fp.device_plugin_of({"operator_version": "v25.3.3"}, None, warned.append)
    assert len(warned) == 1
    with pytest.raises(s.SharingError, match=r"option operator_version: chart\) 'v26\.7' does not parse"):
        fp.device_plugin_of({"operator_version": "v26.7"}, None, warned.append)


def test_the_release_lines_of_the_upgrade_guard_are_the_tables():
    """_operator_release.RELEASE_LINES (the upgrade-path guard) and this table name the same lines."""
    from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_release import RELEASE_LINES
    assert sorted(set(chart[:2] for chart, _plugin in cv.CHART_DEVICE_PLUGIN)) == list(RELEASE_LINES)


# ---------------------------------------------------------------------------------------------
# Releases reported after the snapshots the table was checked against (issue 42 part 3)


@pytest.mark.parametrize("chart", ["v26.7.1", "v26.7.2"])
def test_a_reported_chart_keeps_the_nearest_row_and_the_warning_names_where_it_was_reported(chart):
    found = cv.resolve_device_plugin(None, None, chart)
    assert found.name == "v0.20.0" and found.source == "option operator_version: chart %s, assumed as chart v26.7.0" % chart
    assert "assuming device plugin v0.20.0, as chart v26.7.0 deploys" in found.assumed
    assert ("GPU Operator %s is reported by third-party advisories only (not a tag of NVIDIA/gpu-operator in the "
            "snapshot read, newest v26.7.0); the device plugin it deploys is not known" % chart) in found.assumed


def test_a_device_plugin_newer_than_every_release_checked_keeps_the_newest_rules_with_a_warning():
    policy = {"spec": {"devicePlugin": {"version": "v0.20.1"}}}
    for found in (cv.resolve_device_plugin(None, policy, "v26.7.0"), cv.resolve_device_plugin("v0.20.1", None, None)):
        assert found.name == "v0.20.1" and found.at_least(cv.MIG_SUFFIX_RESOURCES)
        assert found.assumed == (
            "device plugin v0.20.1 is newer than every release the collection was checked against (newest v0.20.0): "
            "its rules are taken as v0.20.0's. Reported: NVIDIA/k8s-device-plugin PR #2057 (update to 0.20.1, merged "
            "2026-09-22); the tag is not in the snapshot read, so what it changes is not checked")
    unreported = cv.resolve_device_plugin("v0.21.0", None, None)
    assert unreported.assumed.startswith("device plugin v0.21.0 is newer than every release") and "Reported" not in unreported.assumed
    assert cv.resolve_device_plugin("v0.20.0", None, None).assumed is None
    assert cv.resolve_device_plugin("v0.19.1", None, None).assumed is None  # a release older than the newest: its own rules


def test_the_reported_releases_say_what_is_known_and_from_where():
    assert [(c, cv.show(v)) for c, v, _source in cv.REPORTED] == [
        ("device plugin", "v0.20.1"), ("GPU Operator", "v26.7.1"), ("GPU Operator", "v26.7.2"), ("mig-parted", "v0.15.1")]
    assert all(source for _c, _v, source in cv.REPORTED)
    rows = {cv.show(chart) for chart, _plugin in cv.CHART_DEVICE_PLUGIN}
    assert not rows & {"v26.7.1", "v26.7.2"}  # reported, not rows: only tags read are rows

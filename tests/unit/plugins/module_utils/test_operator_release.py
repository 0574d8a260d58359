"""Release rules of gpu_operator (_operator_release): versions, upgrade path, secrets, carried fields."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _operator_release as rel


@pytest.mark.parametrize("text, parsed", [("v26.7.0", (26, 7, 0)), ("25.10.1", (25, 10, 1)), ("0.1.0-rc.1", (0, 1, 0))])
def test_parse_chart_version(text, parsed):
    assert rel.parse_chart_version(text) == parsed


@pytest.mark.parametrize("text", ["v26.x", "26.7", "", "latest", "v26.7.0\n--set x=1", None, 26.7])
def test_parse_chart_version_refuses(text):
    with pytest.raises(ValueError, match="does not parse"):
        rel.parse_chart_version(text)


def test_chart_version_problems_name_the_option():
    assert rel.chart_version_problems(None) == []
    assert rel.chart_version_problems("v26.7.0") == [] and rel.chart_version_problems("26.3.1") == []
    for bad in ("26.7", "latest", "v26.7.0 --devel", ""):
        (problem,) = rel.chart_version_problems(bad)
        assert problem.startswith("invalid chart_version: ") and repr(bad) in problem and "v26.7.0" in problem


def test_upgrade_path():
    assert rel.upgrade_problem("v26.3.3", "v26.7.0") is None  # the next line
    assert rel.upgrade_problem("v26.7.0", "v26.7.1") is None  # within a line
    assert rel.upgrade_problem("0.1.0", "0.2.0") is None  # no published line in between
    assert rel.upgrade_problem("v26.7.0", "v25.10.1") is None  # not an upgrade
    message = rel.upgrade_problem("v25.10.1", "v26.7.0")
    assert "from v25.10.1 to v26.7.0 skips the release line v26.3" in message and "v26.3.x first" in message
    assert "release lines v25.10, v26.3" in rel.upgrade_problem("v25.3.0", "v26.7.0")


def test_downgrade():
    """Issue 21 (4): the upgrade path looked forward only."""
    for older in ("v24.9.0", "v26.3.0", "v26.6.9"):
        message = rel.downgrade_problem("v26.7.0", older)
        assert message.startswith("chart downgrade from v26.7.0 (installed) to %s (asked) is refused" % older), message
        assert "NVIDIA supports upgrades only" in message and "allow_downgrade" in message
    assert rel.downgrade_problem("v26.7.1", "v26.7.0").startswith("chart downgrade from v26.7.1 (installed) to v26.7.0")
    assert rel.downgrade_problem("v26.7.0", "v26.7.0") is None
    assert rel.downgrade_problem("v26.3.3", "v26.7.0") is None


def test_secrets_redacted_and_listed():
    values = {"driver": {"licensingConfig": {"token": "tok-123", "nlsEnabled": True}},
              "tolerations": [{"key": "nvidia.com/gpu"}], "x": {"Mine": ["a1b2c3"]}, "repo": {"password": ""}}
    assert rel.redact(values, ["mine"]) == {
        "driver": {"licensingConfig": {"token": "<redacted>", "nlsEnabled": "<redacted>"}},
        "tolerations": [{"key": "nvidia.com/gpu"}], "x": {"Mine": ["<redacted>"]}, "repo": {"password": ""}}
    assert rel.secret_strings(values, ["mine"]) == {"tok-123", "a1b2c3"}


def test_carry_forward_only_what_the_user_did_not_set():
    policy = {"spec": {"devicePlugin": {"config": {"name": "cm", "default": "ts"}},
                       "migManager": {"config": {"name": ""}}}}
    values, carried = rel.carry_forward({"devicePlugin": {"config": {"default": "mine"}}}, policy)
    assert values == {"devicePlugin": {"config": {"default": "mine", "name": "cm"}}}
    assert carried == ["devicePlugin.config.name"]
    assert rel.carry_forward({"a": 1}, None) == ({"a": 1}, [])


def test_placeholder_configmap_and_pending_recovery():
    configmap = rel.placeholder_configmap({"devicePlugin": {"config": {"name": "cm"}}}, "ns")
    assert configmap["metadata"]["name"] == "cm" and configmap["data"] == {"default": "version: v1\n"}
    assert rel.placeholder_configmap({}, "ns") is None
    assert rel.pending_recovery("pending-upgrade") == "rollback"
    assert rel.pending_recovery("pending-install") is None and rel.pending_recovery("deployed") is None

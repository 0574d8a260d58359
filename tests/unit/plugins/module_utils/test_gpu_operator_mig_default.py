"""migManager.config.default in the Helm values (issue 10 #6, docs/reference/specs.md §7.8)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils import _gpu_operator as gop


def test_empty_default_is_written_not_dropped():
    values = gop.build_values(mig_manager_enabled=True, mig_manager_config="cm", mig_manager_default_config="")
    assert values == {"migManager": {"enabled": True, "config": {"name": "cm", "default": ""}}}


def test_unset_default_keeps_the_chart_or_values():
    assert gop.build_values({"migManager": {"config": {"default": "all-disabled"}}}, mig_manager_enabled=True) == {
        "migManager": {"enabled": True, "config": {"default": "all-disabled"}}}


def test_explicit_override_must_agree():
    assert gop.build_values({"migManager": {"config": {"default": "all-disabled"}}},
                            mig_manager_default_config="all-disabled")["migManager"]["config"]["default"] == "all-disabled"
    with pytest.raises(gop.ValuesError) as caught:
        gop.build_values({"migManager": {"config": {"default": "all-disabled"}}}, mig_manager_default_config="")
    assert caught.value.problems == ["mig_manager_default_config='' contradicts values.migManager.config.default='all-disabled'"]


def test_only_the_crd_enum():
    with pytest.raises(gop.ValuesError) as caught:
        gop.build_values(mig_manager_default_config="all-balanced")
    assert "mig_manager_default_config must be 'all-disabled' or ''" in str(caught.value)

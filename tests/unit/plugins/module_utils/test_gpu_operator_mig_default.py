"""Operator-managed MIG never changes an undrained node (issue 10 #6, docs/reference/specs.md §7.8):
migManager.config.default in the Helm values, and no new items under a config name a node uses."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _gpu_operator as gop
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_operator as mop
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import render_yaml as _render


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


def _doc(**configs):
    return _render({"version": "v1", "mig-configs": configs})


def _node(name, config):
    return {"metadata": {"name": name, "labels": {"nvidia.com/mig.config": config} if config else {}}}


def test_changed_items_of_a_config_in_use_are_refused():
    halves = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
    thirds = [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 3}}]
    before, after = _doc(mine=halves, other=halves), _doc(mine=thirds, other=thirds)
    nodes = [_node("b", "mine"), _node("a", "mine"), _node("c", None), _node("d", "all-disabled")]
    problems = mop.changed_in_use(before, after, nodes, "gpu-operator/cm")
    assert len(problems) == 1 and problems[0].startswith(
        "MIG config 'mine' in ConfigMap gpu-operator/cm would get other items while node(s) a, b use it")
    assert mop.changed_in_use(before, _doc(mine=halves, other=thirds), nodes, "x") == []  # 'other' unused
    assert mop.changed_in_use(before, _doc(other=halves), nodes, "x") == []  # removed: the MIG manager refuses it
    assert mop.changed_in_use(None, after, nodes, "x") == [] and mop.changed_in_use("{", after, nodes, "x") == []

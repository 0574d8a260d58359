"""Pure helpers of operator-managed MIG (_mig_operator): ConfigMap and option checks."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_operator


def test_config_map_problem_names_what_is_wrong():
    where = "gpu-operator/custom"
    assert "does not exist" in _mig_operator.config_map_problem(None, "a", where)
    bad_yaml = {"data": {_mig_operator.CONFIG_KEY: "version: [v1"}}
    assert "is not valid YAML" in _mig_operator.config_map_problem(bad_yaml, "a", where)
    good = {"data": {_mig_operator.CONFIG_KEY: "version: v1\nmig-configs:\n  a: []\n"}}
    assert _mig_operator.config_map_problem(good, "a", where) is None
    assert "it defines: a" in _mig_operator.config_map_problem(good, "b", where)


def test_option_problems():
    assert _mig_operator.option_problems("x", 0, 0, 1) == []
    assert _mig_operator.option_problems(" ", 1, 1, 1) == ["config must not be empty"]
    assert len(_mig_operator.option_problems("x", -1, 0, 0)) == 1

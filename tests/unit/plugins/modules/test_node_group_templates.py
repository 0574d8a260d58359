"""node_group_templates (issue 39 part 1): writes the two files, changes nothing in check mode, reports changed=0
when their content is the same, shows a diff, refuses bad groups before writing anything."""

from __future__ import annotations

import json
import os

from module_runner import run_module

GPUS = {"a-0": [{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 7}}],
        "a-1": [{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 7}}],
        "h-0": [{"model": "H100-80GB", "count": 2}]}
GROUPS = [{"name": "small", "nodes": ["a-0", "a-1"]}, {"name": "train", "nodes": ["h-0"]}]
FILES = ["node-group-templates.json", "node-group-templates.yaml"]


def args(dest, **extra):
    return dict({"dest": str(dest), "node_gpus": GPUS, "groups": GROUPS, "mig_strategy": "mixed"}, **extra)


def test_check_mode_writes_nothing_then_a_run_writes_and_a_second_is_unchanged(tmp_path) -> None:
    dest = tmp_path / "reports"
    checked = run_module("node_group_templates", args(dest), tmp_path, check_mode=True, diff=True)
    assert checked["changed"] is True and not dest.exists(), checked
    assert [d["after_header"] for d in checked["diff"]] == [str(dest / f) for f in FILES]
    first = run_module("node_group_templates", args(dest), tmp_path)
    assert first["changed"] is True and sorted(os.listdir(dest)) == FILES
    with open(dest / FILES[0], encoding="utf-8") as handle:
        assert json.load(handle) == first["templates"]
    assert sorted(first["templates"]["groups"]) == ["small", "train"]
    second = run_module("node_group_templates", args(dest), tmp_path, diff=True)
    assert second["changed"] is False and "diff" not in second or not second["diff"], second


def test_hosts_that_differ_fail_naming_them_and_write_nothing(tmp_path) -> None:
    dest = tmp_path / "reports"
    result = run_module("node_group_templates", args(dest, groups=[{"name": "mixed", "nodes": ["a-0", "h-0"]}]), tmp_path)
    assert result.get("failed") and "node group 'mixed': its hosts differ" in result["msg"], result
    assert "a-0: 1 x A100-40GB, MIG 1g.5gb x7" in result["msg"] and "h-0: 2 x H100-80GB, MIG off" in result["msg"], result["msg"]
    assert not dest.exists()

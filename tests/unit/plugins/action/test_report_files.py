"""The report_files action plugin, on a temporary directory (the controller side is this process)."""

from __future__ import annotations

import os
from unittest.mock import MagicMock

from ansible_collections.gpufleet.sharing.plugins.action.report_files import ActionModule


def run(args, check=False, diff=False):
    task = MagicMock(args=args, check_mode=check, diff=diff, async_val=0)
    action = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    return action.run(task_vars={})


def test_creates_the_directory_writes_then_is_idempotent(tmp_path):
    reports = tmp_path / "a" / "reports"
    result = run({"path": str(reports), "files": {"x.json": "{}\n", "x.txt": "ok\n"}})
    assert result["changed"] and result["written"] == ["x.json", "x.txt"] and not result.get("failed")
    assert (reports / "x.json").read_text() == "{}\n" and oct(os.stat(reports / "x.txt").st_mode & 0o777) == "0o644"
    assert oct(os.stat(reports).st_mode & 0o777) == "0o755"
    again = run({"path": str(reports), "files": {"x.json": "{}\n", "x.txt": "ok\n"}})
    assert not again["changed"] and again["written"] == []
    assert [name for name in os.listdir(reports) if name.startswith(".")] == []  # no temporary file left


def test_rewrites_only_what_differs_and_removes(tmp_path):
    (tmp_path / "a.txt").write_text("old\n")
    (tmp_path / "b.txt").write_text("same\n")
    os.chmod(tmp_path / "b.txt", 0o644)
    (tmp_path / "gone.json").write_text("{}")
    result = run({"path": str(tmp_path), "files": {"a.txt": "new\n", "b.txt": "same\n"},
                  "remove": ["gone.json", "never.json"]}, diff=True)
    assert result["written"] == ["a.txt"] and result["removed"] == ["gone.json"]
    assert (tmp_path / "a.txt").read_text() == "new\n" and not (tmp_path / "gone.json").exists()
    assert result["diff"][0] == {"before_header": "a.txt", "after_header": "a.txt", "before": "old\n", "after": "new\n"}


def test_check_mode_writes_nothing(tmp_path):
    reports = tmp_path / "r"
    result = run({"path": str(reports), "files": {"x.txt": "ok\n"}}, check=True, diff=True)
    assert result["changed"] and result["written"] == ["x.txt"] and not reports.exists()
    assert result["diff"][0]["after"] == "ok\n"
    (tmp_path / "old.json").write_text("{}")
    result = run({"path": str(tmp_path), "remove": ["old.json"]}, check=True)
    assert result["removed"] == ["old.json"] and (tmp_path / "old.json").exists()


def test_contents_are_not_in_the_result_without_diff(tmp_path):
    result = run({"path": str(tmp_path), "files": {"x.txt": "s3cr3t-token\n"}})
    assert "s3cr3t-token" not in repr(result)


def test_bad_input_is_refused_naming_it_and_nothing_is_written(tmp_path):
    for args, fragment in [({"path": "", "files": {"x": ""}}, "path"),
                           ({"path": str(tmp_path), "files": {"../x": ""}}, "'../x'"),
                           ({"path": str(tmp_path), "files": {"x": 3}}, "files['x']"),
                           ({"path": str(tmp_path), "files": ["x"]}, "files"),
                           ({"path": str(tmp_path), "files": {"x": ""}, "remove": ["x"]}, "both")]:
        result = run(args)
        assert result["failed"] and fragment in result["msg"], (args, result)
    assert os.listdir(tmp_path) == []

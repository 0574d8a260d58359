"""A missing prerequisite skips a test where a developer runs it, and fails it under ``make test`` (issue 40)."""

from __future__ import annotations

import os

import pytest
from prerequisites import REQUIRED, missing_prerequisite


def test_skipped_where_not_required(monkeypatch):
    monkeypatch.delenv(REQUIRED, raising=False)
    with pytest.raises(pytest.skip.Exception, match="sshd is missing"):
        missing_prerequisite("sshd is missing")


@pytest.mark.parametrize("value", ["1", "yes"])
def test_fails_where_required(monkeypatch, value):
    monkeypatch.setenv(REQUIRED, value)
    with pytest.raises(pytest.fail.Exception, match="helm is missing .*GPUFLEET_REQUIRE_PREREQUISITES=1.*make system-deps"):
        missing_prerequisite("helm is missing")


def test_zero_is_not_required(monkeypatch):
    monkeypatch.setenv(REQUIRED, "0")
    with pytest.raises(pytest.skip.Exception):
        missing_prerequisite("chromium is missing")


def test_make_test_requires_them():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(repo, "Makefile"), encoding="utf-8") as handle:
        assert "%s=1 $(BIN)/python -m pytest" % REQUIRED in handle.read()

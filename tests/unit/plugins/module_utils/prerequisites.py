"""One rule for a test whose prerequisite is missing here (issue 40): skipped, with the reason, where a
developer runs a few tests on a machine without it; a failure under ``make test``
(``GPUFLEET_REQUIRE_PREREQUISITES=1``), so that a green CI never hides a lab that did not start, a helm
that could not be fetched or a browser that is not installed."""

from __future__ import annotations

import os

import pytest

REQUIRED = "GPUFLEET_REQUIRE_PREREQUISITES"


def required() -> bool:
    """Whether this run must have every prerequisite (``make test`` sets it)."""
    return os.environ.get(REQUIRED, "") not in ("", "0")


def missing_prerequisite(reason: str, remedy: str = "run `make system-deps`") -> None:
    """Skip the current test for ``reason``, or fail it where this run must have every prerequisite."""
    if required():
        pytest.fail("%s (%s=1: a missing prerequisite fails the run; %s)" % (reason, REQUIRED, remedy), pytrace=False)
    pytest.skip(reason)

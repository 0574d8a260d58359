# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA driver's releases as upstream orders them, and what depends on the release (pure).

Sources (kubernetes-sigs/dra-driver-nvidia-gpu, read, not copied):
- ``docs/upgrade.md`` at v0.4.1: the chart is ``dra-driver-nvidia-gpu`` from 0.4.0 (``nvidia-dra-driver-gpu``
  before); the first upgrade from v25.12.0 needs ``nameOverride=nvidia-dra-driver-gpu`` so that the objects keep
  their names; there is no downgrade back to v25.12.0; the chart follows SemVer from 0.4.0.
- ``pkg/featuregates/featuregates.go`` (main at 9593204, chart 0.5.0-dev; the snapshot has no v0.5.0 tag): the
  calendar lines map to SemVer minors, ~25.3 -> 0.1, ~25.8 -> 0.2, ~25.12 -> 0.3, ~26.4 -> 0.4. So 25.12.0 is
  older than 0.4.0.
- ``templates/_helpers.tpl`` (v25.12.0 and v0.4.1): the pods' selector label is ``<name>-component`` with
  ``<name>`` = ``nameOverride`` or the chart's name.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

OLD_CHART = "nvidia-dra-driver-gpu"
NEW_CHART = "dra-driver-nvidia-gpu"
RENAMED_IN = (0, 4, 0)
# Calendar line (year, month) -> SemVer minor, pkg/featuregates/featuregates.go (main 9593204). Its comment maps
# ~26.4 to 0.4 too, but that line was released as 0.4.0 (tags v25.3.x, v25.8.x, v25.12.0, then v0.4.0): 26.4.x is
# no release.
CALENDAR_MINOR: Dict[Tuple[int, int], int] = {(25, 3): 1, (25, 8): 2, (25, 12): 3}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")

Key = Tuple[int, int, int, int, str]


def version_key(text: str) -> Key:
    """An order key: calendar releases as the SemVer minor upstream maps them to, a pre-release (``-rc.1``,
    ``-dev``) before its release. ValueError for a version that is neither."""
    found = _VERSION.match(str(text).strip())
    if not found:
        raise ValueError("%r is not a DRA driver version (X.Y.Z, e.g. 0.5.0 or 25.12.0)" % (text,))
    major, minor, patch = int(found.group(1)), int(found.group(2)), int(found.group(3))
    if major >= 20:  # a calendar release (year.month.patch); SemVer majors are 0 so far
        if (major, minor) not in CALENDAR_MINOR:
            raise ValueError("%r is not a release line of the DRA driver (calendar lines: %s)"
                             % (text, ", ".join("%d.%d" % line for line in sorted(CALENDAR_MINOR))))
        major, minor = 0, CALENDAR_MINOR[(major, minor)]
    pre = found.group(4) or ""
    return (major, minor, patch, 0 if pre else 1, pre)


def chart_version_problems(text: Any) -> List[str]:
    """The module's ``chart_version``: [] when unset or a release of the driver, else one problem (the same check
    as the preflight's on ``dra_driver_chart_version``). A partial "0.5" would be a semver range to helm."""
    if text is None:
        return []
    try:
        version_key(text)
    except ValueError as exc:
        return ["invalid chart_version: %s" % exc]
    return []


def semver(text: str) -> Tuple[int, int, int]:
    """The release's SemVer (major, minor, patch), calendar releases mapped."""
    key = version_key(text)
    return key[0], key[1], key[2]


def release_text(release: Tuple[int, int, int]) -> str:
    """A SemVer release as upstream names it: a calendar line's first release (0.3.0 -> 25.12.0), else X.Y.Z."""
    for (year, month), minor in CALENDAR_MINOR.items():
        if release[0] == 0 and minor == release[1] and minor < RENAMED_IN[1]:
            return "%d.%d.%d" % (year, month, release[2])
    return "%d.%d.%d" % release


def chart_name(version: str) -> str:
    """The chart's name at ``version``: renamed in 0.4.0."""
    return NEW_CHART if semver(version) >= RENAMED_IN else OLD_CHART


def selector(name: str) -> str:
    """The kubelet plugin pods' label selector for a release whose name (nameOverride or chart) is ``name``."""
    return "%s-component=kubelet-plugin" % name


def upgrade_name_override(installed_chart: str, installed_values: Dict[str, object], wanted_chart: str) -> str:
    """The ``nameOverride`` an upgrade must keep: the installed release's own, or the old chart's name when the
    release was installed from the old chart and the new one replaces it (docs/upgrade.md); "" otherwise."""
    kept = installed_values.get("nameOverride") if isinstance(installed_values, dict) else None
    if isinstance(kept, str) and kept:
        return kept
    if installed_chart == OLD_CHART and wanted_chart == NEW_CHART:
        return OLD_CHART
    return ""

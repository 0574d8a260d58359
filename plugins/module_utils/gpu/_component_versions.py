# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which NVIDIA device plugin a GPU Operator chart runs, and what that release can do.

Pure data and logic, no I/O. The one table from chart version to device-plugin version lives here
(docs/reference/specs.md §9.8); the rules that depend on the device-plugin release are the
``supports_*`` predicates below (§9.9-§9.11). ``gpu_sharing`` and ``gpu_verify`` resolve the release
once (:func:`resolve_device_plugin`) and hand it to the sharing code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

Version = Tuple[int, int, int]

# The role default of gpufleet.sharing.gpu_operator (gpu_operator_chart_version), assumed when nothing
# else says which chart runs (docs/reference/specs.md §7.5, §9.8).
DEFAULT_CHART_VERSION = "v26.7.0"

# Every released GPU Operator chart -> the device plugin (and GPU Feature Discovery, same image) it
# deploys: the release tags of NVIDIA/gpu-operator and deployments/gpu-operator/values.yaml
# `devicePlugin.version` at each tag (docs/reference/specs.md §9.8, which also names the release notes
# that agree). Only tags read are rows; releases reported after the snapshots read are in REPORTED.
CHART_DEVICE_PLUGIN: Tuple[Tuple[Version, Version], ...] = (
    ((22, 9, 0), (0, 12, 3)), ((22, 9, 1), (0, 13, 0)), ((22, 9, 2), (0, 13, 0)),
    ((23, 3, 0), (0, 14, 0)), ((23, 3, 1), (0, 14, 0)), ((23, 3, 2), (0, 14, 0)),
    ((23, 6, 0), (0, 14, 1)), ((23, 6, 1), (0, 14, 1)), ((23, 6, 2), (0, 14, 1)),
    ((23, 9, 0), (0, 14, 2)), ((23, 9, 1), (0, 14, 3)), ((23, 9, 2), (0, 14, 5)),
    ((24, 3, 0), (0, 15, 0)), ((24, 6, 0), (0, 16, 1)), ((24, 6, 1), (0, 16, 2)), ((24, 6, 2), (0, 16, 2)),
    ((24, 9, 0), (0, 17, 0)), ((24, 9, 1), (0, 17, 0)), ((24, 9, 2), (0, 17, 0)),
    ((25, 3, 0), (0, 17, 1)), ((25, 3, 1), (0, 17, 2)), ((25, 3, 2), (0, 17, 3)),
    ((25, 3, 3), (0, 17, 4)), ((25, 3, 4), (0, 17, 4)),
    ((25, 10, 0), (0, 18, 0)), ((25, 10, 1), (0, 18, 1)),
    ((26, 3, 0), (0, 19, 0)), ((26, 3, 1), (0, 19, 0)), ((26, 3, 2), (0, 19, 2)), ((26, 3, 3), (0, 19, 3)),
    ((26, 7, 0), (0, 20, 0)),
)
# Releases reported after the repository snapshots the table was checked against (docs/reference/specs.md
# §9.8, "Reported, not read"): (component, version, what is known and from where). They are not rows: a chart
# or plugin named here keeps the nearest row's behaviour, and the warning says where it was reported.
_NOT_READ = "the tag is not in the snapshot read, so what it changes is not checked"
REPORTED: Tuple[Tuple[str, Version, str], ...] = (
    ("device plugin", (0, 20, 1), "NVIDIA/k8s-device-plugin PR #2057 (update to 0.20.1, merged 2026-09-22); " + _NOT_READ),
    ("GPU Operator", (26, 7, 1), "third-party advisories only (not a tag of NVIDIA/gpu-operator in the snapshot read, "
                                 "newest v26.7.0); the device plugin it deploys is not known"),
    ("GPU Operator", (26, 7, 2), "third-party advisories only (not a tag of NVIDIA/gpu-operator in the snapshot read, "
                                 "newest v26.7.0); the device plugin it deploys is not known"),
    ("mig-parted", (0, 15, 1), "third-party advisories only (not a tag of NVIDIA/mig-parted in the snapshot read, "
                               "newest v0.15.0); the collection follows v0.15.0"),
)
# The newest device-plugin release the table and the rules were checked against.
NEWEST_PLUGIN: Version = max(plugin for _chart, plugin in CHART_DEVICE_PLUGIN)

# The first device-plugin release of each behaviour (docs/reference/specs.md §9.9-§9.11).
MPS_FAIL_REQUESTS_CONFIGURABLE: Version = (0, 20, 0)
MIG_SUFFIX_RESOURCES: Version = (0, 20, 0)
SHARED_DEVICES_ALLOCATION_POLICY: Version = (0, 20, 0)

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


class VersionError(ValueError):
    """A version that does not parse; the message names it and where it came from."""


def parse_version(text: Any, what: str) -> Version:
    """``"v0.20.0"`` / ``"26.7.0"`` / ``"v0.20.0-ubi9"`` -> a tuple; VersionError naming ``what`` otherwise."""
    match = _VERSION.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise VersionError("%s %r does not parse: expected vMAJOR.MINOR.PATCH such as %s"
                           % (what, text, "v0.20.0" if "device plugin" in what else DEFAULT_CHART_VERSION))
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def show(version: Version) -> str:
    return "v%d.%d.%d" % version


def nearest_row(chart: Version) -> Tuple[Version, Version]:
    """(row chart, device plugin) of the table for ``chart``: its own row, else the nearest older row
    (a later chart never ships an older plugin), else the first row for a chart older than the table
    (an upper bound -- every rule here starts later)."""
    older = [row for row in CHART_DEVICE_PLUGIN if row[0] <= chart]
    return older[-1] if older else CHART_DEVICE_PLUGIN[0]


def device_plugin_for_chart(chart: Version) -> Tuple[Version, bool]:
    """(device-plugin version, exact) the chart deploys; exact when the chart is a row of the table."""
    row_chart, plugin = nearest_row(chart)
    return plugin, row_chart == chart


@dataclass(frozen=True)
class DevicePlugin:
    """The device-plugin release the sharing rules apply to, and how it was found."""

    version: Version
    source: str
    # What was assumed when the version is not known for sure (a chart that is not a released one).
    assumed: Optional[str] = None

    @property
    def name(self) -> str:
        return show(self.version)

    def describe(self) -> str:
        return "device plugin %s (%s)" % (self.name, self.source)

    def at_least(self, first: Version) -> bool:
        return self.version >= first

    def as_dict(self) -> dict:
        found = {"version": self.name, "source": self.source}
        if self.assumed:
            found["assumed"] = self.assumed
        return found


def reported(component: str, version: Version) -> Optional[str]:
    """Where a release the table does not read was reported, or None."""
    return next((source for name, found, source in REPORTED if name == component and found == version), None)


def _newer_plugin(plugin: DevicePlugin) -> DevicePlugin:
    """A plugin newer than every release checked keeps the newest one's rules (its version is compared as is),
    with a note that names it and, when it was reported, where."""
    if plugin.version <= NEWEST_PLUGIN:
        return plugin
    note = ("device plugin %s is newer than every release the collection was checked against (newest %s): its rules "
            "are taken as %s's" % (plugin.name, show(NEWEST_PLUGIN), show(NEWEST_PLUGIN)))
    source = reported("device plugin", plugin.version)
    return DevicePlugin(plugin.version, plugin.source, note + (". Reported: %s" % source if source else ""))


def from_chart(chart_text: str, source: str) -> DevicePlugin:
    chart = parse_version(chart_text, "GPU Operator chart version (%s)" % source)
    row_chart, plugin = nearest_row(chart)
    if row_chart == chart:
        return DevicePlugin(plugin, "%s %s deploys it" % (source, show(chart)))
    assumed = ("%s %s is not a released GPU Operator chart the collection knows (%s to %s, docs/reference/specs.md "
               "§9.8): assuming device plugin %s, as chart %s deploys; set device_plugin_version to the plugin "
               "it runs if that is wrong" % (source, show(chart), show(CHART_DEVICE_PLUGIN[0][0]),
                                             show(CHART_DEVICE_PLUGIN[-1][0]), show(plugin), show(row_chart)))
    where = reported("GPU Operator", chart)
    if where:
        assumed += ". GPU Operator %s is reported by %s" % (show(chart), where)
    return DevicePlugin(plugin, "%s %s, assumed as chart %s" % (source, show(chart), show(row_chart)), assumed)


def resolve_device_plugin(device_plugin_version: Optional[str], policy: Optional[dict],
                          operator_version: Optional[str]) -> DevicePlugin:
    """The release the rules apply to: the ``device_plugin_version`` option, else the ClusterPolicy's
    ``spec.devicePlugin.version`` (the image tag the operator runs), else the ``operator_version``
    option through the table, else the default chart. Raises VersionError for an option that does not
    parse; a ClusterPolicy tag that is not a version (a digest, a custom tag) is passed over."""
    if device_plugin_version:
        return _newer_plugin(DevicePlugin(parse_version(device_plugin_version, "device plugin version (option device_plugin_version)"),
                                          "option device_plugin_version"))
    tag = (((policy or {}).get("spec") or {}).get("devicePlugin") or {}).get("version")
    if isinstance(tag, str) and _VERSION.match(tag.strip()):
        return _newer_plugin(DevicePlugin(parse_version(tag, "device plugin version"), "ClusterPolicy spec.devicePlugin.version"))
    if operator_version:
        return from_chart(operator_version, "option operator_version: chart")
    return from_chart(DEFAULT_CHART_VERSION, "default chart")


NEWEST = DevicePlugin(CHART_DEVICE_PLUGIN[-1][1], "newest known")


__all__ = ["CHART_DEVICE_PLUGIN", "DEFAULT_CHART_VERSION", "DevicePlugin", "MIG_SUFFIX_RESOURCES",
           "MPS_FAIL_REQUESTS_CONFIGURABLE", "NEWEST", "NEWEST_PLUGIN", "REPORTED", "reported", "SHARED_DEVICES_ALLOCATION_POLICY", "VersionError",
           "device_plugin_for_chart", "from_chart", "nearest_row", "parse_version", "resolve_device_plugin", "show"]

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GPU Operator itself pulls for given chart values: which ClusterPolicy components it
deploys, and the ``-<os>`` tag suffix of the driver-type images (pure, no I/O;
docs/reference/specs.md §17.7). Written from NVIDIA/gpu-operator v26.7.0:

- controllers/state_manager.go ``isStateEnabled``: the sandbox components (kubevirt and kata device
  plugins, VFIO manager, vGPU device manager, vGPU manager, CC manager) run only with
  ``sandboxWorkloads.enabled``, the two device plugins and the CC manager only in their
  ``sandboxWorkloads.mode``; the kata manager never; the others follow their ``enabled``.
  The DRA driver belongs to the GPUCluster CR (``gpuCluster.deployCR``), every ClusterPolicy component
  to the ClusterPolicy (``clusterPolicy.deployCR``).
- controllers/object_controls.go ``resolveDriverTag``: the driver, nvidia-fs (GDS), gdrdrv (GDRCopy)
  and vGPU manager images get ``-<os>`` appended to their tag, unless given by digest;
  controllers/state_manager.go ``getGPUNodeOSInfo``: ``<os>`` is the node's os-release ``ID`` and
  ``VERSION_ID`` (NFD's labels), with the major version only for rhel, rocky and ol. The operators'
  OS tables (``RepoConfigPathMap``) name the distributions it knows.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Mapping, Sequence, Tuple

# Distributions the operator v26.7.0 knows (controllers/object_controls.go RepoConfigPathMap).
KNOWN_OS = ("centos", "debian", "ubuntu", "rhcos", "rhel", "rocky", "ol", "sles", "sl-micro")
MAJOR_ONLY = ("ol", "rocky", "rhel")
# Distributions whose os-release VERSION_ID (what NFD labels) is the major version only, while Ansible's
# ansible_distribution_version has more (Debian "12.7" from /etc/debian_version, CentOS "7.9.2009").
VERSION_ID_MAJOR = ("debian", "centos")
# ansible_distribution -> os-release ID, where they differ (an ID itself is accepted too).
ANSIBLE_DISTRIBUTIONS = {"redhat": "rhel", "oraclelinux": "ol", "sles_sap": "sles", "sle_micro": "sl-micro",
                         "sl-micro": "sl-micro", "red hat enterprise linux coreos": "rhcos"}
_TAG = re.compile(r"^(sl-micro|[a-z]+)([0-9]+(?:\.[0-9]+)*)$")
_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*$")

# Top-level sections whose image the operator tags with the node OS.
OS_TAGGED = ("driver", "gds", "gdrcopy", "vgpuManager")
# Sandbox components: (section, the sandboxWorkloads.mode it needs or "" for any).
SANDBOX = (("sandboxDevicePlugin", "kubevirt"), ("kataSandboxDevicePlugin", "kata"), ("vfioManager", ""),
           ("vgpuDeviceManager", ""), ("vgpuManager", ""), ("ccManager", "kata"))
# Sections that are not ClusterPolicy components.
NOT_IN_POLICY = ("operator", "draDriver", "node-feature-discovery")


class OsError(ValueError):
    """OS names the operator does not know; ``problems`` lists every one."""

    def __init__(self, problems: List[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _on(value: Any, default: bool = True) -> bool:
    if value is None:
        return default
    return value is not False and str(value).lower() != "false"


def _get(values: Mapping[str, Any], *path: str) -> Any:
    node: Any = values
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def os_tag(os_id: str, version: str, where: str = "") -> str:
    """``("ubuntu", "22.04")`` -> ``ubuntu22.04``; ``("RedHat", "9.4")`` -> ``rhel9``; OsError otherwise."""
    name = str(os_id or "").strip().lower()
    name = ANSIBLE_DISTRIBUTIONS.get(name, name)
    version = str(version or "").strip()
    prefix = "%s: " % where if where else ""
    if name not in KNOWN_OS:
        raise OsError(["%sOS %r is not one the GPU Operator knows (%s): it has no driver images for it"
                       % (prefix, os_id, ", ".join(KNOWN_OS))])
    if not _VERSION.match(version):
        raise OsError(["%sOS %s has no usable version %r (expected digits such as 22.04)" % (prefix, name, version)])
    return name + (version.split(".", maxsplit=1)[0] if name in MAJOR_ONLY + VERSION_ID_MAJOR else version)


def parse_os_tag(tag: str, where: str = "node_os") -> str:
    """A declared suffix such as ``ubuntu22.04``/``rhel9``/``rhcos4.16``, checked; OsError naming it otherwise."""
    match = _TAG.match(str(tag or "").strip())
    if not match:
        raise OsError(["%s: %r is not an OS tag <ID><VERSION_ID> such as ubuntu22.04, rhel9, rhcos4.16" % (where, tag)])
    made = os_tag(match.group(1), match.group(2), "%s %r" % (where, tag))
    if made != tag:
        raise OsError(["%s: %r is not a tag the GPU Operator makes: for %s it uses the major version only (%s)"
                       % (where, tag, match.group(1), made)])  # rhel/rocky/ol by rule, debian/centos by VERSION_ID
    return made


def fleet_os_tags(declared: Iterable[str], facts: Iterable[Mapping[str, Any]]) -> List[str]:
    """The sorted OS tags of the fleet: ``declared`` ones, or else from the hosts' ``facts``
    (``{host, distribution, version}``); OsError listing every entry that names no known OS."""
    tags, problems = set(), []
    declared = list(declared)
    for index, tag in enumerate(declared):
        try:
            tags.add(parse_os_tag(tag, "node_os[%d]" % index))
        except OsError as exc:
            problems += exc.problems
    for entry in ([] if declared else facts):
        try:
            tags.add(os_tag(entry.get("distribution"), entry.get("version"), "host %s" % entry.get("host", "?")))
        except OsError as exc:
            problems += exc.problems
    if problems:
        raise OsError(problems)
    return sorted(tags)


def pulled(values: Mapping[str, Any], path: Sequence[str]) -> bool:
    """Whether the chart or the operator pulls the image at ``path`` of the effective ``values``."""
    top = path[0] if path else ""
    if top == "node-feature-discovery":
        return _on(_get(values, "nfd", "enabled"))
    if top == "draDriver":
        return _on(_get(values, "gpuCluster", "deployCR"), False)
    if top not in NOT_IN_POLICY and not _on(_get(values, "clusterPolicy", "deployCR")):
        return False
    if top == "kataManager" or not _on(_get(values, top, "enabled")):
        return False
    if top in ("gds", "gdrcopy") and not _on(_get(values, "driver", "enabled")):
        return False  # sidecars of the driver DaemonSet
    for name, mode in SANDBOX:
        if top == name:
            return _on(_get(values, "sandboxWorkloads", "enabled"), False) and (
                not mode or str(_get(values, "sandboxWorkloads", "mode") or "kubevirt") == mode)
    return True


def os_tagged(path: Sequence[str]) -> bool:
    return len(path) == 1 and path[0] in OS_TAGGED


def tagged_images(reference: str, path: Sequence[str], tags: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(the images pulled for ``reference`` at ``path``, problems): one per OS tag for a driver-type image."""
    if not os_tagged(path) or "@sha256:" in reference:
        return [reference], []
    if not tags:
        return [], ["%s: the GPU Operator pulls %s-<os>, <os> being each GPU node's OS; give node_os "
                    "(gpu_operator_node_os, such as ubuntu22.04) or gather the hosts' facts" % (path[0], reference)]
    return ["%s-%s" % (reference, tag) for tag in tags], []


__all__ = ["ANSIBLE_DISTRIBUTIONS", "KNOWN_OS", "MAJOR_ONLY", "VERSION_ID_MAJOR", "OS_TAGGED", "OsError", "SANDBOX", "fleet_os_tags",
           "os_tag", "os_tagged", "parse_os_tag", "pulled", "tagged_images"]

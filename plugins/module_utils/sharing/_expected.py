# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node must advertise (``ExpectedNode``, one ``ResourceRecord`` per resource) under its sharing
config and MIG strategy, and why a config cannot apply to a node's GPUs.

Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import DevicePlugin, MIG_SUFFIX_RESOURCES, show
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._mig_strategy import refusal_problem, start_refusal
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import (
    NodeGpus,
    advertised_gpus,
    advertised_mig_resource,
    profile_of_mig_resource)


from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import (
    CONFIG_LABEL,
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    MIG_STRATEGIES,
    SharingConfig,
    SharingError)


def config_problems(cfg: Optional[SharingConfig], gpus: NodeGpus, mig_strategy: str, node: str,
                    per_node: bool = False) -> List[str]:
    """Why ``cfg`` cannot work on ``node`` (empty list = fine).

    ``mig_strategy`` is the strategy the node's plugin runs with: the ClusterPolicy's, or with
    ``per_node`` (the ClusterPolicy leaves it empty) the config's ``flags.migStrategy`` (``_mig_strategy``).
    """
    problems: List[str] = []
    where = "node %r" % node
    if mig_strategy not in MIG_STRATEGIES:
        return ["%s: MIG strategy must be one of %s, got %r" % (where, ", ".join(MIG_STRATEGIES), mig_strategy)]
    if gpus.mig_enabled and mig_strategy == "none":
        problems.append(
            "%s: has MIG-enabled GPUs but %s, so its MIG devices are not advertised; use single or mixed"
            % (where, "its device-plugin config gives the MIG strategy none (flags.migStrategy, or no config: "
                      "the plugin's default) while the ClusterPolicy leaves it to the nodes"
               if per_node else "the ClusterPolicy MIG strategy is none")
        )
    if mig_strategy == "single" and gpus.mig_enabled:
        if gpus.full_gpus:
            problems.append("%s: MIG strategy single needs every GPU MIG-enabled (%d GPUs have MIG off)" % (where, gpus.full_gpus))
        if len(gpus.mig_devices) > 1:
            problems.append(
                "%s: MIG strategy single needs one MIG profile on the node, the plan has %s"
                % (where, ", ".join(profile_of_mig_resource(r) for r, _count in gpus.mig_devices))
            )
    if cfg is None:
        return problems
    cwhere = "sharing config %r on node %r" % (cfg.name, node)
    if start_refusal(mig_strategy, cfg.strategy, any(item.replicas > 1 for item in cfg.resources)):
        problems.append(refusal_problem(cwhere, None if per_node else mig_strategy, mig_strategy))
    problems.extend(p for p in [mps_on_mig_problem(cfg, gpus, cwhere)] if p)
    if not per_node and cfg.mig_strategy and cfg.mig_strategy != mig_strategy:
        problems.append(
            "%s: flags.migStrategy %s differs from the ClusterPolicy MIG strategy %s, which takes precedence; "
            "set them equal or drop mig_strategy from the config" % (cwhere, cfg.mig_strategy, mig_strategy)
        )
    problems.extend(absent_resources(cfg, gpus, mig_strategy, cwhere))
    for item in cfg.resources:
        if not item.name.startswith(MIG_RESOURCE_PREFIX):
            continue
        if mig_strategy != "mixed":
            problems.append(
                "%s: %s can only be time-sliced with the mixed MIG strategy (with %s MIG devices are "
                "nvidia.com/gpu)" % (cwhere, item.name, mig_strategy)
            )
        elif gpus.known_mig_resources is not None and item.name not in gpus.known_mig_resources:
            problems.append(
                "%s: %s is not a MIG profile of %s (valid: %s)"
                % (cwhere, item.name, "/".join(gpus.models) or "its GPUs", ", ".join(sorted(gpus.known_mig_resources)))
            )
    return problems


def mps_on_mig_problem(cfg: SharingConfig, gpus: NodeGpus, cwhere: str) -> Optional[str]:
    """MPS shares whole GPUs only: the device plugin's README rules it out on GPUs in MIG mode (specs §9.2)."""
    if cfg.strategy == "mps" and gpus.mig_enabled:
        return "%s: MPS is not supported on MIG-enabled GPUs; use time-slicing or disable MIG" % cwhere
    return None


def absent_resources(cfg: SharingConfig, gpus: NodeGpus, mig_strategy: str, cwhere: str) -> List[str]:
    """Shared resources the node's planned GPUs will not advertise (only known from a plan)."""
    if gpus.source != "plan":
        return []
    have = set(dict(gpus.mig_devices)) if mig_strategy == "mixed" else set()
    if gpus.full_gpus or (gpus.mig_enabled and mig_strategy == "single"):
        have.add(GPU_RESOURCE)
    if mig_strategy != "mixed" and gpus.mig_enabled:
        have.add(GPU_RESOURCE)
    known = gpus.known_mig_resources or frozenset()
    absent = [item.name for item in cfg.resources
              if item.name not in have and (item.name == GPU_RESOURCE or item.name in known)]
    if not cfg.resources or len(absent) < len(cfg.resources):
        return []  # a config shared by many nodes may name resources some of them lack
    return ["%s: the node does not have %s, so the config shares nothing there (its plan gives it: %s)"
            % (cwhere, ", ".join(absent), ", ".join(sorted(have)) or "nothing")]


@dataclass(frozen=True)
class ExpectedNode:
    """What one node must advertise: capacity (= allocatable) and GFD labels.

    ``product_suffixes`` holds label -> required suffix for product labels whose base name is not
    known from the plan (the comparison then checks the suffix only). ``records``: per resource
    type (its name without ``.shared``) the typed facts the labels flatten; readers use
    ``record_for`` and never parse the labels back.
    """

    node: str
    config: Optional[str]
    sharing: str
    mig_strategy: str
    resources: Dict[str, int] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)
    product_suffixes: Dict[str, str] = field(default_factory=dict)
    gpus: Optional[NodeGpus] = None
    records: Dict[str, "ResourceRecord"] = field(default_factory=dict)

    def record_for(self, resource: str) -> "ResourceRecord":
        """The record of an advertised resource name (``<resource>.shared`` when renamed)."""
        base = resource[: -len(SHARED_SUFFIX)] if resource.endswith(SHARED_SUFFIX) else resource
        if base in self.records:
            return self.records[base]
        profile = profile_of_mig_resource(base) if base.startswith(MIG_RESOURCE_PREFIX) else None
        return ResourceRecord(base, self.resources.get(resource, 0), 1, "none", "mig" if profile else "gpu", profile)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "node": self.node,
            "config": self.config,
            "sharing": self.sharing,
            "mig_strategy": self.mig_strategy,
            "resources": dict(sorted(self.resources.items())),
            "labels": dict(sorted(self.labels.items())),
            "product_suffixes": dict(sorted(self.product_suffixes.items())),
            "gpus": self.gpus.as_dict() if self.gpus else None,
        }


@dataclass(frozen=True)
class ResourceRecord:
    """One resource type a node advertises, typed: ``count`` physical devices (GPUs or MIG devices),
    each offered ``replicas`` times with ``strategy`` ("none" when not shared); ``device_kind``
    "gpu" or "mig" (a MIG device of ``mig_profile``, also ``nvidia.com/gpu`` under the single strategy)."""

    resource: str
    count: int
    replicas: int
    strategy: str
    device_kind: str
    mig_profile: Optional[str] = None


SHARED_SUFFIX = ".shared"


def _describe(resource: str, physical: int, cfg: Optional[SharingConfig], product_base: Optional[str], product_tail: str,
              resources: Dict[str, int], labels: Dict[str, str], suffixes: Dict[str, str],
              records: Dict[str, ResourceRecord], mig_profile: Optional[str] = None) -> None:
    """Capacity and GFD labels of one resource type (docs/reference/specs.md §8, 9.3, 9.4)."""
    replicas = cfg.replicas_for(resource) if cfg else 1
    shared = replicas > 1
    if shared and cfg is not None and cfg.rename_by_default:
        resources[resource] = 0
        resources[resource + SHARED_SUFFIX] = physical * replicas
    else:
        resources[resource] = physical * replicas
    strategy = cfg.strategy if (shared and cfg is not None) else "none"
    records[resource] = ResourceRecord(resource, physical, replicas, strategy, "mig" if mig_profile else "gpu", mig_profile)
    labels[resource + ".count"] = str(physical)
    labels[resource + ".replicas"] = str(replicas)
    labels[resource + ".sharing-strategy"] = strategy
    suffix = product_tail + ("-SHARED" if shared and cfg is not None and not cfg.rename_by_default else "")
    if product_base:
        labels[resource + ".product"] = product_base + suffix
    else:
        suffixes[resource + ".product"] = suffix


def _describe_mixed(gpus: NodeGpus, cfg: Optional[SharingConfig], resources: Dict[str, int], labels: Dict[str, str],
                    suffixes: Dict[str, str], records: Dict[str, ResourceRecord]) -> None:
    """The mixed strategy's MIG resources, and the GPU labels GFD gives a node with MIG-enabled GPUs."""
    base = gpus.product
    # GFD counts every physical GPU; a node whose GPUs are all MIG-enabled shows gpu.replicas=0.
    labels["nvidia.com/gpu.count"] = str(gpus.full_gpus + gpus.mig_gpus)
    if gpus.full_gpus == 0:
        # No full GPU is exposed: GFD describes the MIG parents unshared (docs/reference/specs.md §8 mixed example).
        labels["nvidia.com/gpu.replicas"] = "0"
        labels["nvidia.com/gpu.sharing-strategy"] = "none"
        if base:
            labels["nvidia.com/gpu.product"] = base
        else:
            suffixes["nvidia.com/gpu.product"] = ""
    for mig_resource, devices in gpus.mig_devices:
        profile = profile_of_mig_resource(mig_resource)
        _describe(mig_resource, devices, cfg, base, "-MIG-" + profile, resources, labels, suffixes, records, profile)


def suffix_problems(cfg: Optional[SharingConfig], mig_strategy: str, plugin: Optional[DevicePlugin], node: str) -> List[str]:
    """A config sharing a suffixed MIG resource that ``plugin`` does not advertise under that name."""
    if cfg is None or mig_strategy != "mixed":
        return []
    return ["sharing config %r on node %r: %s advertises %s as %s (suffixed MIG profiles get their own resource "
            "from device plugin %s, GPU Operator v26.7.0); share %s instead"
            % (cfg.name, node, plugin.describe() if plugin else "the device plugin", item.name,
               advertised_mig_resource(item.name, plugin), show(MIG_SUFFIX_RESOURCES), advertised_mig_resource(item.name, plugin))
            for item in cfg.resources if advertised_mig_resource(item.name, plugin) != item.name]


def expected_node(node: str, gpus: NodeGpus, mig_strategy: str, cfg: Optional[SharingConfig],
                  labelled: bool = False, plugin: Optional[DevicePlugin] = None, per_node: bool = False) -> ExpectedNode:
    """What ``node`` must advertise with ``gpus``, the plugin's ``mig_strategy`` and config ``cfg``.

    ``mig_strategy`` is the ClusterPolicy's, or with ``per_node`` the one the node's config gives
    (``_mig_strategy.plugin_strategy``).

    ``labelled``: the node selects ``cfg`` by the label nvidia.com/device-plugin.config (rather
    than through the ClusterPolicy default), so that label is expected too. ``plugin``: the
    device-plugin release that runs (None: the newest behaviour), which names the MIG resources.

    Raises SharingError when the combination cannot work (MPS on MIG, mig-* without mixed, ...).
    """
    gpus = advertised_gpus(gpus, mig_strategy, plugin)
    problems = suffix_problems(cfg, mig_strategy, plugin, node) + config_problems(cfg, gpus, mig_strategy, node, per_node)
    if problems:
        raise SharingError(problems)
    resources: Dict[str, int] = {}
    labels: Dict[str, str] = {}
    suffixes: Dict[str, str] = {}
    records: Dict[str, ResourceRecord] = {}
    base = gpus.product
    if mig_strategy == "single" and gpus.mig_enabled:
        (mig_resource, devices), = gpus.mig_devices
        profile = profile_of_mig_resource(mig_resource)
        _describe(GPU_RESOURCE, devices, cfg, base, "-MIG-" + profile, resources, labels, suffixes, records, profile)
    else:
        _describe(GPU_RESOURCE, gpus.full_gpus, cfg, base, "", resources, labels, suffixes, records)
        if mig_strategy == "mixed" and gpus.mig_enabled:
            _describe_mixed(gpus, cfg, resources, labels, suffixes, records)
    if mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig_strategy
    if labelled and cfg is not None:
        labels[CONFIG_LABEL] = cfg.name
    labels["nvidia.com/mps.capable"] = "true" if cfg is not None and cfg.strategy == "mps" else "false"
    sharing = "none"
    if cfg is not None and any(item.replicas > 1 for item in cfg.resources):
        live = [r for r in cfg.resources if resources.get(cfg.advertised_name(r.name), 0) > 0]
        sharing = cfg.strategy if live else "none"
    return ExpectedNode(
        node=node,
        config=cfg.name if cfg else None,
        sharing=sharing,
        mig_strategy=mig_strategy,
        resources=resources,
        labels=labels,
        product_suffixes=suffixes,
        gpus=gpus,
        records=records,
    )


def product_matches(actual: Optional[str], suffix: str) -> bool:
    """A product label whose base is unknown: strip the known tails and re-add the expected one."""
    if actual is None:
        return False
    base = re.sub(r"(-MIG-.*)?(-SHARED)?$", "", actual, count=1)
    return base + suffix == actual

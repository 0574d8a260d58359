# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device-plugin sharing configs (time-slicing, MPS): parsing, rendering, which config a node runs.

Pure logic, no I/O. What a node must advertise under its config is ``_expected.expected_node`` (the
single source of truth for the plan, the check-mode diff, the verification and the report); the
node's GPUs are ``_node_gpus``.

Facts followed (docs/reference/specs.md):
- config file format ``version: v1``, ``sharing.timeSlicing`` / ``sharing.mps`` (docs/reference/specs.md §9.2);
- capacity = devices x replicas, ``renameByDefault`` -> ``<name>.shared`` and ``<name>`` 0 (docs/reference/specs.md §9.3);
- ``-SHARED`` product suffix unless renamed (docs/reference/specs.md §9.4);
- time-slicing of ``nvidia.com/mig-*`` only with the mixed MIG strategy, MPS never on MIG (docs/reference/specs.md §9.2, 10);
- GFD labels per strategy (docs/reference/specs.md §8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import ALLOCATION_POLICIES, CONFIG_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import (
    DevicePlugin,
    MPS_FAIL_REQUESTS_CONFIGURABLE,
    SHARED_DEVICES_ALLOCATION_POLICY,
    show)


from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._mig_strategy import rendered_strategy

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core and the kubernetes client
    yaml = None

GPU_RESOURCE = "nvidia.com/gpu"
RESOURCE_PREFIX = "nvidia.com/"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
STRATEGIES = ("none", "time-slicing", "mps")
MIG_STRATEGIES = ("none", "single", "mixed")
# flags.plugin.sharedDevicesAllocationPolicy of the device plugin (docs/reference/specs.md §9.11).
# Upper bound of replicas per GPU: a node runs at most 110 pods by default (the kubelet's maxPods,
# which Kubernetes documents as its supported maximum per node), so more replicas of one GPU than
# pods on the node can never be used; larger numbers are typos (docs/reference/specs.md §9.7).
MAX_REPLICAS = 110
RESOURCE_KEYS = ("name", "replicas")
# Kubernetes label value (the config name is used as the node label value) and ConfigMap key rules.
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MIG_RESOURCE_RE = re.compile(r"^nvidia\.com/mig-[0-9]+g\.[0-9]+gb([-.][a-z.]+)?$")


class SharingError(ProblemsError):
    """Invalid sharing input; ``problems`` lists every problem found (one sentence each)."""


@dataclass(frozen=True)
class SharedResource:
    name: str
    replicas: int


@dataclass(frozen=True)
class SharingConfig:
    """One named device-plugin config (one key of the ConfigMap)."""

    name: str
    strategy: str  # none | time-slicing | mps
    resources: Tuple[SharedResource, ...] = ()
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    mig_strategy: Optional[str] = None  # rendered as flags.migStrategy when set
    allocation_policy: Optional[str] = None  # rendered as flags.plugin.sharedDevicesAllocationPolicy when set
    nodes: Tuple[str, ...] = ()
    node_selector: Tuple[Tuple[str, str], ...] = ()

    def replicas_for(self, resource: str) -> int:
        """Configured replicas of ``resource`` (1 = not shared)."""
        if self.strategy == "none":
            return 1
        for item in self.resources:
            if item.name == resource:
                return item.replicas
        return 1

    def advertised_name(self, resource: str) -> str:
        if self.rename_by_default and self.replicas_for(resource) > 1:
            return resource + ".shared"
        return resource

    def as_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "strategy": self.strategy,
            "resources": [{"name": r.name, "replicas": r.replicas} for r in self.resources],
            "rename_by_default": self.rename_by_default,
            "fail_requests_greater_than_one": self.fail_requests_greater_than_one,
            "mig_strategy": self.mig_strategy,
            "shared_devices_allocation_policy": self.allocation_policy,
            "nodes": list(self.nodes),
            "node_selector": dict(self.node_selector),
        }


def normalize_resource_name(name: str) -> str:
    """The device plugin adds ``nvidia.com/`` when it is missing (docs/reference/specs.md §9.2)."""
    name = name.strip()
    if "/" not in name:
        return RESOURCE_PREFIX + name
    return name


def parse_selector(selector: Any, where: str) -> Tuple[Tuple[str, str], ...]:
    """A node selector as a mapping or ``"k=v,k2=v2"``; equality only."""
    if selector in (None, "", {}):
        return ()
    pairs: List[Tuple[str, str]] = []
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            pairs.append((str(key), "" if value is None else str(value)))
    elif isinstance(selector, str):
        for part in selector.split(","):
            part = part.strip()
            if not part:
                continue
            if "!=" in part or "=" not in part:
                raise SharingError(["%s: node_selector term %r must be key=value" % (where, part)])
            key, _sep, value = part.partition("=")
            pairs.append((key.strip().rstrip("="), value.strip()))
    else:
        raise SharingError(["%s: node_selector must be a mapping or a 'key=value,...' string" % where])
    return tuple(sorted(pairs))


def _bool(raw: Mapping[str, Any], key: str, default: bool, where: str, problems: List[str]) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    problems.append("%s: %s must be true or false, got %r" % (where, key, value))
    return default


def unknown_keys(raw: Mapping[str, Any], path: str) -> List[str]:
    """Keys of a sharing config (and of its resources) that are not options, each with its path."""
    problems = ["%s.%s: unknown key %r (valid keys: %s)" % (path, key, key, ", ".join(sorted(CONFIG_ARGSPEC)))
                for key in raw if key not in CONFIG_ARGSPEC]
    resources = raw.get("resources")
    for index, item in enumerate(resources if isinstance(resources, list) else []):
        if isinstance(item, Mapping):
            problems.extend("%s.resources[%d].%s: unknown key %r (valid keys: %s)" % (
                path, index, key, key, ", ".join(RESOURCE_KEYS)) for key in item if key not in RESOURCE_KEYS)
    return problems


def _parse_resources(raw_resources: Sequence[Any], strategy: str, where: str, problems: List[str]) -> List[SharedResource]:
    """The shared resources of one config; problems are appended (named by config, index and resource)."""
    resources: List[SharedResource] = []
    seen = set()
    if strategy in ("time-slicing", "mps") and not raw_resources:
        problems.append("%s: resources is required and must not be empty for strategy %s" % (where, strategy))
    if strategy == "none" and raw_resources:
        problems.append("%s: strategy none shares nothing; remove resources or choose time-slicing or mps" % where)
    for index, item in enumerate(raw_resources):
        item_where = "%s resources[%d]" % (where, index)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item.get("name"):
            problems.append("%s: needs a name (nvidia.com/gpu or nvidia.com/mig-<profile>)" % item_where)
            continue
        rname = normalize_resource_name(item["name"])
        item_where = "%s resources[%d] (%s)" % (where, index, rname)
        if rname != GPU_RESOURCE and not _MIG_RESOURCE_RE.match(rname):
            problems.append(
                "%s: resource name must be nvidia.com/gpu or nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb)"
                % item_where
            )
        if strategy == "mps" and rname != GPU_RESOURCE:
            problems.append("%s: MPS shares only nvidia.com/gpu on full GPUs (MPS is not supported with MIG)" % item_where)
        if rname in seen:
            problems.append("%s: listed twice" % item_where)
        seen.add(rname)
        replicas = item.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            problems.append("%s: replicas must be an integer >= 2, got %r" % (item_where, replicas))
            continue
        if replicas == 1:
            problems.append(
                "%s: replicas 1 means sharing off for this resource; remove it from the config "
                "(or use strategy none) instead" % item_where
            )
        elif replicas < 2:
            problems.append("%s: replicas must be >= 2, got %d" % (item_where, replicas))
        elif replicas > MAX_REPLICAS:
            problems.append("%s: replicas must be <= %d (a node runs at most %d pods by default), got %d"
                            % (item_where, MAX_REPLICAS, MAX_REPLICAS, replicas))
        resources.append(SharedResource(rname, replicas))

    return resources


def _header_problems(raw: Mapping[str, Any], name: str, where: str) -> List[str]:
    """What is wrong with a config's name, strategy, version, MIG strategy and allocation policy."""
    problems: List[str] = []
    if len(name) > 63 or not _LABEL_VALUE_RE.fullmatch(name):
        problems.append(
            "%s: name must be a valid label value (<= 63 chars of letters, digits, '-', '_', '.', "
            "starting and ending with a letter or digit) because nodes select it with the label %s"
            % (where, CONFIG_LABEL)
        )
    strategy = raw.get("strategy", "time-slicing")
    if strategy not in STRATEGIES:
        problems.append("%s: strategy must be one of %s, got %r" % (where, ", ".join(STRATEGIES), strategy))
    version = raw.get("version", "v1")
    if version != "v1":
        problems.append("%s: version must be v1 (the only device-plugin config version), got %r" % (where, version))
    mig_strategy = raw.get("mig_strategy")
    if mig_strategy is not None and mig_strategy not in MIG_STRATEGIES:
        problems.append("%s: mig_strategy must be one of %s, got %r" % (where, ", ".join(MIG_STRATEGIES), mig_strategy))
    policy = raw.get("shared_devices_allocation_policy")
    if policy is not None and policy not in ALLOCATION_POLICIES:
        problems.append("%s: shared_devices_allocation_policy must be one of %s, got %r"
                        % (where, ", ".join(ALLOCATION_POLICIES), policy))
    return problems


def parse_config(raw: Mapping[str, Any], path: str = "config") -> SharingConfig:
    """Validate one user config; raises SharingError naming the config and the field (``path``:
    where the config was given, for unknown keys)."""
    if not isinstance(raw, Mapping):
        raise SharingError(["%s: a sharing config must be a mapping, got %s" % (path, type(raw).__name__)])
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SharingError(["a sharing config has no name" + ("" if path == "config" else " (%s)" % path)])
    where = "sharing config %r" % name
    problems = ["%s: %s" % (where, p) for p in unknown_keys(raw, path)] + _header_problems(raw, name, where)
    strategy = raw.get("strategy", "time-slicing")
    mig_strategy = raw.get("mig_strategy")
    policy = raw.get("shared_devices_allocation_policy")
    resources = _parse_resources(raw.get("resources") or [], strategy, where, problems)
    rename = _bool(raw, "rename_by_default", False, where, problems)
    fail_gt1_default = strategy == "mps"
    fail_gt1 = _bool(raw, "fail_requests_greater_than_one", fail_gt1_default, where, problems)

    nodes_raw = raw.get("nodes") or []
    if isinstance(nodes_raw, str) or not isinstance(nodes_raw, Sequence):
        problems.append("%s: nodes must be a list of node names" % where)
        nodes_raw = []
    nodes = tuple(sorted({str(n) for n in nodes_raw}))
    try:
        selector = parse_selector(raw.get("node_selector"), where)
    except SharingError as exc:
        problems.extend(exc.problems)
        selector = ()
    if problems:
        raise SharingError(problems)
    return SharingConfig(
        name=name,
        strategy=strategy,
        resources=tuple(resources),
        rename_by_default=rename,
        fail_requests_greater_than_one=fail_gt1,
        mig_strategy=mig_strategy,
        allocation_policy=policy,
        nodes=nodes,
        node_selector=selector,
    )


def parse_configs(raw_configs: Sequence[Mapping[str, Any]], default: Optional[str] = None) -> Dict[str, SharingConfig]:
    """Validate every config (all problems at once); names unique; default must exist."""
    problems: List[str] = []
    configs: Dict[str, SharingConfig] = {}
    for index, raw in enumerate(raw_configs):
        try:
            cfg = parse_config(raw, "configs[%d]" % index)
        except SharingError as exc:
            problems.extend(exc.problems)
            continue
        if cfg.name in configs:
            problems.append("sharing config %r: defined twice" % cfg.name)
        configs[cfg.name] = cfg
    if default and default not in configs and not problems:
        problems.append(
            "default config %r is not one of the configs (%s)" % (default, ", ".join(sorted(configs)) or "none defined")
        )
    if problems:
        raise SharingError(problems)
    return configs


def render_config(cfg: SharingConfig) -> str:
    """MPS gets ``failRequestsGreaterThanOne`` only when false: omitted, the plugin refuses requests > 1
    (docs/reference/specs.md §9.9), and a config rendered before stays byte for byte the same."""
    lines = ["version: v1"]
    if cfg.mig_strategy or cfg.allocation_policy:
        lines.append("flags:")
    if cfg.mig_strategy:
        lines.append("  migStrategy: %s" % cfg.mig_strategy)
    if cfg.allocation_policy:
        lines += ["  plugin:", "    sharedDevicesAllocationPolicy: %s" % cfg.allocation_policy]
    if cfg.strategy != "none":
        lines += ["sharing:", "  %s:" % ("timeSlicing" if cfg.strategy == "time-slicing" else "mps")]
        lines.append("    renameByDefault: %s" % ("true" if cfg.rename_by_default else "false"))
        if cfg.strategy == "time-slicing" or not cfg.fail_requests_greater_than_one:
            lines.append("    failRequestsGreaterThanOne: %s" % ("true" if cfg.fail_requests_greater_than_one else "false"))
        lines.append("    resources:")
        for item in cfg.resources:
            lines += ["    - name: %s" % item.name, "      replicas: %d" % item.replicas]
    return "\n".join(lines) + "\n"


def release_problems(configs: Mapping[str, SharingConfig], plugin: Optional[DevicePlugin]) -> List[str]:
    """What the configs ask of a device-plugin release that does not have it (docs/reference/specs.md
    §9.9, §9.11); ``plugin`` None: the newest behaviour."""
    problems: List[str] = []
    if plugin is None:
        return problems
    for name in sorted(configs):
        cfg = configs[name]
        if cfg.strategy == "mps" and not cfg.fail_requests_greater_than_one and not plugin.at_least(MPS_FAIL_REQUESTS_CONFIGURABLE):
            problems.append(
                "sharing config %r: fail_requests_greater_than_one cannot be false with MPS on %s: before %s the "
                "plugin always enforces it (honoured from device plugin %s, GPU Operator v26.7.0)"
                % (name, plugin.describe(), show(MPS_FAIL_REQUESTS_CONFIGURABLE), show(MPS_FAIL_REQUESTS_CONFIGURABLE)))
        if cfg.allocation_policy and not plugin.at_least(SHARED_DEVICES_ALLOCATION_POLICY):
            problems.append(
                "sharing config %r: shared_devices_allocation_policy needs device plugin %s or later (GPU Operator "
                "v26.7.0); %s has no such setting and always distributes replicas across GPUs"
                % (name, show(SHARED_DEVICES_ALLOCATION_POLICY), plugin.describe()))
    return problems


def with_rendered_strategies(configs: Mapping[str, SharingConfig], policy_strategy: Optional[str]) -> Dict[str, SharingConfig]:
    """The configs with the ``flags.migStrategy`` the collection renders (``_mig_strategy.rendered_strategy``):
    unchanged under a ClusterPolicy strategy; per node, each config without one gets ``none`` for MPS,
    ``mixed`` otherwise."""
    return {name: replace(cfg, mig_strategy=rendered_strategy(policy_strategy, cfg.mig_strategy, cfg.strategy))
            for name, cfg in configs.items()}


def render_configmap_data(configs: Mapping[str, SharingConfig]) -> Dict[str, str]:
    return {name: render_config(configs[name]) for name in sorted(configs)}


def selector_matches(selector: Sequence[Tuple[str, str]], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector)


def assign_nodes(configs: Mapping[str, SharingConfig], node_labels: Mapping[str, Mapping[str, str]]) -> Dict[str, str]:
    """Node name -> config name, from each config's node list and selector.

    Errors: a listed node that does not exist, a node claimed by two configs.
    """
    problems: List[str] = []
    assigned: Dict[str, str] = {}
    for name in sorted(configs):
        cfg = configs[name]
        chosen = set()
        for node in cfg.nodes:
            if node not in node_labels:
                problems.append("sharing config %r: node %r does not exist in the cluster" % (name, node))
            else:
                chosen.add(node)
        if cfg.node_selector:
            chosen.update(n for n, labels in node_labels.items() if selector_matches(cfg.node_selector, labels))
        for node in sorted(chosen):
            if node in assigned and assigned[node] != name:
                problems.append("node %r is selected by two sharing configs: %r and %r" % (node, assigned[node], name))
            assigned[node] = name
    if problems:
        raise SharingError(problems)
    return assigned


def effective_config_name(node_labels: Mapping[str, str], existing_keys: Sequence[str], default: Optional[str]) -> Optional[str]:
    """The config the device plugin applies on a node (docs/reference/specs.md §9.5): label if it names a key, else default."""
    label = node_labels.get(CONFIG_LABEL)
    if label and label in existing_keys:
        return label
    if label:
        return None  # unknown key: the plugin skips reconfiguration
    return default or None


def _known_resource_keys(item: Any) -> Any:
    """A resource of a rendered config without the device plugin's keys this collection does not write."""
    return dict((k, v) for k, v in item.items() if k in RESOURCE_KEYS) if isinstance(item, Mapping) else item


def parse_rendered_config(name: str, text: str) -> SharingConfig:
    """A device-plugin config file as found in the cluster's ConfigMap, back into a SharingConfig.

    Used to verify a cluster without the plan. Raises SharingError naming the key.
    """
    where = "ConfigMap key %r" % name
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SharingError(["%s: not YAML: %s" % (where, exc)])
    if not isinstance(doc, Mapping):
        raise SharingError(["%s: not a device-plugin config (expected a mapping)" % where])
    raw: Dict[str, Any] = {"name": name, "version": doc.get("version")}
    flags = doc.get("flags") or {}
    if isinstance(flags, Mapping) and flags.get("migStrategy"):
        raw["mig_strategy"] = flags.get("migStrategy")
    plugin_flags = flags.get("plugin") if isinstance(flags, Mapping) else None
    if isinstance(plugin_flags, Mapping) and plugin_flags.get("sharedDevicesAllocationPolicy"):
        raw["shared_devices_allocation_policy"] = plugin_flags.get("sharedDevicesAllocationPolicy")
    sharing = doc.get("sharing") or {}
    section = None
    if isinstance(sharing, Mapping):
        if sharing.get("mps"):
            raw["strategy"], section = "mps", sharing["mps"]
        elif sharing.get("timeSlicing"):
            raw["strategy"], section = "time-slicing", sharing["timeSlicing"]
    if section is None:
        raw["strategy"] = "none"
    elif isinstance(section, Mapping):
        raw["resources"] = [_known_resource_keys(item) for item in section.get("resources") or []]
        raw["rename_by_default"] = section.get("renameByDefault")
        raw["fail_requests_greater_than_one"] = section.get("failRequestsGreaterThanOne")
    try:
        return parse_config(raw)
    except SharingError as exc:
        raise SharingError(["%s: %s" % (where, p) for p in exc.problems])


def configs_from_nodes(node_configs: Mapping[str, Any], configs: Sequence[Mapping[str, Any]] = ()) -> List[Dict[str, Any]]:
    """Merge per-node configs (an inventory's per-group ``gpu_sharing_config``) into a config list.

    Nodes naming the same config must give the same content; each node joins that config's
    ``nodes``. Raises SharingError naming the nodes that disagree.
    """
    problems: List[str] = []
    merged: Dict[str, Dict[str, Any]] = {}
    origin: Dict[str, str] = {}
    for index, raw in enumerate(configs):
        if not isinstance(raw, Mapping):
            problems.append("configs[%d]: a sharing config must be a mapping, got %r" % (index, raw))
            continue
        merged[str(raw.get("name"))] = dict(raw, nodes=list(raw.get("nodes") or []))
        origin[str(raw.get("name"))] = "configs"
    for node in sorted(node_configs):
        raw = node_configs[node]
        if not raw:
            continue
        if not isinstance(raw, Mapping) or not raw.get("name"):
            problems.append("node %r: its sharing config must be a mapping with a name" % node)
            continue
        unknown = unknown_keys(raw, "node %r sharing_config" % node)
        if unknown:
            problems.extend(unknown)
            continue
        name = str(raw["name"])
        content = dict((k, v) for k, v in raw.items() if k not in ("nodes", "node_selector"))
        if name in merged:
            known = dict((k, v) for k, v in merged[name].items() if k not in ("nodes", "node_selector"))
            if known != content:
                problems.append("node %r: sharing config %r differs from the one given by %s" % (node, name, origin[name]))
                continue
        else:
            merged[name] = dict(content, nodes=[])
            origin[name] = "node %r" % node
        merged[name]["nodes"].append(node)
    if problems:
        raise SharingError(problems)
    return [merged[name] for name in sorted(merged)]

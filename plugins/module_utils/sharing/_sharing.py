# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device-plugin sharing configs (time-slicing, MPS) and what a node must advertise.

Pure logic, no I/O. The single source of truth for "what this node must advertise" is
:func:`expected_node`; ``gpu_sharing`` (plan, check-mode diff, wait), ``gpu_verify`` (comparison)
and the report all call it.

Facts followed (docs/reference/specs.md):
- config file format ``version: v1``, ``sharing.timeSlicing`` / ``sharing.mps`` (docs/reference/specs.md §9.2);
- capacity = devices x replicas, ``renameByDefault`` -> ``<name>.shared`` and ``<name>`` 0 (docs/reference/specs.md §9.3);
- ``-SHARED`` product suffix unless renamed (docs/reference/specs.md §9.4);
- time-slicing of ``nvidia.com/mig-*`` only with the mixed MIG strategy, MPS never on MIG (docs/reference/specs.md §9.2, 10);
- GFD labels per strategy (docs/reference/specs.md §8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core and the kubernetes client
    yaml = None

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import (
    MIG_SUFFIX_RESOURCES,
    MPS_FAIL_REQUESTS_CONFIGURABLE,
    SHARED_DEVICES_ALLOCATION_POLICY,
    DevicePlugin,
    show,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, find_model, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._mig_strategy import (
    refusal_problem,
    rendered_strategy,
    start_refusal,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (
    MigPartedError,
    current_layout,
    desired_layout,
    desired_state,
    parse_with_defaults,
    select_config,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, plan_layout

GPU_RESOURCE = "nvidia.com/gpu"
RESOURCE_PREFIX = "nvidia.com/"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
STRATEGIES = ("none", "time-slicing", "mps")
MIG_STRATEGIES = ("none", "single", "mixed")
# flags.plugin.sharedDevicesAllocationPolicy of the device plugin (docs/reference/specs.md §9.11).
ALLOCATION_POLICIES = ("distributed", "packed")

# One config as a module option (gpu_sharing ``configs[]``; documented there).
CONFIG_ARGSPEC: Dict[str, Any] = dict(
    name=dict(type="str", required=True),
    strategy=dict(type="str", choices=["time-slicing", "mps", "none"], default="time-slicing"),
    resources=dict(type="list", elements="dict", default=[],
                   options=dict(name=dict(type="str", required=True), replicas=dict(type="int", required=True))),
    rename_by_default=dict(type="bool", default=False),
    fail_requests_greater_than_one=dict(type="bool"),
    mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
    shared_devices_allocation_policy=dict(type="str", choices=list(ALLOCATION_POLICIES)),
    version=dict(type="str", default="v1"),
    nodes=dict(type="list", elements="str", default=[]),
    node_selector=dict(type="raw"),
)

# Upper bound of replicas per GPU: a node runs at most 110 pods by default (the kubelet's maxPods,
# which Kubernetes documents as its supported maximum per node), so more replicas of one GPU than
# pods on the node can never be used; larger numbers are typos (docs/reference/specs.md §9.7).
MAX_REPLICAS = 110
RESOURCE_KEYS = ("name", "replicas")

# Kubernetes label value (the config name is used as the node label value) and ConfigMap key rules.
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MIG_RESOURCE_RE = re.compile(r"^nvidia\.com/mig-[0-9]+g\.[0-9]+gb([-.][a-z.]+)?$")
_MIG_BASE_RE = re.compile(r"^(nvidia\.com/mig-[0-9]+g\.[0-9]+gb)[-.][a-z.]+$")
_PRODUCT_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-_. ]")


class SharingError(ValueError):
    """Invalid sharing input; ``problems`` lists every problem found (one sentence each)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


# --------------------------------------------------------------------------------------------
# Configs


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


def parse_config(raw: Mapping[str, Any], path: str = "config") -> SharingConfig:
    """Validate one user config; raises SharingError naming the config and the field (``path``:
    where the config was given, for unknown keys)."""
    if not isinstance(raw, Mapping):
        raise SharingError(["%s: a sharing config must be a mapping, got %s" % (path, type(raw).__name__)])
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SharingError(["a sharing config has no name" + ("" if path == "config" else " (%s)" % path)])
    where = "sharing config %r" % name
    problems = ["%s: %s" % (where, p) for p in unknown_keys(raw, path)]
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


# --------------------------------------------------------------------------------------------
# Rendering (device-plugin config file v1, docs/reference/specs.md §9.2). Deterministic: same input, same bytes.


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


# --------------------------------------------------------------------------------------------
# Node assignment


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


# --------------------------------------------------------------------------------------------
# What GPUs a node has


def sanitize_product(name: str) -> str:
    """GFD product label value: drop characters outside [A-Za-z0-9-_. ], spaces become '-' (docs/reference/specs.md §8)."""
    return _PRODUCT_UNSAFE_RE.sub("", name).strip().replace(" ", "-")


def mig_resource_name(profile: str) -> str:
    """Mixed-strategy resource of a GI profile: ``+`` becomes ``.`` (docs/reference/specs.md §9.1)."""
    return MIG_RESOURCE_PREFIX + profile.replace("+", ".")


def profile_of_mig_resource(resource: str) -> str:
    return resource[len(MIG_RESOURCE_PREFIX):]


def advertised_mig_resource(resource: str, plugin: Optional[DevicePlugin]) -> str:
    """The mixed-strategy resource a device-plugin release advertises for a profile's resource: before
    v0.20.0 a profile with a suffix (``+me``, ``-me``, ``+me.all``, ``+gfx``) is counted under its base
    profile, ``nvidia.com/mig-1g.10gb.me`` as ``nvidia.com/mig-1g.10gb`` (docs/reference/specs.md §9.10)."""
    if plugin is None or plugin.at_least(MIG_SUFFIX_RESOURCES):
        return resource
    match = _MIG_BASE_RE.match(resource)
    return match.group(1) if match else resource


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one node as the device plugin sees them (physical, before sharing).

    ``mig_devices`` maps the mixed-strategy resource name to the number of MIG devices.
    ``known_mig_resources`` is every mixed resource the node's GPU models can have (for validating
    config resource names); ``None`` when the models are unknown.
    """

    full_gpus: int = 0
    mig_gpus: int = 0
    mig_devices: Tuple[Tuple[str, int], ...] = ()
    product: Optional[str] = None
    models: Tuple[str, ...] = ()
    known_mig_resources: Optional[FrozenSet[str]] = None
    source: str = "plan"

    @property
    def mig_enabled(self) -> bool:
        return self.mig_gpus > 0 or bool(self.mig_devices)

    def mig_dict(self) -> Dict[str, int]:
        return dict(self.mig_devices)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "full_gpus": self.full_gpus,
            "mig_gpus": self.mig_gpus,
            "mig_devices": self.mig_dict(),
            "product": self.product,
            "models": list(self.models),
            "source": self.source,
        }


def _model_mig_resources(model: Any) -> FrozenSet[str]:
    """Every mixed-strategy resource a catalog model can have (its GI profiles with C == G)."""
    names = set()
    for profile in getattr(model, "profiles", ()) or ():
        pname = getattr(profile, "name", profile)
        if isinstance(pname, str):
            names.add(mig_resource_name(pname))
    return frozenset(names)


def _mig_resources(model: Any, model_name: Any, layout: Mapping[str, int], where: str,
                   problems: List[str]) -> Optional[Dict[str, int]]:
    """Mixed-strategy resources of one MIG layout (None, with the problem noted, when it is invalid)."""
    if model is None:
        problems.append("%s: a MIG layout needs the GPU model" % where)
        return None
    try:
        return plan_layout(model, dict(layout)).resources("mixed")
    except LayoutError as exc:
        detail = "; ".join(getattr(exc, "problems", None) or [str(exc)])
        problems.append("%s: MIG layout %s is invalid for %s: %s" % (where, dict(layout), model_name, detail))
        return None


def node_gpus_from_plan(gpus: Sequence[Mapping[str, Any]], where: str = "node") -> NodeGpus:
    """Build NodeGpus from planned GPUs: ``[{model, count=1, mig: {profile: n} | None, product}]``.

    MIG devices come from the planner (``plan_layout(...).resources("mixed")``), so the layout is
    validated against the model's geometry here too.
    """
    problems: List[str] = []
    full = 0
    mig_gpus = 0
    mig: Dict[str, int] = {}
    products = set()
    models: List[str] = []
    known: set = set()
    for index, gpu in enumerate(gpus):
        gwhere = "%s gpus[%d]" % (where, index)
        count = gpu.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            problems.append("%s: count must be an integer >= 1, got %r" % (gwhere, count))
            continue
        model_name = gpu.get("model")
        try:
            model = resolve_model(str(model_name), gpu.get("pci_device_id")) if model_name else None
        except CatalogError as exc:
            problems.append("%s: unknown GPU model %r (%s)" % (gwhere, model_name, exc))
            continue
        if model is not None:
            key = getattr(model, "key", None) or str(model_name)
            models.extend([key] if key not in models else [])
            known.update(_model_mig_resources(model))
        if gpu.get("product"):
            products.add(sanitize_product(str(gpu["product"])))
        if not gpu.get("mig"):
            full += count
            continue
        resources = _mig_resources(model, model_name, gpu["mig"], gwhere, problems)
        if resources is None:
            continue
        mig_gpus += count
        for rname, n in resources.items():
            mig[rname] = mig.get(rname, 0) + n * count
    if len(products) > 1:
        problems.append("%s: GPUs of different products on one node (%s) are not supported" % (where, ", ".join(sorted(products))))
    if problems:
        raise SharingError(problems)
    return NodeGpus(
        full_gpus=full,
        mig_gpus=mig_gpus,
        mig_devices=tuple(sorted(mig.items())),
        product=products.pop() if products else None,
        models=tuple(models),
        known_mig_resources=frozenset(known) if known else None,
        source="plan",
    )


def _int_label(labels: Mapping[str, str], key: str) -> Optional[int]:
    try:
        return int(labels[key])
    except (KeyError, TypeError, ValueError):
        return None


def node_gpus_from_labels(labels: Mapping[str, str], mig_strategy: str, where: str = "node") -> NodeGpus:
    """Physical GPUs read back from GFD labels, for nodes without a GPU plan.

    Works for MIG-disabled nodes, and for MIG nodes whose layout the labels fully determine
    (single strategy; mixed with every GPU MIG-enabled, shown by ``nvidia.com/gpu.replicas=0``).
    Anything else needs a plan, and the error says so.
    """
    count = _int_label(labels, "nvidia.com/gpu.count")
    if count is None:
        raise SharingError(["%s: no GPU plan given and no nvidia.com/gpu.count label (is GPU feature discovery running?)" % where])
    product = labels.get("nvidia.com/gpu.product") or None
    mig = {}
    for key, value in labels.items():
        if key.startswith(MIG_RESOURCE_PREFIX) and key.endswith(".count"):
            n = _int_label(labels, key)
            if n:
                mig[key[: -len(".count")]] = n
    if product is not None and product.endswith("-MIG-INVALID"):
        # GFD's invalid single-strategy labels (docs/reference/specs.md §8.1): no layout to read back.
        raise SharingError(["%s: GPU feature discovery reports nvidia.com/gpu.product=%s: the GPUs do not fit the "
                            "single MIG strategy (MIG on and off mixed, several profiles, or MIG on without devices); "
                            "give its GPU plan or fix its MIG layout" % (where, product)])
    single_mig = product is not None and "-MIG-" in product
    if product:
        product = re.sub(r"(-MIG-.*)?(-SHARED)?$", "", product, count=1)
    if single_mig:
        profile = (labels.get("nvidia.com/gpu.product") or "").split("-MIG-", 1)[1]
        profile = re.sub(r"-SHARED$", "", profile)
        return NodeGpus(
            mig_gpus=0,
            mig_devices=((mig_resource_name(profile), count),),
            product=product,
            source="labels",
            **_label_model(product),
        )
    if mig or (mig_strategy == "none" and labels.get("nvidia.com/gpu.replicas") == "0"):
        # gpu.replicas 0: every GPU is MIG-enabled (GFD labels MIG parents without sharing, §8, §8.2).
        if labels.get("nvidia.com/gpu.replicas") == "0":
            return NodeGpus(
                full_gpus=0,
                mig_gpus=count,
                mig_devices=tuple(sorted(mig.items())),
                product=product,
                source="labels",
                **_label_model(product),
            )
        raise SharingError(
            [
                "%s: has MIG devices (%s) next to full GPUs; give its GPU plan (nodes[].gpus) so the expected "
                "capacity can be computed" % (where, ", ".join(sorted(mig)))
            ]
        )
    if labels.get("nvidia.com/mig.config") not in (None, "", "all-disabled") and mig_strategy == "none":
        raise SharingError(
            ["%s: MIG config %r is set but the MIG strategy is none; give its GPU plan" % (where, labels.get("nvidia.com/mig.config"))]
        )
    return NodeGpus(full_gpus=count, product=product, source="labels", **_label_model(product))


def _label_model(product: Optional[str]) -> Dict[str, Any]:
    """The catalog model of a GFD product label (``NVIDIA-H100-80GB-HBM3``), so that a config naming a MIG
    resource the model cannot have is refused for a node known only by its labels, as for a planned one."""
    # GFD writes the product name with '-' for spaces (docs/reference/specs.md §8): undo the prefix's.
    model = find_model(re.sub(r"^NVIDIA-", "NVIDIA ", product)) if product else None
    if model is None:
        return {}
    return {"models": (model.key,), "known_mig_resources": _model_mig_resources(model)}


def plan_from_host(gpu_facts: Sequence[Mapping[str, Any]], mig_config: Optional[str] = None,
                   mig_configs: Optional[Mapping[str, Any]] = None, where: str = "host") -> List[Dict[str, Any]]:
    """Planned GPUs of a host from its gpu_facts entries and its mig-parted selection.

    Each GPU gets the layout the selected mig-parted config asks of it (the ``mig`` role's
    ``mig_config``/``mig_configs``, default named configs included); GPUs the config does not
    touch keep their current layout. Without ``mig_config`` the current layout is the plan.
    """
    desired: Dict[int, Any] = {}
    if mig_config:
        try:
            config = parse_with_defaults(mig_configs or {}, "%s mig_configs" % where)
            name, items = select_config(config, mig_config)
            desired = desired_state(items, gpu_facts, name)
        except MigPartedError as exc:
            raise SharingError(["%s: %s" % (where, p) for p in exc.problems])
    plan: List[Dict[str, Any]] = []
    for gpu in gpu_facts:
        after = desired_layout(current_layout(gpu), desired.get(int(gpu["index"])))
        entry: Dict[str, Any] = {"count": 1, "product": gpu.get("name")}
        model = find_model(str(gpu.get("name") or ""), gpu.get("pci_device_id"))
        if model is not None:
            entry["model"] = model.key
        if after["mig_enabled"]:
            entry["mig"] = dict(after["mig_devices"])
        plan.append(entry)
    return plan


def node_gpus_for(node: str, gpus: Optional[Sequence[Mapping[str, Any]]], labels: Mapping[str, str],
                  mig_strategy: str) -> NodeGpus:
    """The node's GPUs from its planned GPU list (``[{model, count, mig, product}]``), else from its labels.

    Turning a host's intent (GPU facts + MIG selection) into that list is ``_fleet_plan.HostPlan``'s job.
    """
    where = "node %r" % node
    if gpus:
        if isinstance(gpus, (str, Mapping)) or not isinstance(gpus, Sequence) or not all(isinstance(g, Mapping) for g in gpus):
            raise SharingError(["%s: the GPU plan must be a list of {model, count, mig, product}" % where])
        return node_gpus_from_plan(gpus, where)
    return node_gpus_from_labels(labels, mig_strategy, where)


# --------------------------------------------------------------------------------------------
# Validation of a config against a node, and the expectation


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
    if cfg.strategy == "mps" and gpus.mig_enabled:
        problems.append("%s: MPS is not supported on MIG-enabled GPUs; use time-slicing or disable MIG" % cwhere)
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
    known from the plan (the comparison then checks the suffix only).
    """

    node: str
    config: Optional[str]
    sharing: str
    mig_strategy: str
    resources: Dict[str, int] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)
    product_suffixes: Dict[str, str] = field(default_factory=dict)
    gpus: Optional[NodeGpus] = None

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


def _describe(resource: str, physical: int, cfg: Optional[SharingConfig], product_base: Optional[str], product_tail: str,
              resources: Dict[str, int], labels: Dict[str, str], suffixes: Dict[str, str]) -> None:
    """Capacity and GFD labels of one resource type (docs/reference/specs.md §8, 9.3, 9.4)."""
    replicas = cfg.replicas_for(resource) if cfg else 1
    shared = replicas > 1
    if shared and cfg is not None and cfg.rename_by_default:
        resources[resource] = 0
        resources[resource + ".shared"] = physical * replicas
    else:
        resources[resource] = physical * replicas
    labels[resource + ".count"] = str(physical)
    labels[resource + ".replicas"] = str(replicas)
    labels[resource + ".sharing-strategy"] = cfg.strategy if (shared and cfg is not None) else "none"
    suffix = product_tail + ("-SHARED" if shared and cfg is not None and not cfg.rename_by_default else "")
    if product_base:
        labels[resource + ".product"] = product_base + suffix
    else:
        suffixes[resource + ".product"] = suffix


def advertised_gpus(gpus: NodeGpus, mig_strategy: str, plugin: Optional[DevicePlugin]) -> NodeGpus:
    """``gpus`` with the mixed-strategy MIG resources named as ``plugin`` advertises them (§9.10)."""
    if mig_strategy != "mixed":
        return gpus
    merged: Dict[str, int] = {}
    for resource, count in gpus.mig_devices:
        name = advertised_mig_resource(resource, plugin)
        merged[name] = merged.get(name, 0) + count
    known = gpus.known_mig_resources
    return replace(gpus, mig_devices=tuple(sorted(merged.items())),
                   known_mig_resources=None if known is None else frozenset(advertised_mig_resource(r, plugin) for r in known))


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
    base = gpus.product
    if mig_strategy == "single" and gpus.mig_enabled:
        (mig_resource, devices), = gpus.mig_devices
        _describe(GPU_RESOURCE, devices, cfg, base, "-MIG-" + profile_of_mig_resource(mig_resource), resources, labels, suffixes)
    else:
        _describe(GPU_RESOURCE, gpus.full_gpus, cfg, base, "", resources, labels, suffixes)
        if mig_strategy == "mixed" and gpus.mig_enabled:
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
                _describe(mig_resource, devices, cfg, base, "-MIG-" + profile_of_mig_resource(mig_resource), resources, labels, suffixes)
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
    )


def product_matches(actual: Optional[str], suffix: str) -> bool:
    """A product label whose base is unknown: strip the known tails and re-add the expected one."""
    if actual is None:
        return False
    base = re.sub(r"(-MIG-.*)?(-SHARED)?$", "", actual, count=1)
    return base + suffix == actual


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

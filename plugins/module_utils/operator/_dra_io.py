# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_dra_driver module's steps: the cluster's DRA check, each node's backend labels, the driver's
release (helm through the operator's machinery: repository, mirror, pull secrets, pending recovery)
and the wait for the kubelet plugins (I/O over what the module hands it)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_devices import device_differences, expected_devices, published_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import cluster_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_values import (
    DEVICE_PLUGIN_LABEL,
    KUBELET_PLUGIN_SELECTORS,
    DraValuesError,
    driver_values,
    node_labels,
    split_nodes,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import release_action, release_info, release_state
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import ResourceType
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_versions import (
    NEW_CHART,
    OLD_CHART,
    chart_name,
    selector,
    upgrade_name_override,
    version_key,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_io import GpuOperator

DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
RESOURCE_SLICE = ResourceType("resource.k8s.io/v1", "ResourceSlice", "resourceslices", False)


def served_versions(k8s: K8sClient) -> List[str]:
    """The group versions of ``resource.k8s.io`` the API server serves (none: the group is unknown)."""
    try:
        group = k8s.request("GET", "/apis/resource.k8s.io")
    except K8sError as exc:
        if exc.status == 404:
            return []
        raise
    return [str(v.get("groupVersion")) for v in (group or {}).get("versions") or [] if isinstance(v, dict)]


class Backends:
    """Each named node on its backend: the cluster's DRA check, the labels, the wait (no helm)."""

    def __init__(self, mod: ClusterModule) -> None:
        self.mod = mod
        self.params = mod.params
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.backend: Dict[str, str] = {}

    def check_cluster(self, k8s: K8sClient) -> None:
        """With DRA nodes: Kubernetes >= 1.34 serving resource.k8s.io/v1; every named node there. Refused
        before any write."""
        problems: List[str] = []
        try:
            dra, plugin = split_nodes(self.params["dra_nodes"], self.params["device_plugin_nodes"])
        except DraValuesError as exc:
            dra, plugin, problems = [], [], list(exc.problems)
        if dra or self.params["state"] == "present" or self.params.get("require_dra"):
            version = str((k8s.request("GET", "/version") or {}).get("gitVersion", ""))
            problems = cluster_problems(version, served_versions(k8s)) + problems
            self.mod.result["kubernetes_version"] = version
        for name in dra + plugin:
            node = k8s.get("Node", name)
            if node is None:
                problems.append("node %s: not found in the cluster" % name)
            self.nodes[name] = node or {}
        self.backend = dict([(n, "dra") for n in dra] + [(n, "device-plugin") for n in plugin])
        if problems:
            self.mod.fail("DRA cannot be used here, nothing was changed: %s" % "; ".join(problems), problems=problems)

    def label_nodes(self, k8s: K8sClient) -> None:
        changed: Dict[str, Dict[str, Optional[str]]] = {}
        for name, backend in sorted(self.backend.items()):
            live = (self.nodes[name].get("metadata") or {}).get("labels") or {}
            wanted = node_labels(backend, live)
            if wanted:
                k8s.set_node_labels(name, wanted)
                changed[name] = wanted
                self.mod.changes.record("node %s labels" % name, {k: live.get(k) for k in wanted}, wanted)
        self.mod.result["nodes_switched"] = sorted(changed)

    def node_state(self, k8s: K8sClient, name: str) -> Optional[str]:
        """None when the node runs what its backend needs (on DRA: a Ready kubelet plugin, no device plugin,
        and, for a node in O(expected_gpus), its ResourceSlices listing exactly those devices); else what is wrong."""
        pods = [p for p in k8s.pods_on_node(name) if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        labels = [(p.get("metadata") or {}).get("labels") or {} for p in pods]
        wanted = [tuple(s.split("=")) for s in KUBELET_PLUGIN_SELECTORS]  # the old chart's label or the new one's
        kubelet_plugin = [p for p, lab in zip(pods, labels) if any(lab.get(k) == v for k, v in wanted)]
        if self.backend[name] != "dra":
            return "the DRA kubelet plugin still runs" if kubelet_plugin else None
        if any(lab.get("app") == DEVICE_PLUGIN_APP for lab in labels):
            return "the device plugin still runs (%s=false not yet honoured)" % DEVICE_PLUGIN_LABEL
        if not any(c.get("type") == "Ready" and c.get("status") == "True"
                   for p in kubelet_plugin for c in (p.get("status") or {}).get("conditions") or []):
            return "no Ready DRA kubelet plugin pod"
        gpus = (self.params.get("expected_gpus") or {}).get(name)
        if gpus is None:
            return None
        differences = device_differences(expected_devices(gpus), published_devices(k8s.list(RESOURCE_SLICE), name))
        return "ResourceSlices: %s" % "; ".join(differences) if differences else None

    def wait_nodes(self, k8s: K8sClient) -> None:
        """Each node on its backend, until O(wait_timeout); the nodes still waiting and why on a timeout."""
        def probe():
            states = {name: self.node_state(k8s, name) for name in sorted(self.backend)}
            waiting = {name: state for name, state in states.items() if state}
            return not waiting, waiting
        try:
            k8s.wait_for("the nodes on their GPU backend", probe, self.params["wait_timeout"],
                         interval=self.params["wait_interval"])
        except K8sTimeout as exc:
            self.mod.fail(str(exc), waiting=exc.detail)

    def switch(self) -> None:
        """O(state=nodes): the labels and the wait only (the release is left as it is)."""
        k8s = self.mod.k8s
        self.check_cluster(k8s)
        self.label_nodes(k8s)
        if self.params["wait"] and not self.mod.check_mode:
            self.wait_nodes(k8s)


class DraDriver(GpuOperator):
    """The DRA driver's release and the nodes of each backend."""

    def check_upgrade_path(self, info: Dict[str, Any], wanted_version: str) -> None:
        """Only a step back is refused (unless allow_downgrade), in the driver's own order: the calendar line
        (25.12.0) comes before SemVer 0.4 (_dra_versions); upstream has no way back to 25.12.0 from 0.4."""
        installed = (info or {}).get("chart_version")
        if not installed or self.params["allow_downgrade"]:
            return
        try:
            older = version_key(wanted_version) < version_key(installed)
        except ValueError as exc:
            self.mod.fail("cannot check the upgrade path: %s" % exc)
        if older:
            self.mod.fail("chart downgrade from %s (installed) to %s (asked) is refused; keep %s or newer, or set "
                          "allow_downgrade" % (installed, wanted_version, installed), release=info)

    def check_chart_ref(self) -> None:
        """A repository chart named for the other side of the 0.4.0 rename is refused before anything: helm would
        find no such version."""
        p = self.params
        ref, version = p["chart_ref"], p["chart_version"]
        name = ref.rsplit("/", 1)[-1]
        if not version or name not in (OLD_CHART, NEW_CHART) or "://" in ref or ref.startswith(("/", ".")):
            return
        try:
            wanted = chart_name(version)
        except ValueError as exc:
            self.mod.fail("invalid chart_version, nothing was changed: %s" % exc)
        if wanted != name:
            self.mod.fail("chart_ref %s does not hold DRA driver %s, nothing was changed: from 0.4.0 the chart is %s "
                          "(before, %s; kubernetes-sigs/dra-driver-nvidia-gpu docs/upgrade.md)"
                          % (ref, version, NEW_CHART, OLD_CHART))

    def requested_values(self, version: Optional[str] = None, name_override: str = "") -> Dict[str, Any]:
        p = self.params
        try:
            chart = self.chart_values().get("kubeletPlugin") or {} if p["tolerations"] else {}
            return driver_values(p["feature_gates"], p["tolerations"], p["values"], chart.get("tolerations") or [],
                                 version=version or p["chart_version"], driver_root=p["driver_root"],
                                 name_override=name_override)
        except DraValuesError as exc:
            self.mod.fail("invalid values, nothing was changed: %s" % exc, problems=exc.problems)

    def with_pull_secrets(self, k8s: K8sClient, requested: Dict[str, Any]) -> Dict[str, Any]:
        """The operator's pull-secret rules; the driver's chart takes Kubernetes' ``[{name: ...}]`` form."""
        values = super().with_pull_secrets(k8s, requested)
        names = values.get("imagePullSecrets") or []
        if names:
            values["imagePullSecrets"] = [n if isinstance(n, dict) else {"name": n} for n in names]
        return values

    def present(self) -> None:
        params, result = self.params, self.mod.result
        k8s = self.mod.k8s
        backends = Backends(self.mod)
        backends.check_cluster(k8s)
        self.check_chart_ref()
        self.requested_values()  # refused before the repository is touched
        self.ensure_repo()
        meta = self.helm.chart_metadata(params["chart_ref"], params["chart_version"])
        wanted_version = params["chart_version"] or meta["version"]
        entry = self.release_entry()
        info = release_info(entry, meta["name"])
        self.check_upgrade_path(info, wanted_version)
        before = self.helm.values(params["release_name"], params["namespace"]) if entry is not None else {}
        override = upgrade_name_override(str(info.get("chart") or ""), before or {}, meta["name"]) if info else ""
        requested = self.requested_values(wanted_version, override)
        values = self.with_pull_secrets(k8s, self.mirrored(requested))
        result["kubelet_plugin_selector"] = selector(str(values.get("nameOverride") or meta["name"]))
        result.update(release=info, release_values=self.redacted(values))
        result["action"] = action = release_action(entry, meta["name"], wanted_version, before, values)
        backends.label_nodes(k8s)
        self.apply_cluster_objects(k8s, [], None)
        self.apply_pull_secret(k8s)
        self.mod.changes.record("helm release %s" % params["release_name"], release_state(info, self.redacted(before)),
                                {"chart": meta["name"], "chart_version": wanted_version, "values": self.redacted(values)},
                                changed=action != "unchanged")
        if action != "unchanged" and not self.mod.check_mode:
            self.helm.upgrade_install(params["release_name"], params["chart_ref"], params["namespace"], values,
                                      params["chart_version"], self.mod.ansible.tmpdir)
            result["release"] = release_info(self.helm.release(params["namespace"], params["release_name"]), meta["name"])
        if params["wait"] and not self.mod.check_mode:
            backends.wait_nodes(k8s)

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The steps of the gpu_operator module: the Helm release and the cluster objects around it.

I/O through the helm runner and the K8sClient the module hands over; the rules are pure
(``_gpu_operator``, ``_operator_release``). Secrets in values are masked before any output
(``mask_secrets``) and shown redacted in the result and the diff.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Optional, Tuple

from ansible.module_utils.common.process import get_bin_path

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import (
    ClusterObjectError, NotReady, apply_cluster_objects, build_values, cluster_policy_state, crds_from_text,
    pending_problem, release_action, release_info, release_state, values_changes, wait_operator_ready)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import Helm, HelmCommand, find_helm, helm_environment, repo_of
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm_release import (
    ReleaseRecordError, release_from_records, release_selector)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import (
    docker_config_secret, exporter_tag, full_chart_values, merge, mirror_values, per_pod_metrics_env, per_pod_metrics_warnings,
    proxy_env, pull_secret_values, registry_host, registry_problems, secret_forms)
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import secret_owner_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import toleration_values
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_release import (
    carry_forward, chart_version_problems, downgrade_problem, pending_recovery, placeholder_configmap, redact,
    secret_strings, upgrade_problem)


def mask_secrets(mod: ClusterModule) -> None:
    """Every secret-looking value of O(values) becomes an Ansible no_log value: masked in the
    result, its invocation and the module's own log lines."""
    mod.ansible.no_log_values.update(secret_strings(mod.params["values"], mod.params["redact_keys"]))
    # a proxy URL with user:password@ is a secret too
    mod.ansible.no_log_values.update(str(v) for v in (mod.params.get("proxy") or {}).values() if v and "@" in str(v))
    credentials = mod.params.get("registry_credentials")
    if credentials:
        # an empty form would mask every character boundary of all later output
        mod.ansible.no_log_values.update(form for form in secret_forms(credentials["username"] or "",
                                                                       credentials["password"] or "")
                                         if credentials["password"] and form)


def _without(values: Dict[str, Any], paths: List[str]) -> Dict[str, Any]:
    """``values`` without the carried dotted ``paths`` and the maps they leave empty (carried
    fields never decide an upgrade on their own)."""
    result = copy.deepcopy(values)
    for dotted in paths:
        keys = dotted.split(".")
        trail = [result]
        for key in keys[:-1]:
            child = trail[-1].get(key)
            if not isinstance(child, dict):
                break
            trail.append(child)
        else:
            trail[-1].pop(keys[-1], None)
            for depth in range(len(trail) - 1, 0, -1):
                if not trail[depth]:
                    trail[depth - 1].pop(keys[depth - 1], None)
    return result


class GpuOperator:
    """The release (helm) and the cluster objects around it (namespace, CRDs, ConfigMap, readiness)."""

    def __init__(self, mod: ClusterModule) -> None:
        self.mod = mod
        self.params = params = mod.params
        self._chart_values: Optional[Dict[str, Any]] = None
        self._stored_values: Optional[Dict[str, Any]] = None  # `helm get values`, read from the records
        self._subcharts: Dict[str, Any] = {}
        env = helm_environment(params["host"], params["api_key"], params["ca_cert"], params["validate_certs"])
        self.helm = Helm(HelmCommand(find_helm(params["helm_binary"], get_bin_path), params["kubeconfig"],
                                     params["context"]),
                         lambda argv, data: mod.ansible.run_command(argv, data=data, environ_update=env,
                                                                    binary_data=False))

    def redacted(self, values: Any) -> Any:
        return redact(values, self.params["redact_keys"])

    def absent(self) -> None:
        entry = self.helm.release(self.params["namespace"], self.params["release_name"])
        self.mod.result["release"] = release_info(entry)
        if entry is None:
            self.mod.result["action"] = "absent"
            return
        self.mod.result["action"] = "uninstalled"
        self.mod.changes.record("helm release %s" % self.params["release_name"],
                                {"release": self.mod.result["release"]}, {})
        if not self.mod.check_mode:  # helm has no dry run that stores nothing
            self.helm.call(self.helm.command.uninstall(self.params["release_name"], self.params["namespace"]),
                           "uninstall")

    def requested_values(self) -> Dict[str, Any]:
        p = self.params
        for problem in chart_version_problems(p["chart_version"]):
            self.mod.fail(problem)
        problems = registry_problems(p["registry"])
        credentials = p["registry_credentials"] or {}
        if credentials and not (credentials.get("server") or p["registry"]):
            problems.append("registry_credentials: give server (the registry host) or registry")
        problems += registry_problems(credentials.get("server"), "registry_credentials.server")
        if problems:
            self.mod.fail("invalid registry: %s" % "; ".join(problems), problems=problems)
        with self.mod.failing_on("invalid values"):
            values = build_values(p["values"], p["mig_strategy"], p["mig_manager_enabled"], p["mig_manager_config"],
                                  p["driver_enabled"], p["toolkit_enabled"], p["device_plugin_config"],
                                  mig_manager_default_config=p["mig_manager_default_config"])
            wanted = any((p["proxy"] or {}).values())
            values = merge(values, {"driver": {"env": proxy_env(values, p["proxy"])}}) if wanted else values
        return values

    def stored_release(self, k8s: K8sClient) -> Optional[Tuple[Optional[Dict[str, Any]], Dict[str, Any]]]:
        """The release as `helm list` shows it and its values as `helm get values` prints them, from
        the release records (one API request instead of two helm runs); None when the records
        cannot be read (another storage driver, no right to list Secrets): then helm is asked."""
        if os.environ.get("HELM_DRIVER", "secret").lower() not in ("", "secret", "secrets"):
            return None
        p = self.params
        try:
            secrets = k8s.list("Secret", p["namespace"], label_selector=release_selector(p["release_name"]))
            return release_from_records(secrets, p["release_name"], p["namespace"])
        except (K8sError, ReleaseRecordError) as exc:
            self.mod.log("release records not readable (%s); asking helm" % exc)
            return None

    def release_entry(self, k8s: Optional[K8sClient] = None) -> Optional[Dict[str, Any]]:
        """The release; an interrupted one is rolled back first when O(recover_pending) allows it."""
        p = self.params
        stored = self.stored_release(k8s) if k8s is not None else None
        entry, self._stored_values = stored if stored is not None else (self.helm.release(p["namespace"], p["release_name"]), None)
        problem = pending_problem(entry, p["release_name"])
        if not problem:
            return entry
        step = pending_recovery((entry or {}).get("status"))
        if not p["recover_pending"] or step is None:
            self.mod.fail("%s; to recover, set recover_pending=true (role: gpu_operator_recover_pending) to roll back "
                          "to the last deployed revision and retry, or run: helm rollback %s -n %s"
                          % (problem, p["release_name"], p["namespace"]), release=release_info(entry))
        self.mod.result["recovered"] = {"status": entry.get("status"), "step": step}
        self.mod.changes.mark()
        if self.mod.check_mode:
            return entry
        self.helm.call(self.helm.command.rollback(p["release_name"], p["namespace"]), "rollback")
        self._stored_values = None
        return self.helm.release(p["namespace"], p["release_name"])

    def check_upgrade_path(self, info: Dict[str, Any], wanted_version: str) -> None:
        """A step back (unless allow_downgrade) or over a release line (unless allow_unsupported_upgrade) is
        refused, in check mode too, before anything is written."""
        if not info or not info.get("chart_version"):
            return
        try:
            problem = None if self.params["allow_downgrade"] else downgrade_problem(info["chart_version"], wanted_version)
            if problem is None and not self.params["allow_unsupported_upgrade"]:
                problem = upgrade_problem(info["chart_version"], wanted_version)
        except ValueError as exc:
            self.mod.fail("cannot check the upgrade path: %s" % exc)
        if problem:
            self.mod.fail(problem, release=info)

    def live_policy(self, k8s: K8sClient) -> Optional[Dict[str, Any]]:
        try:
            return k8s.get("ClusterPolicy", self.params["cluster_policy_name"])
        except K8sError:  # no CRD yet: a fresh cluster
            return None

    def present(self) -> None:
        params, result = self.params, self.mod.result
        k8s = self.mod.k8s  # connected first: a bad kubeconfig fails before helm changes anything
        requested = self.requested_values()
        self.ensure_repo()
        meta = self.helm.chart_metadata(params["chart_ref"], params["chart_version"])
        wanted_version = params["chart_version"] or meta["version"]
        requested = self.with_pull_secrets(k8s, self.with_tolerations(self.with_metrics(self.mirrored(requested))))
        crds = self.chart_crds() if params["apply_crds"] else []
        entry = self.release_entry(k8s)
        info = release_info(entry, meta["name"])
        self.check_upgrade_path(info, wanted_version)
        values, carried = carry_forward(requested, self.live_policy(k8s))
        before_values = {} if entry is None else self._stored_values if self._stored_values is not None else \
            self.helm.values(params["release_name"], params["namespace"])
        result.update(release=info, release_values=self.redacted(values), carried_forward=carried,
                      values_changes=values_changes(self.redacted(before_values), self.redacted(values)))
        result["action"] = action = release_action(entry, meta["name"], wanted_version,
                                                   _without(before_values, carried), _without(values, carried))
        self.apply_cluster_objects(k8s, crds, values if action != "unchanged" else None)
        self.apply_pull_secret(k8s)
        self.mod.changes.record("helm release %s" % params["release_name"],
                                release_state(info, self.redacted(before_values)),
                                {"chart": meta["name"], "chart_version": wanted_version, "values": self.redacted(values)},
                                changed=action != "unchanged")
        if action != "unchanged" and not self.mod.check_mode:
            self.helm.upgrade_install(params["release_name"], params["chart_ref"], params["namespace"], values,
                                      params["chart_version"], self.mod.ansible.tmpdir)
            result["release"] = release_info(self.helm.release(params["namespace"], params["release_name"]),
                                             meta["name"])
        if params["wait"] and not self.mod.check_mode:
            self.wait_ready(k8s)
            return
        try:
            result["cluster_policy_state"] = cluster_policy_state(k8s.get("ClusterPolicy", params["cluster_policy_name"]))
        except K8sError:
            result["cluster_policy_state"] = None

    def chart_values(self) -> Dict[str, Any]:
        """The chart's default values with its subcharts' (where its images and pull secrets are), read once."""
        if self._chart_values is None:
            with self.mod.failing_on():
                ref, version = self.params["chart_ref"], self.params["chart_version"]
                self._subcharts = self.helm.subcharts(ref, version)
                self._chart_values = full_chart_values(self.helm.values_text(ref, version), self._subcharts)
        return self._chart_values

    def mirrored(self, requested: Dict[str, Any]) -> Dict[str, Any]:
        """``requested`` with every image of the chart pointed at O(registry) (docs/reference/specs.md §17.1)."""
        if not self.params["registry"]:
            return requested
        with self.mod.failing_on("registry %s" % self.params["registry"]):
            mirrors = mirror_values(self.chart_values(), requested, self.params["registry"])
        return merge(requested, mirrors)

    def with_metrics(self, requested: Dict[str, Any]) -> Dict[str, Any]:
        """``requested`` with the DCGM exporter's per-pod attribution when O(per_pod_metrics) (§17.5)."""
        if not self.params["per_pod_metrics"]:
            return requested
        with self.mod.failing_on():
            env = per_pod_metrics_env(self.chart_values(), requested)
        for warning in per_pod_metrics_warnings(exporter_tag(self.chart_values(), requested)):
            self.mod.warn(warning)
        return merge(requested, {"dcgmExporter": {"env": env}})

    def with_tolerations(self, requested: Dict[str, Any]) -> Dict[str, Any]:
        """``requested`` with O(tolerations) added to the operand DaemonSets' (and NFD workers') tolerations."""
        if not self.params["tolerations"]:
            return requested
        return merge(requested, toleration_values(self.chart_values(), requested, self.params["tolerations"]))

    def with_pull_secrets(self, k8s: K8sClient, requested: Dict[str, Any]) -> Dict[str, Any]:
        """``requested`` with O(image_pull_secrets) (and the credentials' Secret) in every ``imagePullSecrets``
        of the chart; a named Secret missing from the namespace is refused (docs/reference/specs.md §17.2)."""
        names, credentials, namespace = list(self.params["image_pull_secrets"]), self.params["registry_credentials"], \
            self.params["namespace"]
        missing = [name for name in names if k8s.get("Secret", name, namespace) is None]
        if missing:
            self.mod.fail("image_pull_secrets: no Secret %s in namespace %s; create it first (kubectl create secret "
                          "docker-registry) or give registry_credentials" % (", ".join(missing), namespace),
                          problems=["Secret %s/%s not found" % (namespace, name) for name in missing])
        if credentials:  # only a Secret the collection created is ever written (docs/reliability.md)
            problem = secret_owner_problem(k8s.get("Secret", credentials["name"], namespace), namespace,
                                           credentials["name"])
            if problem:
                self.mod.fail(problem)
        names += [credentials["name"]] if credentials and credentials["name"] not in names else []
        if not names:
            return requested
        return merge(requested, pull_secret_values(self.chart_values(), names, subcharts=list(self._subcharts)))

    def apply_pull_secret(self, k8s: K8sClient) -> None:
        """The Secret from O(registry_credentials); its content never reaches the result or the diff."""
        credentials = self.params["registry_credentials"]
        if not credentials:
            return
        server = credentials["server"] or registry_host(self.params["registry"])
        body = docker_config_secret(credentials["name"], self.params["namespace"], server, credentials["username"],
                                    credentials["password"])
        try:
            outcome = k8s.apply(body)
        except K8sError as exc:
            self.mod.fail("registry_credentials: cannot write Secret %s: %s" % (credentials["name"], exc))
        self.mod.result["pull_secret"] = {"name": credentials["name"], "server": server, "action": outcome.action}
        self.mod.changes.record("secret %s" % credentials["name"], {"data": "<redacted>"} if outcome.before else {},
                                {"data": "<redacted>"}, changed=outcome.changed)

    def ensure_repo(self) -> None:
        chart_ref, url = self.params["chart_ref"], self.params["repo_url"]
        if not url:
            return
        name = repo_of(chart_ref)
        if name is None:
            self.mod.fail("repo_url is set but chart_ref %r does not name a repository chart (repo/chart)" % chart_ref)
        if not self.helm.sync_repository(name, url, self.params["repo_username"], self.params["repo_password"],
                                         dry_run=self.mod.check_mode):
            self.mod.warn("helm repository %s (%s) would be added; chart details come from the current cache"
                          % (name, url))

    def chart_crds(self) -> List[Dict[str, Any]]:
        text = self.helm.crds_text(self.params["chart_ref"], self.params["chart_version"])
        try:
            return crds_from_text(text)
        except ValueError as exc:
            self.mod.fail("cannot read the chart's CRDs: %s" % exc)

    def apply_cluster_objects(self, k8s: K8sClient, crds: List[Dict[str, Any]], values: Optional[Dict[str, Any]]) -> None:
        """Namespace (PSA label), CRDs and the device-plugin ConfigMap the values name, so that the
        chart and the plugin find them (``values`` None: the release is not touched)."""
        try:
            namespace_action, report, changed = apply_cluster_objects(
                k8s, self.params["namespace"] if self.params["create_namespace"] else None, crds)
            configmap = placeholder_configmap(values or {}, self.params["namespace"])
            if configmap is not None and k8s.get("ConfigMap", configmap["metadata"]["name"],
                                                 self.params["namespace"]) is None:
                k8s.create(configmap)
                self.mod.result["configmap_created"] = configmap["metadata"]["name"]
                changed = True
        except (ClusterObjectError, K8sError) as exc:
            self.mod.fail(str(exc))
        if namespace_action is not None:
            self.mod.result["namespace_action"] = namespace_action
        if changed:
            self.mod.changes.mark()
        self.mod.result["crds"] = report

    def wait_ready(self, k8s: K8sClient) -> None:
        try:
            state, waited = wait_operator_ready(k8s, self.params["cluster_policy_name"], self.params["namespace"],
                                                self.params["wait_timeout"], self.params["wait_interval"], self.mod.log)
        except NotReady as exc:
            self.mod.fail(str(exc), diagnosis=exc.diagnosis, cluster_policy_state=exc.state, waited=exc.waited)
        self.mod.result.update(cluster_policy_state=state, waited=waited)


__all__ = ["GpuOperator", "mask_secrets"]

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_operator
short_description: Install, upgrade or remove the NVIDIA GPU Operator Helm release
version_added: 0.1.0
description:
  - Manages the NVIDIA GPU Operator as a Helm release with a pinned chart version.
  - Creates the namespace with the Pod Security label C(pod-security.kubernetes.io/enforce=privileged).
  - Applies the chart's CustomResourceDefinitions before installing or upgrading, because Helm
    never upgrades CRDs itself.
  - Values are built from typed options (MIG strategy, MIG manager, driver, device-plugin config)
    plus free-form O(values), written to a private temporary file (mode 0600, removed afterwards)
    and passed with C(-f); no value and no secret ever appears on a command line.
  - Idempotent. The release is upgraded only when the deployed chart version, the user-supplied
    values or the release status differ from what is requested.
  - Waits until the ClusterPolicy reports C(status.state=ready) and the operand DaemonSets in the
    namespace are rolled out (latest generation observed, all pods updated and ready), so that a
    C(ready) left over from before an upgrade is not taken for the new state. On timeout, the
    error lists the operand DaemonSets and pods that are not ready and the nodes they run on.
  - Runs where helm and the C(kubernetes) Python library are installed, usually the controller
    (delegate the task to C(localhost)).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the namespace and the CRDs are sent as server-side dry runs
        (C(dryRun=All)). Helm does not install, upgrade, uninstall or change its repositories, and
        nothing is waited for. The result shows the planned action and the values diff.
options:
  state:
    description:
      - V(present) installs or upgrades the release; V(absent) uninstalls it.
      - Uninstalling leaves the CRDs in place (Helm never deletes CRDs); remove them yourself if
        you really want to.
    type: str
    choices: [present, absent]
    default: present
  release_name:
    description: Helm release name.
    type: str
    default: gpu-operator
  namespace:
    description: Namespace of the release and of the operator's operands.
    type: str
    default: gpu-operator
  create_namespace:
    description:
      - Create the namespace if it is missing and make sure it has the Pod Security label
        C(pod-security.kubernetes.io/enforce=privileged) (the operands are privileged).
    type: bool
    default: true
  chart_ref:
    description:
      - Chart to install. A repository chart (V(nvidia/gpu-operator)), an C(oci://) reference, or
        the path of a local chart directory or archive.
    type: str
    default: nvidia/gpu-operator
  chart_version:
    description:
      - Chart version to install, for example V(v25.10.1).
      - Required for repository and C(oci://) charts, so that an upgrade is always deliberate.
      - For a local chart it is optional; if given, it must equal the chart's own version.
    type: str
  repo_url:
    description:
      - URL of the Helm repository named by the first part of O(chart_ref), for example
        U(https://helm.ngc.nvidia.com/nvidia). The repository is added (or its URL corrected)
        and refreshed. Leave it unset if the repository is already configured.
    type: str
  repo_username:
    description: User name for the Helm repository.
    type: str
  repo_password:
    description: Password for the Helm repository; passed to helm on standard input.
    type: str
  values:
    description:
      - Free-form Helm values. The typed options below are merged into them; a typed option that
        contradicts a value set here is an error.
    type: dict
    default: {}
  mig_strategy:
    description: Value C(mig.strategy). V(mixed) is needed to time-slice C(nvidia.com/mig-*) resources.
    type: str
    choices: [none, single, mixed]
  mig_manager_enabled:
    description:
      - Value C(migManager.enabled). Set it to V(false) when the hosts manage MIG themselves
        (C(gpufleet_mig_backend=host)), so that the operator's MIG manager does not fight them.
    type: bool
  mig_manager_config:
    description: Value C(migManager.config.name), the ConfigMap with the mig-parted configs.
    type: str
  driver_enabled:
    description: Value C(driver.enabled). Set it to V(false) for hosts with a pre-installed driver.
    type: bool
  toolkit_enabled:
    description: Value C(toolkit.enabled).
    type: bool
  device_plugin_config:
    description: Values C(devicePlugin.config.name) and C(devicePlugin.config.default).
    type: dict
    suboptions:
      name:
        description: Name of the device-plugin ConfigMap.
        type: str
      default:
        description: Key of that ConfigMap used for nodes without the C(nvidia.com/device-plugin.config) label.
        type: str
  apply_crds:
    description: Apply the chart's CRDs (from C(helm show crds)) before installing or upgrading.
    type: bool
    default: true
  cluster_policy_name:
    description: Name of the ClusterPolicy the chart creates.
    type: str
    default: cluster-policy
  wait:
    description: Wait until the ClusterPolicy state is C(ready).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the ClusterPolicy.
    type: int
    default: 900
  wait_interval:
    description: Seconds between two readiness checks.
    type: float
    default: 5
  helm_binary:
    description: The helm executable (3.12 or newer, or 4.x). A name is looked up in E(PATH).
    type: str
    default: helm
requirements:
  - helm 3.12 or newer (helm 4 works too)
notes:
  - The ClusterPolicy is managed by the chart. Other modules of this collection (M(gpufleet.sharing.gpu_sharing))
    change only the fields they own; give this module the same O(device_plugin_config) so that an
    upgrade does not undo them.
seealso:
  - module: gpufleet.sharing.node_maintenance
  - name: GPU Operator installation
    description: NVIDIA's getting started guide.
    link: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html
"""

EXAMPLES = r"""
- name: Install the GPU Operator, host-managed MIG, pre-installed drivers
  gpufleet.sharing.gpu_operator:
    chart_ref: nvidia/gpu-operator
    chart_version: v25.10.1
    repo_url: https://helm.ngc.nvidia.com/nvidia
    mig_strategy: mixed
    mig_manager_enabled: false
    driver_enabled: false
    device_plugin_config:
      name: gpufleet-device-plugin
      default: default
  delegate_to: localhost

- name: Operator-managed MIG with our own mig-parted ConfigMap
  gpufleet.sharing.gpu_operator:
    chart_version: v25.10.1
    mig_strategy: single
    mig_manager_enabled: true
    mig_manager_config: gpufleet-mig-parted-config
    kubeconfig: /etc/gpufleet/kubeconfig
    wait_timeout: 1200
  delegate_to: localhost

- name: Remove the release (CRDs stay)
  gpufleet.sharing.gpu_operator:
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
action:
  description: What was done (or would be done in check mode).
  returned: always
  type: str
  sample: upgraded
  choices: [installed, upgraded, unchanged, uninstalled, absent]
release:
  description: The Helm release after the run (before it, in check mode); empty when there is none.
  returned: always
  type: dict
  sample:
    name: gpu-operator
    namespace: gpu-operator
    revision: 3
    status: deployed
    chart: gpu-operator
    chart_version: v25.10.1
    app_version: v25.10.1
values:
  description: The user-supplied values requested for the release.
  returned: when O(state=present)
  type: dict
  sample: {mig: {strategy: mixed}, migManager: {enabled: false}, driver: {enabled: false}}
values_changes:
  description: Value paths that change, one line each.
  returned: when O(state=present)
  type: list
  elements: str
  sample: ["mig.strategy: 'single' -> 'mixed'"]
crds:
  description: The chart's CRDs and what was done to each.
  returned: when O(state=present)
  type: list
  elements: dict
  sample: [{name: clusterpolicies.nvidia.com, action: unchanged}]
namespace_action:
  description: What was done to the namespace.
  returned: when O(state=present)
  type: str
  sample: unchanged
cluster_policy_state:
  description: C(status.state) of the ClusterPolicy at the end.
  returned: when O(state=present)
  type: str
  sample: ready
waited:
  description: Seconds spent waiting for the ClusterPolicy.
  returned: when O(state=present)
  type: float
  sample: 42.0
helm_version:
  description: Version of the helm binary.
  returned: always
  type: str
  sample: 3.14.2
diagnosis:
  description: Why the ClusterPolicy is not ready (state, DaemonSets short of pods, pods not ready and their nodes).
  returned: on a readiness timeout
  type: list
  elements: str
"""

from typing import Any, Dict, List

from ansible.module_utils.common.process import get_bin_path

from ansible_collections.gpufleet.sharing.plugins.module_utils._gpu_operator import (
    ClusterObjectError, NotReady, ValuesError, apply_cluster_objects, build_values, cluster_policy_state, crds_from_text, pending_problem,
    release_action, release_info, release_state, values_changes, wait_operator_ready, wait_problems)
from ansible_collections.gpufleet.sharing.plugins.module_utils._helm import (
    Helm, HelmCommand, HelmError, HelmFailed, find_helm, helm_environment, repo_of)
from ansible_collections.gpufleet.sharing.plugins.module_utils._k8s import K8sClient, K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils._cluster_module import ClusterModule

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    release_name=dict(type="str", default="gpu-operator"),
    namespace=dict(type="str", default="gpu-operator"),
    create_namespace=dict(type="bool", default=True),
    chart_ref=dict(type="str", default="nvidia/gpu-operator"),
    chart_version=dict(type="str"),
    repo_url=dict(type="str"),
    repo_username=dict(type="str"),
    repo_password=dict(type="str", no_log=True),
    values=dict(type="dict", default={}),
    mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
    mig_manager_enabled=dict(type="bool"),
    mig_manager_config=dict(type="str"),
    driver_enabled=dict(type="bool"),
    toolkit_enabled=dict(type="bool"),
    device_plugin_config=dict(type="dict", options=dict(name=dict(type="str"), default=dict(type="str"))),
    apply_crds=dict(type="bool", default=True),
    cluster_policy_name=dict(type="str", default="cluster-policy"),
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=900),
    wait_interval=dict(type="float", default=5),
    helm_binary=dict(type="str", default="helm"),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC, required_by={"repo_password": "repo_username"}).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    problems = wait_problems(params["wait_timeout"], params["wait_interval"])
    if problems:
        mod.fail(problems[0])
    try:
        operator = GpuOperator(mod)
        mod.result["helm_version"] = ".".join(str(part) for part in operator.helm.version())
        if params["state"] == "absent":
            operator.absent()
        else:
            operator.present()
    except HelmFailed as exc:
        # argv holds no secret (see _helm); the environment, which may, is not echoed
        mod.fail(str(exc), cmd=exc.argv, rc=exc.rc)
    except HelmError as exc:
        mod.fail(str(exc))


class GpuOperator:
    """The release (helm) and the cluster objects around it (namespace, CRDs, readiness)."""

    def __init__(self, mod: ClusterModule) -> None:
        self.mod = mod
        self.params = params = mod.params
        env = helm_environment(params["host"], params["api_key"], params["ca_cert"], params["validate_certs"])
        self.helm = Helm(HelmCommand(find_helm(params["helm_binary"], get_bin_path), params["kubeconfig"],
                                     params["context"]),
                         lambda argv, data: mod.ansible.run_command(argv, data=data, environ_update=env,
                                                                    binary_data=False))

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

    def present(self) -> None:
        params, result = self.params, self.mod.result
        k8s = self.mod.k8s  # connected first: a bad kubeconfig fails before helm changes anything
        try:
            values = build_values(params["values"], params["mig_strategy"], params["mig_manager_enabled"],
                                  params["mig_manager_config"], params["driver_enabled"], params["toolkit_enabled"],
                                  params["device_plugin_config"])
        except ValuesError as exc:
            self.mod.fail("invalid values: %s" % exc, problems=exc.problems)
        self.ensure_repo()
        meta = self.helm.chart_metadata(params["chart_ref"], params["chart_version"])
        wanted_version = params["chart_version"] or meta["version"]
        crds = self.chart_crds() if params["apply_crds"] else []
        entry = self.helm.release(params["namespace"], params["release_name"])
        before_values = self.helm.values(params["release_name"], params["namespace"]) if entry is not None else {}
        info = release_info(entry, meta["name"])
        result.update(release=info, values=values, values_changes=values_changes(before_values, values))
        problem = pending_problem(entry, params["release_name"])
        if problem:
            self.mod.fail(problem)
        result["action"] = action = release_action(entry, meta["name"], wanted_version, before_values, values)
        self.apply_cluster_objects(k8s, crds)
        self.mod.changes.record("helm release %s" % params["release_name"], release_state(info, before_values),
                                {"chart": meta["name"], "chart_version": wanted_version, "values": values},
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

    def apply_cluster_objects(self, k8s: K8sClient, crds: List[Dict[str, Any]]) -> None:
        """Namespace (PSA label) and CRDs first, so that the chart finds them."""
        try:
            namespace_action, report, changed = apply_cluster_objects(
                k8s, self.params["namespace"] if self.params["create_namespace"] else None, crds)
        except ClusterObjectError as exc:
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


if __name__ == "__main__":
    main()

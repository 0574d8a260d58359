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
attributes:
  check_mode:
    support: full
    description: >-
      Nothing is installed, upgraded or removed. CRDs are sent with server-side C(dryRun=All).
      The result shows the planned action and the values diff.
  diff_mode:
    support: full
    description: >-
      Shows the chart version and the user-supplied values, before and after.
  platform:
    platforms: posix
    support: full
    description: Runs on the controller (or any host with the Python C(kubernetes) client) and talks to the API server.
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

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ..module_utils._k8s import K8S_AUTH_ARGSPEC, K8sError, K8sTimeout, client_from_module
from ..module_utils._helm import (
    HelmCommand, HelmError, check_helm_version, helm_environment, is_local_chart, parse_chart_metadata,
    parse_helm_version, parse_release_list, parse_values, repo_of, same_version, split_chart_field)
from ..module_utils._gpu_operator import (
    PSA_LABELS, ValuesError, build_values, cluster_policy_state, crd_documents, daemonsets_not_rolled_out,
    diagnose_operands, values_changes)

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    HAS_YAML = False


class GpuOperator(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.helm = HelmCommand(self._helm_path(), module.params["kubeconfig"], module.params["context"])
        self.env = helm_environment(module.params["host"], module.params["api_key"], module.params["ca_cert"],
                                    module.params["validate_certs"])
        self.result = {"changed": False}

    def _helm_path(self):
        binary = self.module.params["helm_binary"]
        if os.path.sep in binary:
            if not os.access(binary, os.X_OK):
                self.module.fail_json(msg="helm_binary %s is not an executable file" % binary)
            return binary
        return self.module.get_bin_path(binary, required=True)

    def run(self, argv, what, data=None, ok_rcs=(0,)):
        rc, out, err = self.module.run_command(argv, data=data, environ_update=self.env, binary_data=False)
        if rc not in ok_rcs:
            # argv holds no secret (see _helm); the environment, which may, is not echoed
            self.module.fail_json(msg="helm %s failed (rc=%d): %s" % (what, rc, (err or out).strip()),
                                  cmd=argv, rc=rc, **self.result)
        return rc, out, err

    def fail(self, msg, **extra):
        result = dict(self.result)
        result.update(extra)
        self.module.fail_json(msg=msg, **result)

    # -- steps -----------------------------------------------------------------------------------

    def check_version(self):
        _rc, out, _err = self.run(self.helm.version(), "version")
        try:
            version = parse_helm_version(out)
            check_helm_version(version)
        except HelmError as exc:
            self.fail(str(exc))
        self.result["helm_version"] = ".".join(str(part) for part in version)

    def current_release(self):
        _rc, out, _err = self.run(self.helm.list_releases(self.params["namespace"], self.params["release_name"]),
                                  "list")
        try:
            return parse_release_list(out, self.params["release_name"])
        except HelmError as exc:
            self.fail(str(exc))

    def release_info(self, entry, chart_name=None):
        if not entry:
            return {}
        try:
            name, version = split_chart_field(entry.get("chart", ""), chart_name)
        except HelmError:
            name, version = entry.get("chart"), None
        revision = entry.get("revision")
        try:
            revision = int(revision)
        except (TypeError, ValueError):
            pass
        return {"name": entry.get("name"), "namespace": entry.get("namespace"), "revision": revision,
                "status": entry.get("status"), "chart": name, "chart_version": version,
                "app_version": entry.get("app_version")}

    def ensure_repo(self):
        chart_ref, url = self.params["chart_ref"], self.params["repo_url"]
        if not url:
            return
        name = repo_of(chart_ref)
        if name is None:
            self.fail("repo_url is set but chart_ref %r does not name a repository chart (repo/chart)" % chart_ref)
        _rc, out, _err = self.run(self.helm.repo_list(), "repo list", ok_rcs=(0, 1))  # rc 1: no repositories
        try:
            repos = json.loads(out) if out.strip().startswith("[") else []
        except ValueError:
            repos = []
        configured = dict((r.get("name"), r.get("url")) for r in repos if isinstance(r, dict))
        if configured.get(name) != url:
            if self.module.check_mode:
                self.result.setdefault("warnings_", []).append(
                    "helm repository %s (%s) would be added; chart details come from the current cache" % (name, url))
                return
            password = self.params["repo_password"]
            self.run(self.helm.repo_add(name, url, self.params["repo_username"], with_password=bool(password)),
                     "repo add", data=password)
        if not self.module.check_mode:
            self.run(self.helm.repo_update([name]), "repo update")

    def chart_metadata(self):
        chart_ref, version = self.params["chart_ref"], self.params["chart_version"]
        if not is_local_chart(chart_ref) and not version:
            self.fail("chart_version is required for the repository chart %s: pin the version you mean "
                      "(for example v25.10.1)" % chart_ref)
        if is_local_chart(chart_ref) and not os.path.exists(chart_ref):
            self.fail("chart_ref %s: no such chart directory or archive" % chart_ref)
        _rc, out, _err = self.run(self.helm.show_chart(chart_ref, version), "show chart")
        try:
            meta = parse_chart_metadata(out)
        except HelmError as exc:
            self.fail(str(exc))
        if version and not same_version(version, meta["version"]):
            self.fail("chart_version %s does not match the chart %s, which is version %s"
                      % (version, chart_ref, meta["version"]))
        return meta

    def chart_crds(self):
        _rc, out, _err = self.run(self.helm.show_crds(self.params["chart_ref"], self.params["chart_version"]),
                                  "show crds")
        try:
            return crd_documents(list(yaml.safe_load_all(out)))
        except (yaml.YAMLError, ValueError) as exc:
            self.fail("cannot read the chart's CRDs: %s" % exc)

    def wait_ready(self, k8s):
        name = self.params["cluster_policy_name"]
        seen = []

        def probe():
            policy = k8s.get("ClusterPolicy", name)
            state = cluster_policy_state(policy)
            if state != "ready":
                return False, state or ("absent" if policy is None else "no status")
            rolling = daemonsets_not_rolled_out(k8s.list("DaemonSet", namespace=self.params["namespace"]))
            return not rolling, "ready" if not rolling else "ready, but " + "; ".join(rolling)

        def progress(what, elapsed, detail):
            if not seen or seen[-1] != detail:
                seen.append(detail)
                self.module.log("gpu_operator: waiting for %s: %s after %.0fs" % (what, detail, elapsed))

        start = k8s.now()
        try:
            state = k8s.wait_for("ClusterPolicy %s to be ready" % name, probe, timeout=self.params["wait_timeout"],
                                 interval=self.params["wait_interval"], progress=progress)
        except K8sTimeout as exc:
            diagnosis = self.diagnose(k8s)
            if str(exc.detail).startswith("ready, but "):
                diagnosis.extend(str(exc.detail)[len("ready, but "):].split("; "))
            self.fail("%s. Not ready: %s" % (exc, " | ".join(diagnosis[1:]) or diagnosis[0]),
                      diagnosis=diagnosis, cluster_policy_state=exc.detail, waited=round(exc.elapsed, 1))
        self.result["cluster_policy_state"] = state
        self.result["waited"] = round(k8s.now() - start, 1)

    def diagnose(self, k8s):
        namespace = self.params["namespace"]
        try:
            policy = k8s.get("ClusterPolicy", self.params["cluster_policy_name"])
            daemonsets = k8s.list("DaemonSet", namespace=namespace)
            pods = k8s.list("Pod", namespace=namespace)
        except K8sError as exc:
            return ["cannot collect the diagnosis: %s" % exc]
        return diagnose_operands(policy, daemonsets, pods)

    # -- states ----------------------------------------------------------------------------------

    def absent(self):
        entry = self.current_release()
        self.result["release"] = self.release_info(entry)
        if entry is None:
            self.result["action"] = "absent"
            return
        self.result["changed"] = True
        self.result["action"] = "uninstalled"
        if self.module._diff:
            self.result["diff"] = {"before": {"release": self.result["release"]}, "after": {}}
        if not self.module.check_mode:
            self.run(self.helm.uninstall(self.params["release_name"], self.params["namespace"]), "uninstall")

    def present(self, k8s):
        params = self.params
        try:
            values = build_values(params["values"], params["mig_strategy"], params["mig_manager_enabled"],
                                  params["mig_manager_config"], params["driver_enabled"], params["toolkit_enabled"],
                                  params["device_plugin_config"])
        except ValuesError as exc:
            self.fail("invalid values: %s" % exc, problems=exc.problems)
        self.ensure_repo()
        meta = self.chart_metadata()
        wanted_version = params["chart_version"] or meta["version"]
        crds = self.chart_crds() if params["apply_crds"] else []

        entry = self.current_release()
        before_values = {}
        if entry is not None:
            _rc, out, _err = self.run(self.helm.get_values(params["release_name"], params["namespace"]),
                                      "get values")
            try:
                before_values = parse_values(out)
            except HelmError as exc:
                self.fail(str(exc))
        info = self.release_info(entry, meta["name"])
        self.result["release"] = info
        self.result["values"] = values
        self.result["values_changes"] = values_changes(before_values, values)
        if entry is not None and str(entry.get("status", "")).startswith("pending"):
            self.fail("release %s is %s: another helm operation is in progress or was interrupted; "
                      "resolve it (helm rollback or wait) before running again" % (params["release_name"],
                                                                                   entry.get("status")))
        if entry is None:
            action = "installed"
        elif (info.get("chart") != meta["name"] or not same_version(info.get("chart_version"), wanted_version)
              or before_values != values or entry.get("status") != "deployed"):
            action = "upgraded"
        else:
            action = "unchanged"
        self.result["action"] = action
        if self.module._diff:
            self.result["diff"] = {
                "before": {"chart": info.get("chart"), "chart_version": info.get("chart_version"),
                           "values": before_values} if entry else {},
                "after": {"chart": meta["name"], "chart_version": wanted_version, "values": values},
            }

        # Cluster objects first: namespace (PSA label) and CRDs, so that the chart finds them.
        if params["create_namespace"]:
            try:
                ns_result = k8s.ensure_namespace(params["namespace"], PSA_LABELS, dry_run=self.module.check_mode)
            except K8sError as exc:
                self.fail("namespace %s: %s" % (params["namespace"], exc))
            self.result["namespace_action"] = ns_result.action
            self.result["changed"] = self.result["changed"] or ns_result.changed
        crd_report = []
        for crd in crds:
            try:
                applied = k8s.apply(crd, dry_run=self.module.check_mode, compare="subset")
            except K8sError as exc:
                self.fail("CRD %s: %s" % (crd["metadata"]["name"], exc))
            crd_report.append({"name": crd["metadata"]["name"], "action": applied.action})
            self.result["changed"] = self.result["changed"] or applied.changed
        self.result["crds"] = crd_report

        if action != "unchanged":
            self.result["changed"] = True
            if not self.module.check_mode:
                self.upgrade(values)
                self.result["release"] = self.release_info(self.current_release(), meta["name"])
        if params["wait"] and not self.module.check_mode:
            self.wait_ready(k8s)
        else:
            try:
                self.result["cluster_policy_state"] = cluster_policy_state(
                    k8s.get("ClusterPolicy", params["cluster_policy_name"]))
            except K8sError:
                self.result["cluster_policy_state"] = None

    def upgrade(self, values):
        params = self.params
        handle, path = tempfile.mkstemp(prefix="gpu-operator-values-", suffix=".yaml",
                                        dir=self.module.tmpdir)  # mkstemp: mode 0600
        try:
            with os.fdopen(handle, "w") as stream:
                json.dump(values, stream, indent=2, sort_keys=True)  # JSON is YAML
            self.run(self.helm.upgrade_install(params["release_name"], params["chart_ref"], params["namespace"],
                                               path, params["chart_version"]), "upgrade --install")
        finally:
            os.unlink(path)


def main():
    argument_spec = dict(
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
    argument_spec.update(K8S_AUTH_ARGSPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_by={"repo_password": "repo_username"})
    if not HAS_YAML:
        module.fail_json(msg="PyYAML is required")
    if module.params["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout must be >= 0, got %d" % module.params["wait_timeout"])
    if module.params["wait_interval"] <= 0:
        module.fail_json(msg="wait_interval must be > 0")
    operator = GpuOperator(module)
    operator.check_version()
    if module.params["state"] == "absent":
        operator.absent()
    else:
        k8s = client_from_module(module)
        operator.present(k8s)
    result = operator.result
    for warning in result.pop("warnings_", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

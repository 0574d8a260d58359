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
  - Values under keys that look secret (token, password, secret, credential, licen..., apiKey,
    accessKey, privateKey, auth) or named in O(redact_keys) are never shown. They are
    V(<redacted>) in the result and the diff, and masked like C(no_log) values anywhere else.
  - Fields that other modules of this collection write on the ClusterPolicy
    (C(devicePlugin.config.name), C(devicePlugin.config.default), C(migManager.config.name)) are
    carried into the values from the live ClusterPolicy when not set here, so that a chart
    upgrade neither reverts them nor fails on a field-manager conflict (see RV(carried_forward)).
  - When the values name a device-plugin ConfigMap that does not exist yet, it is created first
    with a config that shares nothing under the default key, so that the device plugin never
    fails on a missing ConfigMap; M(gpufleet.sharing.gpu_sharing) fills it.
  - Refuses a chart upgrade that skips a release line (NVIDIA supports upgrades within a release
    line or to the next one) unless O(allow_unsupported_upgrade) is set, and a chart older than the
    installed one unless O(allow_downgrade) is set.
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
      - Chart version to install, for example V(v26.7.0); it must parse as C(vMAJOR.MINOR.PATCH).
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
  registry:
    description:
      - A mirror registry, V(host[:port]) or V(host[:port]/path), without a scheme or a trailing slash.
      - The repository of every image the chart pulls (the operator, every operand of the ClusterPolicy,
        node-feature-discovery) is rewritten to it, keeping each image's path, name and tag; for example
        C(nvcr.io/nvidia/k8s/dcgm-exporter) becomes C(<registry>/nvidia/k8s/dcgm-exporter).
      - Which values hold images is read from the chart version in use (C(helm show values)) and from each subchart
        it carries (node-feature-discovery's image is in the subchart's own values; a repository chart is pulled to a
        temporary directory to read them), so a new operand of a later chart is mirrored too. A repository set in
        O(values) is rewritten the same way.
      - M(gpufleet.sharing.gpu_operator_images) lists the images to copy to the mirror.
    type: str
  image_pull_secrets:
    description:
      - Names of C(kubernetes.io/dockerconfigjson) Secrets in O(namespace) that the operator, every operand and
        node-feature-discovery pull their images with; every C(imagePullSecrets) value of the chart version in use
        gets them, and so does every section holding an image where the chart's defaults have no such key
        (C(dcgm), C(dcgmExporter)); node-feature-discovery gets them as references (objects with C(name)) in the
        subchart's own C(imagePullSecrets). Only the names pass through Ansible, never the content.
      - A name that does not exist in O(namespace) is refused before anything changes.
    type: list
    elements: str
    default: []
  tolerations:
    description:
      - Tolerations added to those of every operand DaemonSet (C(daemonsets.tolerations)) and of the
        node-feature-discovery workers (C(node-feature-discovery.worker.tolerations)) where the chart version has
        them, on top of the chart's default (or the list in O(values)), so that the operands run on tainted GPU nodes.
      - Each is a Kubernetes toleration (C(key), C(operator), C(value), C(effect)); the filter
        C(gpufleet.sharing.taint_tolerations) builds them from the inventory's C(gpufleet_node_taints).
    type: list
    elements: dict
    default: []
  per_pod_metrics:
    description:
      - Have the DCGM exporter attribute a shared GPU's metrics (time-slicing, MPS) to every pod that holds a
        replica, with the pods' labels (C(KUBERNETES_VIRTUAL_GPUS), C(DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS)
        in C(dcgmExporter.env); see C(docs/metrics-on-shared-gpus.md)).
      - Refused, before anything changes, when the exporter of the chart version in use (C(dcgmExporter.version))
        is older than 4.2.0, which lacks these settings.
    type: bool
    default: false
  proxy:
    description:
      - HTTP proxy for the operands that download, the driver container (it fetches OS packages). Each set
        field goes into C(driver.env) under its upper- and lower-case name (C(HTTP_PROXY) and C(http_proxy), ...),
        after the entries O(values) has there; O(values) setting one of them to another value is an error.
      - A proxy URL with credentials (C(user:password@)) is masked in every output.
      - Checked before anything changes - a URL is C(http://) or C(https://), a host and an optional port from 1 to
        65535, without path, spaces or control characters.
    type: dict
    suboptions:
      http_proxy:
        description: C(HTTP_PROXY).
        type: str
      https_proxy:
        description: C(HTTPS_PROXY).
        type: str
      no_proxy:
        description:
          - C(NO_PROXY), a comma-separated string or a list of hosts, C(.domains), IP addresses and CIDRs
            (a list is joined with commas).
        type: raw
  registry_credentials:
    description:
      - Credentials for the mirror registry. The module creates (or updates) a C(kubernetes.io/dockerconfigjson)
        Secret from them in O(namespace) through the API (never on a command line, never in the result or the
        diff) and adds it to O(image_pull_secrets).
    type: dict
    suboptions:
      name:
        description: Name of the Secret.
        type: str
        required: true
      server:
        description: Registry host the credentials are for; default the host of O(registry).
        type: str
      username:
        description: User name.
        type: str
        required: true
      password:
        description: Password or token.
        type: str
        required: true
  redact_keys:
    description:
      - Further keys (compared case-insensitively, at any depth of O(values)) whose values are
        secret, besides the ones that look secret by name.
    type: list
    elements: str
    default: []
  allow_unsupported_upgrade:
    description:
      - Allow a chart upgrade that skips a GPU Operator release line (for example V(v25.10.1) to
        V(v26.7.0) past V(v26.3)), which NVIDIA does not support.
    type: bool
    default: false
  allow_downgrade:
    description:
      - Allow a chart older than the installed one (for example V(v26.3.0) when V(v26.7.0) is installed),
        which NVIDIA does not support. Without it the step back is refused, in check mode too, naming
        the installed and the asked version.
    type: bool
    default: false
  recover_pending:
    description:
      - A release left C(pending-upgrade) or C(pending-rollback) by an interrupted helm is rolled
        back to its last deployed revision and the run continues. When false such a release is
        refused, saying how to recover.
    type: bool
    default: false
  mig_strategy:
    description:
      - Value C(mig.strategy). V(mixed) is needed to time-slice C(nvidia.com/mig-*) resources.
      - V("") leaves the strategy to each node - the chart then renders no C(spec.mig.strategy), the operator
        sets no C(MIG_STRATEGY) on the device plugin and GFD, and each node's plugin takes the
        C(flags.migStrategy) of its device-plugin config (M(gpufleet.sharing.gpu_sharing) renders V(none) for
        MPS configs and V(mixed) for the others). Needed when some nodes share with MPS and others time-slice
        MIG devices, because the plugin refuses MPS under V(mixed).
    type: str
    choices: ["", none, single, mixed]
  mig_manager_enabled:
    description:
      - Value C(migManager.enabled). Set it to V(false) when the hosts manage MIG themselves
        (C(gpufleet_mig_backend=host)), so that the operator's MIG manager does not fight them.
    type: bool
  mig_manager_config:
    description: Value C(migManager.config.name), the ConfigMap with the mig-parted configs.
    type: str
  mig_manager_default_config:
    description:
      - Value C(migManager.config.default). With the chart's V(all-disabled), the operator labels every
        MIG-capable node that has no C(nvidia.com/mig.config) label with V(all-disabled), and its MIG
        manager then disables MIG there at once, without cordon or drain.
      - V("") labels no node; each node keeps its layout until its C(nvidia.com/mig.config) label is set
        (the C(mig_operator) role sets it after cordoning and draining the node).
      - Unset keeps what the chart or O(values) say.
    type: str
    choices: [all-disabled, ""]
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
    description: Seconds between two readiness checks (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 5
  helm_binary:
    description: The helm executable (3.12 or newer, or 4.x). A name is looked up in E(PATH).
    type: str
    default: helm
requirements:
  - helm 3.12 or newer (helm 4 works too)
notes:
  - The ClusterPolicy is managed by the chart. Other modules of this collection (M(gpufleet.sharing.gpu_sharing),
    M(gpufleet.sharing.mig_operator_config)) change only a few fields of it; this module carries those
    fields into the chart values, so that an upgrade keeps them.
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
    chart_version: v26.7.0
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
    chart_version: v26.7.0
    mig_strategy: single
    mig_manager_enabled: true
    mig_manager_config: gpufleet-mig-parted-config
    mig_manager_default_config: ""
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
    chart_version: v26.7.0
    app_version: v26.7.0
release_values:
  description:
    - The values requested for the release (secret values redacted).
    - Called C(values) in earlier versions (a dict method name, which C(result.values) finds in Jinja instead of the key).
  returned: when O(state=present)
  type: dict
  sample: {mig: {strategy: mixed}, migManager: {enabled: false}, driver: {enabled: false}}
carried_forward:
  description: Value paths taken from the live ClusterPolicy because they were not set.
  returned: when O(state=present)
  type: list
  elements: str
  sample: [devicePlugin.config.name, devicePlugin.config.default]
recovered:
  description: The interrupted release status that was recovered and how.
  returned: when a pending release was recovered
  type: dict
  sample: {status: pending-upgrade, step: rollback}
configmap_created:
  description: The device-plugin ConfigMap created before the release because it did not exist.
  returned: when created
  type: str
  sample: gpufleet-device-plugin-config
values_changes:
  description: Value paths that change, one line each (secret values redacted).
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
  description: Version of the helm binary, checked before its first command.
  returned: when helm ran (a change, a repository chart, or a local chart only helm can read); a run that
    changes nothing with a local chart starts no helm
  type: str
  sample: 3.14.2
diagnosis:
  description: Why the ClusterPolicy is not ready (state, DaemonSets short of pods, pods not ready and their nodes).
  returned: on a readiness timeout
  type: list
  elements: str
"""

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import wait_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import HelmError, HelmFailed
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import input_problems, no_proxy_text
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_io import GpuOperator, mask_secrets
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import helm_release_argspec

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    per_pod_metrics=dict(type="bool", default=False),
    proxy=dict(type="dict", options=dict(http_proxy=dict(type="str"), https_proxy=dict(type="str"), no_proxy=dict(type="raw"))),
    mig_strategy=dict(type="str", choices=["", "none", "single", "mixed"]),
    mig_manager_enabled=dict(type="bool"),
    mig_manager_config=dict(type="str"),
    mig_manager_default_config=dict(type="str", choices=["all-disabled", ""]),
    driver_enabled=dict(type="bool"),
    toolkit_enabled=dict(type="bool"),
    device_plugin_config=dict(type="dict", options=dict(name=dict(type="str"), default=dict(type="str"))),
    apply_crds=dict(type="bool", default=True),
    allow_unsupported_upgrade=dict(type="bool", default=False),
    cluster_policy_name=dict(type="str", default="cluster-policy"),
    **helm_release_argspec("gpu-operator", "nvidia/gpu-operator", 900),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC, required_by={"repo_password": "repo_username"}).run(run)


def run(mod: ClusterModule) -> None:
    mask_secrets(mod)  # before anything can echo a value
    params = mod.params
    problems = wait_problems(params["wait_timeout"], params["wait_interval"])
    if problems:
        mod.fail(problems[0])
    problems = input_problems(params)  # every input checked before the first request
    if problems:
        mod.fail("invalid input, nothing was changed: %s" % "; ".join(problems), problems=problems)
    if params["proxy"] and params["proxy"].get("no_proxy"):
        params["proxy"]["no_proxy"] = no_proxy_text(params["proxy"]["no_proxy"])
    try:
        operator = GpuOperator(mod)
        if params["state"] == "absent":
            operator.absent()
        else:
            operator.present()
        helm_version = operator.helm.checked_version_text()
        if helm_version:  # helm runs only when a step needs it
            mod.result["helm_version"] = helm_version
    except HelmFailed as exc:
        # argv holds no secret (see _helm); the environment, which may, is not echoed
        mod.fail(str(exc), cmd=exc.argv, rc=exc.rc)
    except HelmError as exc:
        mod.fail(str(exc))


if __name__ == "__main__":
    main()

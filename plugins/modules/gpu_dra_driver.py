#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_dra_driver
short_description: Install NVIDIA's DRA driver for GPUs and put each node on its allocation backend
version_added: 0.3.0
description:
  - The second allocation backend beside the GPU Operator's device plugin (C(docs/dra.md)). Checks that the
    cluster can do Dynamic Resource Allocation (Kubernetes 1.34.2 or newer, the driver's minimum, serving
    C(resource.k8s.io/v1)) and that every named node exists; any problem fails the task before anything is written.
  - Puts each node of O(dra_nodes) on DRA (the operator's deploy label C(nvidia.com/gpu.deploy.device-plugin=false)
    turns its device plugin off, C(gpufleet.sharing/gpu-backend=dra) selects it for the kubelet plugin) and
    each node of O(device_plugin_nodes) that was on DRA back on the device plugin. A node in both lists is
    refused.
  - Installs or upgrades the driver's Helm release with the values from a private file (GPUs through DRA,
    ComputeDomains off, O(feature_gates), O(tolerations) added to the kubelet plugin's), the images on
    O(registry) and the pull secrets, with the GPU Operator's own rules (M(gpufleet.sharing.gpu_operator)).
  - Feature gates unknown to the driver version being installed, or that it refuses together, or a O(values) entry
    contradicting the backend, are refused.
  - NVIDIA's project calls GPU allocation through DRA "not yet officially supported" (README, v0.5.0).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; labels and the namespace are sent as server-side dry runs. Helm does not
        install or upgrade and nothing is waited for.
options:
  state:
    description:
      - V(present) installs or upgrades the release and puts the nodes on their backend; V(absent) uninstalls
        it (node labels stay).
      - V(nodes) only puts the named nodes on their backend and waits (the rollout's switch of a node, one
        batch at a time); helm is not run.
    type: str
    choices: [present, absent, nodes]
    default: present
  require_dra:
    description:
      - With O(state=nodes), check that the cluster can run DRA (Kubernetes 1.34.2 or newer serving
        C(resource.k8s.io/v1)) even when O(dra_nodes) is empty - the preflight of a run that installs the
        driver (C(gpufleet_dra_manage)) before any host is on DRA. V(present) always checks it.
    type: bool
    default: false
  release_name:
    description: Name of the Helm release.
    type: str
    default: nvidia-dra-driver-gpu
  namespace:
    description: Namespace of the release.
    type: str
    default: nvidia-dra-driver-gpu
  create_namespace:
    description: Create the namespace when missing.
    type: bool
    default: true
  chart_ref:
    description:
      - Repository chart (repo/name), oci:// reference or local chart path.
      - The chart is C(dra-driver-nvidia-gpu) from 0.4.0 and C(nvidia-dra-driver-gpu) before
        (kubernetes-sigs/dra-driver-nvidia-gpu C(docs/upgrade.md)); a repository chart of the other name for
        O(chart_version) is refused before anything is changed.
    type: str
    default: nvidia/dra-driver-nvidia-gpu
  chart_version:
    description:
      - The chart version, required for a repository chart (pinned).
      - Ordered as upstream orders its releases (the calendar line 25.x before SemVer 0.4); a step back is refused
        unless O(allow_downgrade). An upgrade of a release of the old chart C(nvidia-dra-driver-gpu) to the new
        one sets C(nameOverride=nvidia-dra-driver-gpu), as upstream's C(docs/upgrade.md) asks, so that the objects
        and the pods' selector label keep their names; later runs keep it.
    type: str
  driver_root:
    description:
      - The kubelet plugin's C(nvidiaDriverRoot) - C(/run/nvidia/driver) when the GPU Operator's driver container
        installs the driver, C(/) for a driver on the host. Unset leaves the chart's default (C(/)).
    type: str
  repo_url:
    description: The chart repository's URL, added or corrected and refreshed when set.
    type: str
  repo_username:
    description: User name for O(repo_url).
    type: str
  repo_password:
    description: Password for O(repo_url), given to helm on stdin.
    type: str
  dra_nodes:
    description: Nodes whose GPUs go through DRA.
    type: list
    elements: str
    default: []
  device_plugin_nodes:
    description: Nodes on the device plugin; those that were on DRA are switched back.
    type: list
    elements: str
    default: []
  expected_gpus:
    description:
      - Node name to that node's GPU read (C(ansible_facts.gpufleet_gpus) of M(gpufleet.sharing.gpu_facts)). With
        O(wait), such a DRA node is ready only once its C(ResourceSlice)s list exactly its devices (a GPU with MIG on
        gives its MIG devices by profile and parent GPU, a GPU with MIG off itself).
    type: dict
    default: {}
  feature_gates:
    description:
      - The driver's feature gates to set (C(featureGates)), gate name to true/false; the others keep the
        driver's defaults. TimeSlicingSettings and MPSSupport (sharing through DRA) and DynamicMIG are alpha.
    type: dict
    default: {}
  tolerations:
    description:
      - Tolerations added to the kubelet plugin's. Written only when one is not already among the chart's
        defaults (C(nvidia.com/gpu:NoSchedule) from chart 0.4.0), and then with them, so the defaults are kept.
    type: list
    elements: dict
    default: []
  values:
    description: Any other chart values (merged; one that contradicts the backend is an error).
    type: dict
    default: {}
  redact_keys:
    description: Keys of O(values) whose values are secret.
    type: list
    elements: str
    default: []
  registry:
    description: A mirror registry (host[:port][/path]) for the chart's images.
    type: str
  image_pull_secrets:
    description: Names of dockerconfigjson Secrets in O(namespace) the pods pull with.
    type: list
    elements: str
    default: []
  registry_credentials:
    description: Create this pull Secret from credentials (never shown) and use it.
    type: dict
    suboptions:
      name:
        description: Secret name.
        type: str
        required: true
      server:
        description: Registry host; default the host of O(registry).
        type: str
      username:
        description: Registry user.
        type: str
        required: true
      password:
        description: Registry password.
        type: str
        required: true
  allow_downgrade:
    description: Accept a chart older than the installed one.
    type: bool
    default: false
  recover_pending:
    description: Roll back a release left pending by an interrupted helm, then retry.
    type: bool
    default: false
  wait:
    description: Wait until every DRA node runs a Ready kubelet plugin and no device plugin, and the others no kubelet plugin.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 600
  wait_interval:
    description: Seconds between two reads while waiting (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 5
  helm_binary:
    description: The helm executable (a name on PATH or a path).
    type: str
    default: helm
seealso:
  - module: gpufleet.sharing.gpu_operator
  - module: gpufleet.sharing.node_maintenance
notes:
  - Facts from kubernetes-sigs/dra-driver-nvidia-gpu v0.5.0 (C(deployments/helm), C(pkg/featuregates)); see
    C(docs/dra.md).
"""

EXAMPLES = r"""
- name: Move one node to DRA inside a rollout batch and wait until its slices list its GPUs
  gpufleet.sharing.gpu_dra_driver:
    state: nodes
    dra_nodes: [a100-01]
    expected_gpus:
      a100-01: "{{ ansible_facts.gpufleet_gpus }}"

- name: DRA for the MIG nodes, the device plugin elsewhere
  gpufleet.sharing.gpu_dra_driver:
    chart_version: 0.5.0
    driver_root: /run/nvidia/driver
    dra_nodes: [a100-01, a100-02]
    device_plugin_nodes: [h200-01]
    registry: mirror.example.com:5000
    image_pull_secrets: [mirror-pull]
"""

RETURN = r"""
action:
  description: What was done to the release (installed, upgraded, unchanged, uninstalled, absent).
  returned: unless O(state=nodes)
  type: str
  sample: unchanged
release:
  description: The release (name, namespace, revision, status, chart, chart_version, app_version).
  returned: unless O(state=nodes)
  type: dict
release_values:
  description:
    - The release's values, secrets redacted.
    - Called C(values) in earlier versions (a dict method name, which C(result.values) finds in Jinja instead of the key).
  returned: when O(state=present)
  type: dict
nodes_switched:
  description: The nodes whose backend labels were changed.
  returned: when O(state=present) or O(state=nodes)
  type: list
  elements: str
  sample: [a100-01]
kubernetes_version:
  description: The API server's version.
  returned: when O(state=present), or O(state=nodes) with O(dra_nodes)
  type: str
  sample: v1.34.2
kubelet_plugin_selector:
  description: The label selector of the release's kubelet plugin pods (C(<name>-component=kubelet-plugin), the name
    being the chart's or its C(nameOverride)).
  returned: when O(state=present)
  type: str
  sample: dra-driver-nvidia-gpu-component=kubelet-plugin
waiting:
  description: On a wait timeout, each node still waiting and why (for example the ResourceSlice devices missing).
  returned: on a wait timeout
  type: dict
helm_version:
  description: Version of the helm binary, checked before its first command.
  returned: when helm ran (a change, a repository chart, or a local chart only helm can read); a run that
    changes nothing with a local chart starts no helm
  type: str
  sample: 3.14.2
"""

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_io import Backends, DraDriver
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import wait_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import HelmError, HelmFailed
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import input_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_io import mask_secrets
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import helm_release_argspec
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_versions import chart_version_problems

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    state=dict(type="str", choices=["present", "absent", "nodes"], default="present"),
    dra_nodes=dict(type="list", elements="str", default=[]),
    device_plugin_nodes=dict(type="list", elements="str", default=[]),
    expected_gpus=dict(type="dict", default={}),
    feature_gates=dict(type="dict", default={}),
    driver_root=dict(type="str"),
    require_dra=dict(type="bool", default=False),
    **helm_release_argspec("nvidia-dra-driver-gpu", "nvidia/dra-driver-nvidia-gpu", 600),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC, required_by={"repo_password": "repo_username"}).run(run)


def run(mod: ClusterModule) -> None:
    mask_secrets(mod)  # before anything can echo a value
    params = mod.params
    problems = wait_problems(params["wait_timeout"], params["wait_interval"]) + input_problems(params)
    # the checks preflight runs on dra_driver_namespace and dra_driver_chart_version (issue 43)
    problems += object_name_problems([("namespace", "Namespace", params["namespace"])]) + chart_version_problems(params["chart_version"])
    if problems:
        mod.fail("invalid input, nothing was changed: %s" % "; ".join(problems), problems=problems)
    if params["state"] == "nodes":
        Backends(mod).switch()
        return
    try:
        driver = DraDriver(mod)
        if params["state"] == "absent":
            driver.absent()
        else:
            driver.present()
        helm_version = driver.helm.checked_version_text()
        if helm_version:  # helm runs only when a step needs it
            mod.result["helm_version"] = helm_version
    except HelmFailed as exc:
        mod.fail(str(exc), cmd=exc.argv, rc=exc.rc)  # argv holds no secret (see _helm)
    except HelmError as exc:
        mod.fail(str(exc))


if __name__ == "__main__":
    main()

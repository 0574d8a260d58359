# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option groups that several modules share, each next to where it is documented.

Data only. A group documented by a doc fragment (``plugins/doc_fragments/<name>.py``) says which;
the others are documented in the one module that takes them (named in the comment). Domain files
import the defaults they need from here (``DEFAULT_MIG_CONFIG``, ``ALLOCATION_POLICIES``).
"""

from __future__ import annotations

from typing import Any, Dict

from ansible.module_utils.basic import env_fallback

# doc fragment gpufleet.sharing.k8s_auth (every cluster module, through _cluster_module.ClusterModule)
K8S_AUTH_ARGSPEC: Dict[str, Dict[str, Any]] = dict(
    kubeconfig=dict(type="path", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
    validate_certs=dict(type="bool", aliases=["verify_ssl"], fallback=(env_fallback, ["K8S_AUTH_VERIFY_SSL"])),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"], fallback=(env_fallback, ["K8S_AUTH_SSL_CA_CERT"])),
    client_cert=dict(type="path", aliases=["cert_file"], fallback=(env_fallback, ["K8S_AUTH_CERT_FILE"])),
    client_key=dict(type="path", aliases=["key_file"], no_log=False, fallback=(env_fallback, ["K8S_AUTH_KEY_FILE"])),
    request_timeout=dict(type="float", default=30.0),
)

DEFAULT_MIG_CONFIG = "all-disabled"
# The per-host plan and the device-plugin release as module options (documentation: the
# gpufleet.sharing.node_plans doc fragment).
_GPU_SPEC = dict(model=dict(type="str"), count=dict(type="int", default=1), mig=dict(type="dict"),
                 product=dict(type="str"), pci_device_id=dict(type="str"))
NODE_PLANS_ARGSPEC: Dict[str, Any] = dict(
    node_plans=dict(type="list", elements="dict", default=[], options=dict(
        node=dict(type="str", required=True),
        gpus=dict(type="list", elements="dict", options=_GPU_SPEC),
        gpu_facts=dict(type="list", elements="dict"),
        mig_config=dict(type="str", default=DEFAULT_MIG_CONFIG),
        mig_configs=dict(type="dict", default={}),
        sharing_config=dict(type="dict"),
    )),
    node_gpus=dict(type="dict", default={}),
    operator_version=dict(type="str"),
    device_plugin_version=dict(type="str"),
)

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

# The options that choose the fleet: gpu_quotas and gpu_claim_templates (doc fragment gpufleet.sharing.fleet), gpu_verify.
FLEET_ARGSPEC: Dict[str, Any] = dict(
    nodes=dict(type="list", elements="str", default=[]),
    node_selector=dict(type="str"),
    configs=dict(type="list", elements="raw"),
    node_configs=dict(type="dict", default={}),
    default_config=dict(type="str"),
    mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
    cluster_policy_name=dict(type="str"),
    operator_namespace=dict(type="str", default="gpu-operator"),
    **NODE_PLANS_ARGSPEC,
)

# The verification pods' options of gpu_verify (documented there).
POD_ARGSPEC: Dict[str, Dict[str, Any]] = dict(
    pod_image=dict(type="str", default="nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"),
    registry=dict(type="str"),
    image_pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
    pod_command=dict(type="list", elements="str", default=["nvidia-smi", "-L"]),
    pod_run_as_user=dict(type="int", default=65534),
    pod_annotations=dict(type="dict", default={}),
    pod_tolerations=dict(type="list", elements="dict"),
    pod_timeout=dict(type="int", default=120),
)

DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"

# gpu_verify's probe options (documented in its DOCUMENTATION).
PROBE_ARGSPEC: Dict[str, Any] = dict(
    probe=dict(type="bool", default=False),
    probe_program=dict(type="str"),
    probe_image=dict(type="str", default=DEFAULT_IMAGE),
    probe_python=dict(type="str", default="python3"),
    probe_seconds=dict(type="int", default=20),
    probe_min_share=dict(type="float", default=0.0),
    probe_max_inflation=dict(type="float", default=0.0),
)

# gpu_verify's per-pod metrics options (documented in its DOCUMENTATION).
METRICS_ARGSPEC: Dict[str, Dict[str, Any]] = dict(
    metrics=dict(type="bool", default=False),
    metrics_hold=dict(type="int", default=60),
)


def helm_release_argspec(release: str, chart_ref: str, wait_timeout: int) -> Dict[str, Any]:
    """The options of a module that installs a chart with helm (gpu_operator, gpu_dra_driver): the release,
    the chart and its repository, the values, the mirror registry and pull secrets, the downgrade and
    pending-release rules, the wait. Each module documents them in its own words."""
    return dict(
        release_name=dict(type="str", default=release),
        namespace=dict(type="str", default=release),
        create_namespace=dict(type="bool", default=True),
        chart_ref=dict(type="str", default=chart_ref),
        chart_version=dict(type="str"),
        repo_url=dict(type="str"),
        repo_username=dict(type="str"),
        repo_password=dict(type="str", no_log=True),
        values=dict(type="dict", default={}),
        redact_keys=dict(type="list", elements="str", default=[], no_log=False),
        registry=dict(type="str"),
        image_pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
        registry_credentials=dict(type="dict", no_log=False, options=dict(
            name=dict(type="str", required=True), server=dict(type="str"), username=dict(type="str", required=True),
            password=dict(type="str", required=True, no_log=True))),
        tolerations=dict(type="list", elements="dict", default=[]),
        allow_downgrade=dict(type="bool", default=False),
        recover_pending=dict(type="bool", default=False),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=wait_timeout),
        wait_interval=dict(type="float", default=5),
        helm_binary=dict(type="str", default="helm"),
    )

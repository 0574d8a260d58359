"""A small GPU fleet (SSH hosts + virtual cluster with the operator installed) for rollout tests.

``RolloutLab.play(playbook, **vars)`` runs a playbook of ``playbooks/`` against it (optionally in
the background, to be interrupted); ``node``, ``summary``, ``lease`` read what a run left behind.
Host ``flt-0``'s address is read from a file at each task, so a test can make it unreachable mid-run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional

import yaml

from gpulab import hosts, shims, tools
from gpulab.cluster import faults

from labtools import BUILD, FAST_ENV, REPO, environ, wait_until


from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient

SPECS = ["flt-0=A100-40GB:1@gpu_hosts", "flt-1=A100-40GB:1@gpu_hosts"]
ANNOTATION = "gpufleet.sharing/rollout"
LEASE_NS, LEASE_NAME = "kube-system", "gpufleet-sharing-rollout"
WORK_NS = "work"
GPU_RESOURCE = "nvidia.com/mig-1g.5gb"  # in both layouts the tests switch between


def _helm() -> str:
    shared = "/work/main/.cache/helm/helm"
    return shared if os.path.exists(shared) else tools.ensure_helm(os.path.join(REPO, ".cache"))


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


class RolloutLab:
    def __init__(self, lab_dir: str, info: Dict[str, Any]) -> None:
        self.dir = lab_dir
        self.inventory = info["inventory"]
        self.kubeconfig = os.path.join(lab_dir, "kubeconfig")
        self.report_dir = os.path.join(lab_dir, "reports")
        self.hosts = {h["name"]: h for h in info["hosts"]}
        self.address_file = os.path.join(lab_dir, "flt-0.address")
        self.set_reachable(True)
        self.extra_inventory = os.path.join(lab_dir, "switch.yml")
        with open(self.extra_inventory, "w", encoding="utf-8") as handle:
            yaml.safe_dump({"all": {"hosts": {"flt-0": {
                "ansible_host": "{{ lookup('ansible.builtin.file', '%s') }}" % self.address_file}}}}, handle)
        self.k8s = K8sClient.connect({"kubeconfig": self.kubeconfig}, retries=0)

    def set_reachable(self, reachable: bool) -> None:
        with open(self.address_file, "w", encoding="utf-8") as handle:
            handle.write(self.hosts["flt-0"]["address"] if reachable else "127.0.0.254")

    def base_vars(self) -> Dict[str, Any]:
        return {
            "gpufleet_kubeconfig": self.kubeconfig, "gpufleet_report_dir": self.report_dir,
            "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
            "gpu_operator_helm_binary": _helm(), "gpu_operator_chart_version": "", "gpu_operator_repo_url": "",
            "gpu_operator_mig_strategy": "mixed", "gpu_operator_driver_enabled": False,
            "gpu_operator_wait_timeout": 120, "gpu_operator_wait_interval": 1,
            "gpufleet_rollout_serial": [1, "100%"], "gpufleet_rollout_max_fail_percentage": 100,
            "gpufleet_rollout_settle_timeout": 60, "verify_pod_timeout": 15, "mig_config": "all-1g.5gb",
            "gpufleet_drain_timeout": 60, "gpufleet_rollout_lock_duration": 120,
            # Stopping/starting host services around the apply is the mig role's business (its own
            # tests); here it would only add four SSH round trips each way per changed node.
            "mig_gpu_clients": [],
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                       "-o LogLevel=ERROR -o ConnectTimeout=3",
        }

    def argv(self, playbook: str, variables: Dict[str, Any], limit: Optional[str]) -> List[str]:
        path = os.path.join(self.dir, "vars-%d.yml" % os.getpid())
        with open(path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(dict(self.base_vars(), **variables), handle)
        playbooks = os.environ.get("GPUFLEET_TEST_PLAYBOOKS") or os.path.join(REPO, "playbooks")  # to replay old ones
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", self.inventory,
                "-i", self.extra_inventory, "-e", "@" + path, os.path.join(playbooks, playbook)]
        return argv + (["--limit", limit] if limit else [])

    def env(self) -> Dict[str, str]:
        return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                    ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml", ANSIBLE_FORKS="5")

    def play(self, playbook: str = "rollout.yml", limit: Optional[str] = None, **variables: Any
             ) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(playbook, variables, limit), capture_output=True, text=True, check=False,
                              env=self.env(), timeout=600)  # noqa: S603

    def start(self, playbook: str = "rollout.yml", limit: Optional[str] = None, **variables: Any) -> subprocess.Popen:
        log = open(os.path.join(self.dir, "background.log"), "w", encoding="utf-8")  # pylint: disable=consider-using-with
        return subprocess.Popen(self.argv(playbook, variables, limit), stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                                env=self.env())

    def node(self, name: str) -> Dict[str, Any]:
        node = self.k8s.get("Node", name) or {}
        return {"unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
                "annotation": ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)}

    def summary(self) -> Dict[str, Dict[str, Any]]:
        with open(os.path.join(self.report_dir, "rollout-summary.json"), encoding="utf-8") as handle:
            return {row["node"]: row for row in json.load(handle)["nodes"]}

    def lease(self) -> Optional[Dict[str, Any]]:
        return self.k8s.get("Lease", LEASE_NAME, namespace=LEASE_NS)

    def add_fault(self, kind: str, **spec: Any) -> Dict[str, Any]:
        return faults.add_remote(self.dir, kind, **spec)

    def clear_faults(self) -> None:
        faults.clear_remote(self.dir)

    def run_gpu_pod(self, name: str, owner: Optional[Dict[str, Any]] = None, timeout: float = 30) -> Dict[str, Any]:
        """A long-running pod on flt-0 holding one MIG device (the lab starts a GPU process for it)."""
        self.k8s.ensure_namespace(WORK_NS)
        metadata: Dict[str, Any] = {"name": name, "namespace": WORK_NS, "labels": {"app": name}}
        if owner:
            metadata["ownerReferences"] = [dict(owner, controller=True)]
        self.k8s.create({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {
            "nodeName": "flt-0", "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "command": ["sleep", "infinity"], "resources": {"limits": {GPU_RESOURCE: 1}}}]}})

        def running() -> Optional[Dict[str, Any]]:
            pod = self.k8s.get("Pod", name, WORK_NS) or {}
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None
        return wait_until("pod %s/%s Running" % (WORK_NS, name), running, timeout)

    def delete_pod(self, name: str) -> None:
        self.k8s.delete("Pod", name, namespace=WORK_NS)
        wait_until("pod %s/%s gone" % (WORK_NS, name), lambda: self.k8s.get("Pod", name, WORK_NS) is None, 30)

    def restart_kubelet(self, name: str) -> Dict[str, Any]:
        """``systemctl restart kubelet`` on the host (its systemctl shim, on its state file): the starting
        kubelet registers its deleted Node again, as a real one does (gpulab.cluster.registration)."""
        shims.systemctl_main(["restart", "kubelet"], self.hosts[name]["state_file"])
        return wait_until("node %s registered again" % name, lambda: self.k8s.get("Node", name), 30)


def start_lab(lab_dir: str) -> RolloutLab:
    with environ(FAST_ENV):  # the API server process inherits them
        info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in SPECS], cluster=True,
                        first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.10.2"))
    return RolloutLab(lab_dir, info)

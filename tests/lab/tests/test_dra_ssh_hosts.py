"""DRA on the lab's SSH GPU hosts (the path the collection's roles take): NVIDIA's DRA driver
installed with the stand-in chart, a MIG partition created over SSH with `nvidia-smi mig -cgi`
after the kubelet plugin started is not published until the plugin restarts, and a pod's claim
shows exactly its device in `nvidia-smi -L`. Hosts on GPUFLEET_TEST_LAB_ADDRESS (default 127.0.21.2)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from prerequisites import missing_prerequisite

from gpulab import gpustate, hosts, migparted, tools
from labtools import FAST_ENV, environ

pytestmark = pytest.mark.lab_hosts

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHART = os.path.join(REPO_ROOT, "tests", "lab", "charts", "nvidia-dra-driver-gpu-standin")
NODE = "dra-h100"
NS = "nvidia-dra-driver-gpu"


class SshLab:
    def __init__(self, lab_dir, info):
        self.dir = lab_dir
        self.host = info["hosts"][0]
        self.kubeconfig = info["cluster"]["kubeconfig"]
        self.key = hosts.LabPaths(lab_dir).client_key

    def ssh(self, *command):
        argv = ["ssh", "-i", self.key, "-p", str(self.host["port"]), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{self.host['address']}", *command]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)

    def run(self, binary, *args, stdin=None):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HELM_CACHE_HOME=os.path.join(self.dir, "hc"),
                   HELM_CONFIG_HOME=os.path.join(self.dir, "hcfg"), HELM_DATA_HOME=os.path.join(self.dir, "hd"))
        result = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True, timeout=120, env=env, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def kubectl(self, *args, stdin=None):
        return self.run(tools.ensure_kubectl(), *args, stdin=stdin)

    def slice_devices(self):
        items = json.loads(self.kubectl("get", "resourceslices", "-o", "json"))["items"]
        return sorted(d["name"] for s in items for d in s["spec"]["devices"])

    def until(self, what, probe, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(0.3)
        raise AssertionError("timed out waiting for " + what)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    try:
        helm = tools.ensure_helm(os.path.join(REPO_ROOT, ".cache"))
    except tools.ToolError as exc:
        missing_prerequisite("helm unavailable: %s" % exc)
    lab_dir = str(tmp_path_factory.mktemp("dra-ssh"))
    with environ(FAST_ENV):
        info = hosts.up(lab_dir, [hosts.parse_host_spec(f"{NODE}=H100-80GB:1")], cluster=True,
                        first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.21.2"))
    try:
        live = SshLab(lab_dir, info)
        state = info["hosts"][0]["state_file"]
        one = {"version": "v1", "mig-configs": {"one": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]}}
        assert migparted.apply_config(state, one, "one")[0]
        live.state_file = state
        live.kubectl("label", "node", NODE, "nvidia.com/gpu.present=true")
        live.run(helm, "install", "dra", CHART, "-n", NS, "--create-namespace", "--set", "gpuResourcesEnabledOverride=true",
                 "--set", "resources.computeDomains.enabled=false")
        yield live
    finally:
        hosts.down(lab_dir)


def test_a_partition_made_over_ssh_waits_for_the_plugin_restart_and_a_claim_sees_it(lab):
    before = lab.until("the plugin's slice", lab.slice_devices)
    assert len(before) == 1 and before[0].startswith("gpu-0-mig-1g10gb-19-")
    made = lab.ssh("nvidia-smi", "mig", "-cgi", "1g.10gb", "-C")
    assert made.returncode == 0, made.stderr + made.stdout
    assert len(gpustate.load(lab.state_file).gpus[0].mig_devices()) == 2
    time.sleep(1.0)
    assert lab.slice_devices() == before  # the running plugin does not see it
    lab.kubectl("rollout", "restart", "daemonset/nvidia-dra-driver-gpu-kubelet-plugin", "-n", NS)
    after = lab.until("the republished slice", lambda: len(lab.slice_devices()) == 2 and lab.slice_devices())
    assert set(before) < set(after)
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "mig-1g-10gb", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2,
                         "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smi", "namespace": "default"}, "spec": {
        "restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "mig-1g-10gb"}],
        "containers": [{"name": "smi", "image": "nvidia/cuda", "command": ["nvidia-smi", "-L"], "resources": {"claims": [{"name": "gpu"}]}}]}}
    lab.kubectl("apply", "-f", "-", stdin=json.dumps(template))
    lab.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    lab.until("the pod", lambda: json.loads(lab.kubectl("get", "pod", "smi", "-o", "json")).get("status", {}).get("phase") == "Succeeded")
    log = lab.kubectl("logs", "smi")
    uuids = [ci.uuid for _gi, ci in gpustate.load(lab.state_file).gpus[0].mig_devices()]
    assert log.count("MIG 1g.10gb") == 2 and all(uuid in log for uuid in uuids)

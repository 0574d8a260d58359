"""autoscaling.yml (issue 39 part 1) on the demo fleet (tests/lab/demo.py: A100 MIG inference, H100 training,
H200 MPS, two hosts each, inventories/lab): after site.yml, the template it writes for every group is what
every node of that group advertises (allocatable, GFD labels); check mode writes nothing, a second run
reports changed=0; the Cluster API annotations are given exactly where one resource describes the group."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from gpulab import hosts

from labtools import BUILD, FAST_ENV, REPO, environ
from rollout_lab import _helm, flat

from demo import HOSTS, create_team_namespaces  # the demo's fleet and its admin step, as `make demo` (tests/lab)

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient

pytestmark = pytest.mark.lab_hosts

GROUPS = {"a100_inference": ["a100-inf-0", "a100-inf-1"], "h100_training": ["h100-trn-0", "h100-trn-1"],
          "h200_shared": ["h200-shr-0", "h200-shr-1"]}
FILES = ["node-group-templates.json", "node-group-templates.yaml"]


class Fleet:
    def __init__(self, lab_dir: str) -> None:
        self.dir = lab_dir
        self.report_dir = os.path.join(lab_dir, "reports")
        self.k8s = K8sClient.connect({"kubeconfig": os.path.join(lab_dir, "kubeconfig")}, retries=0)

    def play(self, playbook: str, *extra: str) -> subprocess.CompletedProcess:
        variables = os.path.join(self.dir, "vars.yml")
        with open(variables, "w", encoding="utf-8") as handle:
            yaml.safe_dump({"gpufleet_kubeconfig": os.path.join(self.dir, "kubeconfig"), "gpufleet_report_dir": self.report_dir,
                            "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
                            "gpu_operator_helm_binary": _helm(), "mig_gpu_clients": [], "verify_pod_timeout": 15,
                            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                                       "-o LogLevel=ERROR -o ConnectTimeout=3"}, handle)
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(self.dir, "inventory.yml"),
                "-i", os.path.join(REPO, "inventories", "lab"), "-e", "@" + variables,
                os.path.join(REPO, "playbooks", playbook)] + list(extra)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_FORKS="6")
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=900)  # noqa: S603

    def templates(self) -> dict:
        with open(os.path.join(self.report_dir, FILES[0]), encoding="utf-8") as handle:
            return json.load(handle)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("autoscalelab"))
    with environ(FAST_ENV):  # the API server process inherits them
        hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in HOSTS], cluster=True,
                 first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.10.2"))
    try:
        create_team_namespaces(lab_dir)
        lab = Fleet(lab_dir)
        result = lab.play("site.yml")
        assert result.returncode == 0, flat(result.stdout + result.stderr)[-4000:]
        yield lab
    finally:
        hosts.down(lab_dir)


def changed_counts(result: subprocess.CompletedProcess) -> list:
    return re.findall(r"(\S+)\s*: ok=\d+\s+changed=(\d+)", result.stdout)


def test_check_mode_writes_nothing(fleet) -> None:
    result = fleet.play("autoscaling.yml", "--check", "--diff")
    assert result.returncode == 0, flat(result.stdout + result.stderr)[-3000:]
    assert not any(os.path.exists(os.path.join(fleet.report_dir, f)) for f in FILES)
    assert "node-group-templates.json" in result.stdout  # the diff names the file it would write


def test_every_group_predicts_what_every_node_of_it_advertises(fleet) -> None:
    result = fleet.play("autoscaling.yml")
    assert result.returncode == 0, flat(result.stdout + result.stderr)[-3000:]
    groups = fleet.templates()["groups"]
    assert sorted(groups) == sorted(GROUPS)
    for group, nodes in GROUPS.items():
        template = groups[group]
        for name in nodes:
            node = fleet.k8s.get("Node", name)
            advertised = {r: int(v) for r, v in node["status"]["allocatable"].items() if r.startswith("nvidia.com/") and int(v)}
            assert template["resources"] == advertised, (group, name)
            labels = node["metadata"]["labels"]
            wanted = {k: v for k, v in template["labels"].items() if k != "cluster-api/accelerator"}
            assert {k: labels.get(k) for k in wanted} == wanted, (group, name)
    # one resource -> annotations; the A100 group's mixed layout -> none, with what to do
    assert [g for g in sorted(groups) if groups[g]["clusterapi"]["expressible"]] == ["h100_training", "h200_shared"]
    assert groups["h100_training"]["clusterapi"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/gpu-type"] == "nvidia.com/gpu"
    assert groups["h200_shared"]["clusterapi"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/gpu-count"] == "4"
    assert "split the group" in groups["a100_inference"]["clusterapi"]["reason"]


def test_a_second_run_reports_changed_0(fleet) -> None:
    before = {f: os.stat(os.path.join(fleet.report_dir, f)).st_mtime_ns for f in FILES}
    result = fleet.play("autoscaling.yml")
    assert result.returncode == 0 and changed_counts(result), flat(result.stdout + result.stderr)[-3000:]
    assert all(changed == "0" for _host, changed in changed_counts(result)), result.stdout[-2000:]
    assert before == {f: os.stat(os.path.join(fleet.report_dir, f)).st_mtime_ns for f in FILES}

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
from gpulab.cluster import access, clusterapi

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


# --- the whole chain with Cluster API: MachineDeployments, annotations, the autoscaler's template node ---

MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MDS = {"h100_training": "h100-workers", "a100_inference": "a100-workers"}


def machine_deployment(name: str) -> dict:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": "capi", "annotations": {MIN_SIZE: "0"}},
            "spec": {"clusterName": "lab", "replicas": 0, "selector": {"matchLabels": {"pool": name}},
                     "template": {"metadata": {"labels": {"pool": name}},
                                  "spec": {"clusterName": "lab", "bootstrap": {"dataSecretName": "join"},
                                           "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                                 "kind": "Metal3MachineTemplate", "name": name}}}}}


def pending_pod(resource: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-" + resource.split("/")[1], "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {resource: "1"}}}]}}


def deployments(fleet) -> dict:
    return {md["metadata"]["name"]: md for md in fleet.k8s.list(clusterapi.KIND_REF, namespace="capi")}


def test_a_pending_pod_fits_the_template_the_annotations_describe_and_none_before(fleet) -> None:
    answer = access.admin_request(fleet.dir, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", clusterapi.crd())
    assert answer["_code"] == 201, answer
    access.create_namespaces(fleet.dir, ["capi"])
    for name in MDS.values():
        fleet.k8s.create(machine_deployment(name))
    whole, mig = pending_pod("nvidia.com/gpu"), pending_pod("nvidia.com/mig-1g.5gb")
    before = deployments(fleet)
    assert all(clusterapi.fits(pod, md) for pod in (whole, mig) for md in before.values())  # fits none
    groups = os.path.join(fleet.dir, "capi-groups.yml")
    with open(groups, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"children": {g: {"vars": {"gpufleet_machine_deployments": [{"name": n, "namespace": "capi"}]}}
                                             for g, n in MDS.items()}}}, handle)
    checked = fleet.play("autoscaling.yml", "-i", groups, "--check", "--diff")
    assert checked.returncode == 0, flat(checked.stdout + checked.stderr)[-3000:]
    assert "capacity.cluster-autoscaler.kubernetes.io/gpu-type" in checked.stdout  # the diff shows it
    assert {n: md["metadata"]["resourceVersion"] for n, md in deployments(fleet).items()} == \
        {n: md["metadata"]["resourceVersion"] for n, md in before.items()}
    result = fleet.play("autoscaling.yml", "-i", groups)
    assert result.returncode == 0, flat(result.stdout + result.stderr)[-3000:]
    after = deployments(fleet)
    h100, a100 = after["h100-workers"], after["a100-workers"]
    notes = h100["metadata"]["annotations"]
    assert notes[MIN_SIZE] == "0" and notes["capacity.cluster-autoscaler.kubernetes.io/gpu-count"] == "2"
    assert clusterapi.fits(whole, h100) == [] and clusterapi.fits(whole, a100) != []
    # the A100 group's mixed layout has no annotations: its MIG pod fits no template (keep its min size >= 1)
    assert a100["metadata"]["annotations"] == {MIN_SIZE: "0"}
    assert all(clusterapi.fits(mig, md) for md in after.values())
    again = fleet.play("autoscaling.yml", "-i", groups)
    assert again.returncode == 0 and all(c == "0" for _h, c in changed_counts(again)), again.stdout[-2000:]

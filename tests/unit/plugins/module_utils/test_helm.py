"""Unit tests for _helm (argv building, output parsing) and _gpu_operator (values, diagnosis)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _helm
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import HelmCommand, HelmError
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _gpu_operator as gop


# -- version ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("output, expected", [
    ("v3.14.2+gc309b6f\n", (3, 14, 2)),
    ("v4.1.4+g05fa379", (4, 1, 4)),
    ("v3.12.0", (3, 12, 0)),
    ('version.BuildInfo{Version:"v4.1.4", GitCommit:"05fa37973dc9e42b76e1d2883494c87174b6074f"}', (4, 1, 4)),
    ('version.BuildInfo{Version:"v3.13.0-rc.1", GitCommit:"x"}', (3, 13, 0)),
])
def test_parse_helm_version(output, expected):
    assert _helm.parse_helm_version(output) == expected


def test_parse_helm_version_garbage():
    with pytest.raises(HelmError, match="cannot read the helm version"):
        _helm.parse_helm_version("command not found")
    with pytest.raises(HelmError):
        _helm.parse_helm_version("")


def test_minimum_version():
    _helm.check_helm_version((3, 12, 0))
    _helm.check_helm_version((4, 0, 0))
    with pytest.raises(HelmError, match="helm 3.11.3 is too old: 3.12.0 or newer"):
        _helm.check_helm_version((3, 11, 3))
    with pytest.raises(HelmError):
        _helm.check_helm_version((2, 17, 0))


# -- chart references --------------------------------------------------------------------------------

def test_local_and_repo_refs(tmp_path):
    assert _helm.is_local_chart("/opt/charts/gpu-operator")
    assert _helm.is_local_chart("./charts/x")
    assert _helm.is_local_chart("gpu-operator-v25.10.1.tgz")
    assert _helm.is_local_chart(str(tmp_path))
    assert not _helm.is_local_chart("nvidia/gpu-operator")
    assert not _helm.is_local_chart("oci://registry.example/charts/gpu-operator")
    assert _helm.repo_of("nvidia/gpu-operator") == "nvidia"
    assert _helm.repo_of("/abs/path") is None
    assert _helm.repo_of("oci://r/x") is None
    assert _helm.repo_of("gpu-operator") is None


# -- argv ----------------------------------------------------------------------------------------------

def test_upgrade_install_argv_values_only_by_file():
    cmd = HelmCommand("/usr/bin/helm", kubeconfig="/k/config", context="prod")
    argv = cmd.upgrade_install("gpu-operator", "nvidia/gpu-operator", "gpu-operator", "/tmp/v.yaml", "v25.10.1")
    assert argv == ["/usr/bin/helm", "upgrade", "--install", "gpu-operator", "nvidia/gpu-operator",
                    "-n", "gpu-operator", "-f", "/tmp/v.yaml", "--reset-values", "--version", "v25.10.1",
                    "--kubeconfig", "/k/config", "--kube-context", "prod"]
    assert not any(arg.startswith("--set") for arg in argv)


def test_local_chart_gets_no_version_flag():
    cmd = HelmCommand()
    assert "--version" not in cmd.upgrade_install("r", "/charts/x", "ns", "/tmp/v", "1.0.0")
    assert cmd.show_crds("/charts/x", "1.0.0") == ["helm", "show", "crds", "/charts/x"]
    assert cmd.show_chart("nvidia/gpu-operator", "v25.10.1") == [
        "helm", "show", "chart", "nvidia/gpu-operator", "--version", "v25.10.1"]


def test_read_only_argv_use_json_output():
    cmd = HelmCommand(kubeconfig="/kc")
    assert cmd.list_releases("gpu-operator", "gpu-operator") == [
        "helm", "list", "-n", "gpu-operator", "--deployed", "--failed", "--pending", "--filter", "^gpu\\-operator$", "-o", "json", "--kubeconfig", "/kc"]
    assert cmd.get_values("r", "ns")[:8] == ["helm", "get", "values", "r", "-n", "ns", "-o", "json"]
    assert cmd.status("r", "ns")[:7] == ["helm", "status", "r", "-n", "ns", "-o", "json"]
    assert cmd.uninstall("r", "ns") == ["helm", "uninstall", "r", "-n", "ns", "--kubeconfig", "/kc"]
    assert cmd.version() == ["helm", "version", "--short"]
    assert cmd.repo_update(["nvidia"]) == ["helm", "repo", "update", "nvidia"]


SECRET = "s3cr3t-Token-value"


def test_no_secret_in_any_argv():
    cmd = HelmCommand("helm", kubeconfig="/kc", context="ctx")
    argvs = [
        cmd.repo_add("nvidia", "https://helm.ngc.nvidia.com/nvidia", "user", with_password=True),
        cmd.upgrade_install("r", "nvidia/gpu-operator", "ns", "/tmp/values.yaml", "v1"),
        cmd.list_releases("ns", "r"), cmd.get_values("r", "ns"), cmd.status("r", "ns"),
        cmd.show_crds("nvidia/gpu-operator", "v1"), cmd.uninstall("r", "ns"),
    ]
    env = _helm.helm_environment(host="https://api:6443", api_key=SECRET, ca_cert="/ca", validate_certs=False)
    for argv in argvs:
        assert all(SECRET not in arg for arg in argv)
        assert all(isinstance(arg, str) for arg in argv)
    assert "--password-stdin" in argvs[0]
    assert env == {"HELM_KUBEAPISERVER": "https://api:6443", "HELM_KUBETOKEN": SECRET,
                   "HELM_KUBECAFILE": "/ca", "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true"}
    assert _helm.helm_environment() == {}


# -- output parsing --------------------------------------------------------------------------------

LIST_OUTPUT = json.dumps([
    {"name": "gpu-operator-x", "namespace": "gpu-operator", "revision": "1", "status": "deployed",
     "chart": "other-1.0.0", "app_version": "1"},
    {"name": "gpu-operator", "namespace": "gpu-operator", "revision": "3", "updated": "2026-06-05",
     "status": "deployed", "chart": "gpu-operator-v25.10.1", "app_version": "v25.10.1"},
])


def test_parse_release_list():
    entry = _helm.parse_release_list(LIST_OUTPUT, "gpu-operator")
    assert entry["chart"] == "gpu-operator-v25.10.1" and entry["revision"] == "3"
    assert _helm.parse_release_list("[]", "gpu-operator") is None
    assert _helm.parse_release_list("", "gpu-operator") is None
    with pytest.raises(HelmError, match="did not print JSON"):
        _helm.parse_release_list("NAME NAMESPACE", "x")
    with pytest.raises(HelmError, match="expected a JSON list"):
        _helm.parse_release_list("{}", "x")


@pytest.mark.parametrize("field, name, expected", [
    ("gpu-operator-v25.10.1", "gpu-operator", ("gpu-operator", "v25.10.1")),
    ("gpu-operator-v25.10.1", None, ("gpu-operator", "v25.10.1")),
    ("gpu-operator-standin-0.1.0", None, ("gpu-operator-standin", "0.1.0")),
    ("my-chart-1.2.3-rc.1", None, ("my-chart", "1.2.3-rc.1")),
])
def test_split_chart_field(field, name, expected):
    assert _helm.split_chart_field(field, name) == expected


def test_split_chart_field_bad():
    with pytest.raises(HelmError):
        _helm.split_chart_field("noversion", None)


def test_parse_values():
    assert _helm.parse_values("null\n") == {}
    assert _helm.parse_values('{"mig": {"strategy": "mixed"}}') == {"mig": {"strategy": "mixed"}}
    with pytest.raises(HelmError):
        _helm.parse_values("[1]")


def test_parse_chart_metadata_with_wrapped_lines():
    output = ("apiVersion: v2\nappVersion: v25.10.1\ndescription: NVIDIA GPU Operator creates/configures/manages\n"
              "  GPUs atop Kubernetes\nname: gpu-operator\nversion: v25.10.1\nkeywords:\n- gpu\n")
    meta = _helm.parse_chart_metadata(output)
    assert meta["name"] == "gpu-operator" and meta["version"] == "v25.10.1"
    assert _helm.parse_chart_metadata("name: 'x'\nversion: \"1.0.0\"\n")["version"] == "1.0.0"
    with pytest.raises(HelmError):
        _helm.parse_chart_metadata("apiVersion: v2\n")


def test_same_version():
    assert _helm.same_version("v25.10.1", "25.10.1")
    assert not _helm.same_version("v25.10.1", "v26.3.3")
    assert _helm.normalize_version(None) is None


# -- values ----------------------------------------------------------------------------------------

def test_build_values_from_plan():
    values = gop.build_values({"dcgmExporter": {"enabled": False}}, mig_strategy="mixed", mig_manager_enabled=False,
                              driver_enabled=False, device_plugin_config={"name": "dp", "default": "default"})
    assert values == {"dcgmExporter": {"enabled": False}, "mig": {"strategy": "mixed"},
                      "migManager": {"enabled": False}, "driver": {"enabled": False},
                      "devicePlugin": {"config": {"name": "dp", "default": "default"}}}


def test_build_values_leaves_input_untouched_and_accepts_equal_duplicates():
    original = {"mig": {"strategy": "single"}}
    values = gop.build_values(original, mig_strategy="single", mig_manager_config="cm", mig_manager_enabled=True,
                              toolkit_enabled=True)
    assert values["migManager"] == {"enabled": True, "config": {"name": "cm"}}
    assert values["toolkit"] == {"enabled": True}
    assert original == {"mig": {"strategy": "single"}}
    assert gop.build_values() == {}


def test_build_values_contradictions_all_listed():
    with pytest.raises(gop.ValuesError) as err:
        gop.build_values({"mig": {"strategy": "single"}, "driver": {"enabled": True}},
                         mig_strategy="mixed", driver_enabled=False)
    assert err.value.problems == ["mig_strategy='mixed' contradicts values.mig.strategy='single'",
                                  "driver_enabled=False contradicts values.driver.enabled=True"]


def test_build_values_rejects_bad_strategy_and_manager_config_without_manager():
    with pytest.raises(gop.ValuesError, match="mig_strategy must be one of"):
        gop.build_values(mig_strategy="all")
    with pytest.raises(gop.ValuesError, match="needs the MIG manager"):
        gop.build_values(mig_manager_enabled=False, mig_manager_config="cm")


def test_build_values_non_mapping_branch_is_a_contradiction():
    with pytest.raises(gop.ValuesError, match="needs values.mig to be a mapping, got 'mixed'"):
        gop.build_values({"mig": "mixed"}, mig_strategy="mixed")


def test_values_changes():
    before = {"mig": {"strategy": "single"}, "driver": {"enabled": True}}
    after = {"mig": {"strategy": "mixed"}, "migManager": {"enabled": False}}
    assert gop.values_changes(before, after) == [
        "driver: removed (was {'enabled': True})",
        "mig.strategy: 'single' -> 'mixed'",
        "migManager: added {'enabled': False}",
    ]
    assert gop.values_changes(after, after) == []


def test_crd_documents():
    docs = [None, {"kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}, {"kind": "ConfigMap"}]
    assert [d["metadata"]["name"] for d in gop.crd_documents(docs)] == ["a.b"]
    with pytest.raises(ValueError):
        gop.crd_documents([{"kind": "CustomResourceDefinition", "metadata": {}}])


def test_diagnose_operands():
    policy = {"metadata": {"name": "cluster-policy"},
              "status": {"state": "notReady", "conditions": [
                  {"type": "Ready", "status": "False", "message": "device plugin not ready"}]}}
    daemonsets = [
        {"metadata": {"name": "nvidia-device-plugin-daemonset"}, "status": {"desiredNumberScheduled": 2, "numberReady": 1}},
        {"metadata": {"name": "gpu-feature-discovery"}, "status": {"desiredNumberScheduled": 2, "numberReady": 2}},
    ]
    pods = [
        {"metadata": {"name": "nvidia-device-plugin-daemonset-b"}, "spec": {"nodeName": "gpu-b"},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "plugin", "state": {"waiting": {
                        "reason": "CrashLoopBackOff", "message": "back-off 5m"}}}]}},
        {"metadata": {"name": "nvidia-device-plugin-daemonset-a"}, "spec": {"nodeName": "gpu-a"},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        {"metadata": {"name": "nvidia-cuda-validator-x"}, "spec": {"nodeName": "gpu-a"}, "status": {"phase": "Succeeded"}},
        {"metadata": {"name": "pending-one"}, "spec": {}, "status": {"phase": "Pending"}},
    ]
    assert gop.diagnose_operands(policy, daemonsets, pods) == [
        "ClusterPolicy cluster-policy: state notReady",
        "  condition Ready: device plugin not ready",
        "DaemonSet nvidia-device-plugin-daemonset: 1/2 pods ready",
        "Pod pending-one on (unscheduled): phase Pending, not Ready",
        "Pod nvidia-device-plugin-daemonset-b on gpu-b: plugin: CrashLoopBackOff (back-off 5m)",
    ]
    assert gop.diagnose_operands(None, [], [])[0].startswith("ClusterPolicy does not exist")


def test_cluster_policy_state():
    assert gop.cluster_policy_state(None) is None
    assert gop.cluster_policy_state({"status": {"state": "ready"}}) == "ready"
    assert gop.cluster_policy_state({}) is None


def test_daemonsets_not_rolled_out():
    done = {"metadata": {"name": "a", "generation": 2},
            "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberReady": 2}}
    unseen = {"metadata": {"name": "b", "generation": 3}, "status": {"observedGeneration": 2, "desiredNumberScheduled": 1,
                                                                     "numberReady": 1}}
    rolling = {"metadata": {"name": "c", "generation": 1},
               "status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1, "numberReady": 2}}
    no_updated_field = {"metadata": {"name": "d"}, "status": {"desiredNumberScheduled": 1, "numberReady": 1}}
    assert gop.daemonsets_not_rolled_out([rolling, done, unseen, no_updated_field]) == [
        "DaemonSet b: generation 3 not observed yet", "DaemonSet c: 1/2 updated, 2/2 ready"]
    assert gop.daemonsets_not_rolled_out([]) == []


# -- Helm (steps over an injected command runner) ---------------------------------------------------

class Runner:
    """Answers argv by its first two words; records (argv, stdin) in ``calls``, the version check (before
    the first helm command, once) in ``versions``."""

    def __init__(self, answers):
        self.answers = {("version", "--short"): (0, "v3.14.2+gabc\n", ""), **answers}
        self.calls = []
        self.versions = []

    def __call__(self, argv, data):
        (self.versions if argv[1:2] == ["version"] else self.calls).append((argv, data))
        return self.answers.get(tuple(argv[1:3]), (0, "", ""))


def test_helm_steps_parse_and_raise():
    runner = Runner({("version", "--short"): (0, "v3.14.2+gabc\n", ""),
                     ("list", "-n"): (0, json.dumps([{"name": "gpu-operator", "chart": "gpu-operator-v25.10.1"}]), ""),
                     ("get", "values"): (0, "null", ""),
                     ("show", "chart"): (0, "name: gpu-operator\nversion: v25.10.1\n", ""),
                     ("show", "crds"): (0, "---\n", "")})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    assert helm.version() == (3, 14, 2)
    assert helm.release("gpu-operator", "gpu-operator")["chart"] == "gpu-operator-v25.10.1"
    assert helm.values("gpu-operator", "gpu-operator") == {}
    assert helm.chart_metadata("nvidia/gpu-operator", "25.10.1")["name"] == "gpu-operator"
    assert helm.crds_text("nvidia/gpu-operator", "v25.10.1") == "---\n"
    with pytest.raises(HelmError, match="chart_version v26.1.0 does not match the chart nvidia/gpu-operator"):
        helm.chart_metadata("nvidia/gpu-operator", "v26.1.0")
    with pytest.raises(HelmError, match="chart_version is required for the repository chart nvidia/gpu-operator"):
        helm.chart_metadata("nvidia/gpu-operator", None)
    with pytest.raises(HelmError, match="chart_ref /no/such: no such chart directory or archive"):
        helm.chart_metadata("/no/such", None)
    old = _helm.Helm(HelmCommand("helm"), Runner({("version", "--short"): (0, "v3.11.0", "")}))
    with pytest.raises(HelmError, match="too old"):
        old.version()


def test_helm_failed_command_carries_argv_and_rc():
    helm = _helm.Helm(HelmCommand("helm"), Runner({("uninstall", "r"): (1, "", "Error: boom\n")}))
    with pytest.raises(_helm.HelmFailed) as err:
        helm.call(helm.command.uninstall("r", "ns"), "uninstall")
    assert str(err.value) == "helm uninstall failed (rc=1): Error: boom"
    assert err.value.rc == 1 and err.value.argv[:3] == ["helm", "uninstall", "r"]


def test_sync_repository_adds_refreshes_and_dry_run():
    runner = Runner({("repo", "list"): (1, "Error: no repositories to show", "")})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    assert helm.sync_repository("nvidia", "https://n", None, None, dry_run=True) is False
    assert [argv[1:3] for argv, _data in runner.calls] == [["repo", "list"]]
    assert helm.sync_repository("nvidia", "https://n", "u", "secret") is True
    assert [argv[1:3] for argv, _data in runner.calls[1:]] == [["repo", "list"], ["repo", "add"], ["repo", "update"]]
    assert runner.calls[2][1] == "secret" and "secret" not in runner.calls[2][0]
    listed = Runner({("repo", "list"): (0, json.dumps([{"name": "nvidia", "url": "https://n"}]), "")})
    helm = _helm.Helm(HelmCommand("helm"), listed)
    assert helm.repositories() == {"nvidia": "https://n"}
    assert helm.sync_repository("nvidia", "https://n", None, None, dry_run=True) is True
    assert helm.sync_repository("nvidia", "https://n", None, None) is True
    assert [argv[1:3] for argv, _data in listed.calls] == [["repo", "list"]] * 3 + [["repo", "update"]]


def test_upgrade_install_values_file_is_private_and_removed(tmp_path):
    seen = {}

    def runner(argv, data):
        if argv[1] == "version":
            return 0, "v4.1.4+g05fa379\n", ""
        path = argv[argv.index("-f") + 1]
        seen.update(path=path, mode=oct(os.stat(path).st_mode & 0o777), values=json.load(open(path)))
        return 0, "", ""
    _helm.Helm(HelmCommand("helm"), runner).upgrade_install("r", "nvidia/gpu-operator", "ns", {"mig": {"strategy": "mixed"}},
                                                            "v1", str(tmp_path))
    assert seen["mode"] == "0o600" and seen["values"] == {"mig": {"strategy": "mixed"}}
    assert os.path.dirname(seen["path"]) == str(tmp_path) and not os.path.exists(seen["path"])


def test_find_helm(tmp_path):
    binary = tmp_path / "helm"
    binary.write_text("#!/bin/sh\n")
    with pytest.raises(HelmError, match="is not an executable file"):
        _helm.find_helm(str(binary), lambda name: name)
    binary.chmod(0o755)
    assert _helm.find_helm(str(binary), lambda name: "unused") == str(binary)
    assert _helm.find_helm("helm", lambda name: "/usr/bin/" + name) == "/usr/bin/helm"

    def missing(name):
        raise ValueError('Failed to find required executable "%s" in paths: /bin' % name)
    with pytest.raises(HelmError, match='Failed to find required executable "helm"'):
        _helm.find_helm("helm", missing)


# -- _gpu_operator: the release plan and readiness ----------------------------------------------------

ENTRY = {"name": "gpu-operator", "namespace": "gpu-operator", "revision": "3", "status": "deployed",
         "chart": "gpu-operator-v25.10.1", "app_version": "v25.10.1"}


def test_release_info_and_state():
    info = gop.release_info(ENTRY, "gpu-operator")
    assert info == {"name": "gpu-operator", "namespace": "gpu-operator", "revision": 3, "status": "deployed",
                    "chart": "gpu-operator", "chart_version": "v25.10.1", "app_version": "v25.10.1"}
    assert gop.release_info(None) == {}
    assert gop.release_info(dict(ENTRY, chart="weird", revision="x"))["revision"] == "x"
    assert gop.release_state(info, {"a": 1}) == {"chart": "gpu-operator", "chart_version": "v25.10.1", "values": {"a": 1}}
    assert gop.release_state({}, {}) == {}


def test_release_action_and_pending():
    assert gop.release_action(None, "gpu-operator", "v25.10.1", {}, {}) == "installed"
    assert gop.release_action(ENTRY, "gpu-operator", "25.10.1", {"a": 1}, {"a": 1}) == "unchanged"
    assert gop.release_action(ENTRY, "gpu-operator", "v26.1.0", {}, {}) == "upgraded"
    assert gop.release_action(ENTRY, "gpu-operator", "v25.10.1", {}, {"a": 1}) == "upgraded"
    assert gop.release_action(dict(ENTRY, status="failed"), "gpu-operator", "v25.10.1", {}, {}) == "upgraded"
    assert gop.pending_problem(ENTRY, "gpu-operator") is None
    assert gop.pending_problem(None, "gpu-operator") is None
    assert gop.pending_problem(dict(ENTRY, status="pending-upgrade"), "gpu-operator").startswith(
        "release gpu-operator is pending-upgrade: another helm operation is in progress")


def test_readiness_helpers():
    assert gop.policy_not_ready(None) == "absent"
    assert gop.policy_not_ready({"metadata": {}}) == "no status"
    assert gop.policy_not_ready({"status": {"state": "notReady"}}) == "notReady"
    assert gop.policy_not_ready({"status": {"state": "ready"}}) is None
    assert gop.rollout_state([]) == (True, "ready")
    done, detail = gop.rollout_state([{"metadata": {"name": "ds", "generation": 2}, "status": {"observedGeneration": 1}}])
    assert not done and detail == "ready, but DaemonSet ds: generation 2 not observed yet"
    assert gop.timeout_report(["ClusterPolicy x: state notReady"], "notReady") == (
        ["ClusterPolicy x: state notReady"], "ClusterPolicy x: state notReady")
    assert gop.timeout_report(["P", "D1"], "ready, but D2; D3") == (["P", "D1", "D2", "D3"], "D1 | D2 | D3")


class PullingRunner(Runner):
    """`helm pull --untar` writes a chart with one subchart directory into --untardir."""

    def __call__(self, argv, data):
        if argv[1] == "pull":
            target = os.path.join(argv[argv.index("--untardir") + 1], "gpu-operator", "charts", "node-feature-discovery")
            os.makedirs(target)
            with open(os.path.join(target, "..", "README"), "w", encoding="utf-8") as handle:
                handle.write("not a chart\n")
        return super().__call__(argv, data)


def test_subcharts_of_a_repository_chart_are_read_from_a_pulled_copy():
    runner = PullingRunner({("show", "chart"): (0, "name: node-feature-discovery\nversion: 0.19.0\nappVersion: v0.19.0\n", ""),
                            ("show", "values"): (0, "image: {repository: registry.k8s.io/nfd/node-feature-discovery}\n", "")})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    found = helm.subcharts("nvidia/gpu-operator", "v26.7.0")
    assert found == {"node-feature-discovery": ("image: {repository: registry.k8s.io/nfd/node-feature-discovery}\n", "v0.19.0")}
    pull = runner.calls[0][0]
    assert pull[:3] == ["helm", "pull", "nvidia/gpu-operator"] and pull[-2:] == ["--version", "v26.7.0"] and "--untar" in pull
    assert [argv[1:3] for argv, _data in runner.calls[1:]] == [["show", "chart"], ["show", "values"]]
    assert not os.path.exists(os.path.dirname(os.path.dirname(runner.calls[1][0][3])))  # the copy is gone


def test_subcharts_of_a_local_chart_without_charts_directory(tmp_path):
    runner = Runner({})
    assert _helm.Helm(HelmCommand("helm"), runner).subcharts(str(tmp_path), None) == {}
    assert runner.calls == []


def test_the_version_is_checked_once_before_the_first_command_and_not_without_one():
    runner = Runner({})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    assert helm.checked_version is None and runner.versions == []  # nothing asked yet: no helm
    helm.release("ns", "r")
    helm.values("r", "ns")
    assert len(runner.versions) == 1 and helm.checked_version == (3, 14, 2)
    assert [argv[1:3] for argv, _data in runner.calls] == [["list", "-n"], ["get", "values"]]


def test_a_too_old_helm_runs_no_command():
    runner = Runner({("version", "--short"): (0, "v3.11.3\n", "")})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    with pytest.raises(_helm.HelmError, match="too old"):
        helm.upgrade_install("r", "nvidia/gpu-operator", "ns", {}, "v1", "/tmp")
    assert runner.calls == [] and helm.checked_version is None


def test_a_helmignore_that_is_not_utf8_leaves_the_chart_to_helm(tmp_path):
    chart = tmp_path / "chart"
    (chart / "crds").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 1.2.3\n")
    (chart / "crds" / "a.yaml").write_text("kind: A\n")
    (chart / ".helmignore").write_bytes(b"\xff\xfe*.bak\n")
    runner = Runner({("show", "crds"): (0, "---\nkind: A\n\n", "")})
    helm = _helm.Helm(HelmCommand("helm"), runner)
    assert helm.local_chart(str(chart)) is None
    assert helm.crds_text(str(chart), None) == "---\nkind: A\n\n"
    assert [argv[1:3] for argv, _data in runner.calls] == [["show", "crds"]]

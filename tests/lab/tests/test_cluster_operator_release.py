"""gpu_operator's release lifecycle against the lab (issue 10 #5 #9 #21, issue 11 part 4).

Secrets in values never shown; an upgrade after a sharing change or a MIG backend switch meets no
field-manager conflict and keeps the collection's ClusterPolicy fields; a skip-a-release-line
upgrade and an unparsable version are refused with nothing changed; a release left
``pending-upgrade`` is refused with the way out, or rolled back and retried; the first install
names the device-plugin ConfigMap from the start without the plugin failing on it.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys

from labtools import BUILD, REPO, wait_until
from test_cluster_modules_operator import CHART, bumped_chart, helm, lab, operator_args  # noqa: F401 pylint: disable=unused-import

SECRET = "S3cr3t-NLS-T0ken-7f3a"
OTHER_SECRET = "Hidden-Value-42xyz"
SECRET_VALUES = {"driver": {"licensingConfig": {"token": SECRET}}, "custom": {"myField": OTHER_SECRET}}
TS2 = {"name": "ts2", "strategy": "time-slicing", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}],
       "nodes": ["gpu-b"]}


def raw_module_output(lab, module, args, check=False, diff=False, env=None) -> str:
    """The module's whole stdout, its ``invocation`` included (what Ansible shows with -v)."""
    path = os.path.join(lab.tmp, "raw-%s.json" % module)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check, _ansible_diff=diff,
                                               _ansible_tmpdir=lab.tmp, _ansible_verbosity=4)}, handle)
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.sharing.plugins.modules." + module, path],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=BUILD, **(env or {})),
                          timeout=600, check=False)
    return proc.stdout + proc.stderr


def test_secret_values_are_never_shown(lab, helm, tmp_path):
    env = helm.environment
    plain = operator_args(lab, helm, values={"driver": {"licensingConfig": {"token": SECRET}}})
    out = raw_module_output(lab, "gpu_operator", plain, check=True, diff=True, env=env)
    assert '"action": "installed"' in out and SECRET not in out, out
    args = operator_args(lab, helm, values=SECRET_VALUES, redact_keys=["myField"])
    out = raw_module_output(lab, "gpu_operator", args, check=True, diff=True, env=env)
    assert '"action": "installed"' in out and SECRET not in out and OTHER_SECRET not in out, out
    result = lab.run("gpu_operator", args, diff=True, env=env)
    assert result["changed"] and result["release_values"]["driver"]["licensingConfig"]["token"] == "<redacted>"
    assert result["release_values"]["custom"]["myField"] == "<redacted>"
    assert SECRET not in json.dumps(result) and OTHER_SECRET not in json.dumps(result)
    # the role, -vvv, --diff, a changed value and the Ansible log
    playbook, log = tmp_path / "secret.yml", tmp_path / "ansible.log"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "roles": [{
        "role": "gpufleet.sharing.gpu_operator", "gpu_operator_chart_ref": CHART, "gpu_operator_chart_version": "",
        "gpu_operator_repo_url": "", "gpu_operator_helm_binary": helm.binary, "gpu_operator_kubeconfig": lab.kubeconfig,
        "gpu_operator_mig_manager_enabled": False,
        "gpu_operator_values": dict(SECRET_VALUES, other={"password": "pw-" + SECRET}),
        "gpu_operator_redact_keys": ["myField"], "gpu_operator_wait_timeout": 60, "gpu_operator_wait_interval": 0.5}]}]))
    proc = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-vvv", "--diff", "-i", "localhost,",
                           "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_LOG_PATH=str(log), **env))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "value changes: other: added" in proc.stdout
    for text in (proc.stdout, proc.stderr, log.read_text()):
        assert SECRET not in text and OTHER_SECRET not in text


def test_upgrade_path_guard_and_bad_versions(lab, helm, tmp_path):
    env = helm.environment
    assert lab.run("gpu_operator", operator_args(lab, helm, chart_ref=bumped_chart(tmp_path, "25.10.1")), env=env)["changed"]
    rv, calls, chart_26_7 = lab.rv(), len(helm.calls()), bumped_chart(tmp_path, "26.7.0")
    jump = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_26_7), env=env)
    assert jump["failed"], jump
    assert "from 25.10.1 to 26.7.0 skips the release line v26.3" in jump["msg"] and "v26.3.x first" in jump["msg"]
    bad = lab.run("gpu_operator", operator_args(lab, helm, chart_ref="nvidia/gpu-operator", chart_version="v26.x"), env=env)
    assert bad["failed"] and "chart_version" in bad["msg"] and "does not parse" in bad["msg"], bad
    assert lab.rv() == rv
    assert not [a for a in helm.calls()[calls:] if a[:1] in (["upgrade"], ["rollback"], ["uninstall"])]
    forced = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_26_7, allow_unsupported_upgrade=True),
                     env=env)
    assert forced["changed"] and forced["action"] == "upgraded" and forced["release"]["chart_version"] == "26.7.0", forced


def test_downgrade_is_refused_unless_allowed(lab, helm, tmp_path):
    """Issue 21 (4): v26.7.0 installed, an older chart asked (another line or the one before): refused in
    check mode and for real, naming what is installed, what was asked and why; allow_downgrade forces it."""
    env = helm.environment
    assert lab.run("gpu_operator", operator_args(lab, helm, chart_ref=bumped_chart(tmp_path, "26.7.0")), env=env)["changed"]
    rv, calls = lab.rv(), len(helm.calls())
    charts = {older: bumped_chart(tmp_path, older) for older in ("24.9.0", "26.3.0")}
    for older, chart in charts.items():
        args = operator_args(lab, helm, chart_ref=chart)
        for check in (True, False):
            refused = lab.run("gpu_operator", args, check=check, env=env)
            assert refused.get("failed"), refused
            assert ("chart downgrade from 26.7.0 (installed) to %s (asked) is refused" % older) in refused["msg"], refused
            assert "NVIDIA supports upgrades only" in refused["msg"] and "allow_downgrade" in refused["msg"]
    assert lab.rv() == rv
    assert not [a for a in helm.calls()[calls:] if a[:1] in (["upgrade"], ["install"], ["rollback"], ["uninstall"])]
    forced = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=charts["26.3.0"], allow_downgrade=True), env=env)
    assert forced["changed"] and forced["release"]["chart_version"] == "26.3.0", forced


def test_upgrade_after_sharing_and_mig_backend_change_keeps_them(lab, helm, tmp_path):
    env = helm.environment
    assert lab.run("gpu_operator", operator_args(lab, helm), env=env)["changed"]
    shared = lab.run("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [TS2], "wait_timeout": 60,
                                     "wait_interval": 0.5})
    assert shared["changed"] and shared["cluster_policy_patch"], shared
    upgraded = lab.run("gpu_operator", operator_args(lab, helm, mig_strategy="single"), env=env)
    assert not upgraded.get("failed"), upgraded["msg"]
    assert upgraded["carried_forward"] == ["devicePlugin.config.name"]
    config = lab.k8s.get("ClusterPolicy", "cluster-policy")["spec"]["devicePlugin"]["config"]
    assert config["name"] == "gpufleet-device-plugin-config", config
    # the collection's MIG manager ConfigMap (mig_operator_config), then back to host-managed MIG
    lab.k8s.patch("ClusterPolicy", "cluster-policy", {"spec": {"migManager": {"config": {"name": "gpufleet-mig"}}}},
                  patch_type="merge")
    chart_v2 = bumped_chart(tmp_path, "0.2.0")
    switched = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_v2), env=env)
    assert not switched.get("failed"), switched["msg"]
    spec = lab.k8s.get("ClusterPolicy", "cluster-policy")["spec"]
    assert spec["devicePlugin"]["config"]["name"] == "gpufleet-device-plugin-config"
    assert spec["migManager"]["config"]["name"] == "gpufleet-mig" and spec["mig"]["strategy"] == "mixed"
    again = lab.run("gpu_operator", operator_args(lab, helm, chart_ref=chart_v2), env=env)
    assert not again["changed"], again


def _mark_latest_pending(lab) -> None:
    """What a helm killed mid-upgrade leaves: the newest release record says pending-upgrade."""
    secrets = lab.k8s.list("Secret", namespace="gpu-operator", label_selector="owner=helm")
    latest = max(secrets, key=lambda s: int(s["metadata"]["labels"]["version"]))
    record = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(latest["data"]["release"]))))
    record["info"]["status"] = "pending-upgrade"
    data = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(record).encode()))).decode()
    lab.k8s.patch("Secret", latest["metadata"]["name"], {"metadata": {"labels": {"status": "pending-upgrade"}},
                                                         "data": {"release": data}}, namespace="gpu-operator",
                  patch_type="merge")


def test_pending_upgrade_refused_then_recovered(lab, helm):
    env = helm.environment
    assert lab.run("gpu_operator", operator_args(lab, helm), env=env)["changed"]
    assert lab.run("gpu_operator", operator_args(lab, helm, mig_strategy="single"), env=env)["changed"]
    _mark_latest_pending(lab)
    rv = lab.rv()
    refused = lab.run("gpu_operator", operator_args(lab, helm, mig_strategy="none"), env=env)
    assert refused["failed"] and "pending-upgrade" in refused["msg"], refused
    assert "recover_pending" in refused["msg"] and "helm rollback gpu-operator -n gpu-operator" in refused["msg"]
    assert lab.rv() == rv
    recovered = lab.run("gpu_operator", operator_args(lab, helm, mig_strategy="none", recover_pending=True), env=env)
    assert not recovered.get("failed"), recovered["msg"]
    assert recovered["recovered"] == {"status": "pending-upgrade", "step": "rollback"}
    assert recovered["release"]["status"] == "deployed" and recovered["action"] == "upgraded"
    assert lab.k8s.get("ClusterPolicy", "cluster-policy")["spec"]["mig"]["strategy"] == "none"


def test_first_install_names_the_sharing_configmap_from_the_start(lab, helm):
    args = operator_args(lab, helm, device_plugin_config={"name": "gpufleet-device-plugin-config", "default": "ts2"},
                         wait_timeout=20)
    installed = lab.run("gpu_operator", args, env=helm.environment)
    assert not installed.get("failed"), installed["msg"]
    assert installed["configmap_created"] == "gpufleet-device-plugin-config"
    configmap = lab.k8s.get("ConfigMap", "gpufleet-device-plugin-config", "gpu-operator")
    assert configmap["data"] == {"ts2": "version: v1\n"}
    shared = lab.run("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [TS2], "default_config": "ts2",
                                     "wait_timeout": 60, "wait_interval": 0.5})
    assert not shared.get("failed"), shared["msg"]
    wait_until("gpu-b shares 2 ways", lambda: (lab.k8s.get("Node", "gpu-b")["status"]["capacity"] or {}).get(
        "nvidia.com/gpu") == "2")


def test_sharing_check_mode_on_a_fresh_cluster_shows_the_plan(lab):
    """No operator yet (the play would install it first): check mode plans, warns and writes nothing."""
    rv = lab.rv()
    node_gpus = {"gpu-b": [{"model": "H100-80GB", "count": 1, "product": "NVIDIA H100 80GB HBM3"}]}
    planned = lab.run("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [TS2], "node_gpus": node_gpus},
                      check=True, diff=True)
    assert not planned.get("failed"), planned["msg"]
    assert planned["changed"] and planned["configmap"]["action"] == "created", planned
    assert planned["labels_changed"] == {"gpu-b": {"before": None, "after": "ts2"}}
    assert planned["cluster_policy_patch"] == {"spec": {"devicePlugin": {"config": {"name": "gpufleet-device-plugin-config"}}}}
    assert "no ClusterPolicy yet" in json.dumps(planned.get("warnings")), planned.get("warnings")
    assert lab.rv() == rv
    real = lab.run("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [TS2], "node_gpus": node_gpus})
    assert real["failed"] and "install the GPU Operator first" in real["msg"]

"""site.yml and verify.yml through ansible-runner, the engine under AWX / Automation Platform (issue 14 #4).

A private data directory laid out as AWX's job runs lay it out (``project/`` with playbooks that
import the collection's, ``inventory/``, ``env/extravars``, ``env/envvars``) runs against a lab
fleet. The reports must land in the job's artifact directory (the one ``ansible-runner worker``
streams back to the controller), and the outcome must reach the job's stats event as
``set_stats`` data (what AWX keeps as the job's artifacts and passes to the next workflow node).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, Dict, List

import pytest
import yaml

from gpulab import hosts

from labtools import BUILD, FAST_ENV, REPO, environ
from rollout_lab import _helm

ansible_runner = pytest.importorskip("ansible_runner")

pytestmark = pytest.mark.lab_hosts

SPECS = ["awx-0=A100-40GB:1@gpu_hosts"]
PLAYBOOKS = {"site.yml": "gpufleet.sharing.site", "verify.yml": "gpufleet.sharing.verify"}


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    """A lab fleet and an AWX-style private data directory pointing at it."""
    lab_dir = str(tmp_path_factory.mktemp("runnerlab"))
    with environ(FAST_ENV):
        info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in SPECS], cluster=True,
                        first_address="127.0.14.2")
    try:
        private = os.path.join(lab_dir, "job")
        _layout(private, info)
        yield private
    finally:
        hosts.down(lab_dir)


def _layout(private: str, info: Dict[str, Any]) -> None:
    for sub in ("project", "inventory", "env"):
        os.makedirs(os.path.join(private, sub))
    for name, fqcn in PLAYBOOKS.items():  # an AWX project: playbooks that import the collection's
        _dump(os.path.join(private, "project", name), [{"name": "gpufleet.sharing " + name, "ansible.builtin.import_playbook": fqcn}])
    shutil.copy(info["inventory"], os.path.join(private, "inventory", "hosts.yml"))
    _dump(os.path.join(private, "env", "extravars"), {
        "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
        "gpu_operator_helm_binary": _helm(), "gpu_operator_chart_version": "", "gpu_operator_repo_url": "",
        "gpu_operator_driver_enabled": False, "gpu_operator_wait_timeout": 120, "gpu_operator_wait_interval": 1,
        "gpufleet_rollout_serial": [1, "100%"], "gpufleet_rollout_settle_timeout": 60, "verify_pod_timeout": 30,
        "mig_config": "all-balanced",
    })
    # The cluster credential as an AWX credential type injects it (docs/awx.md): environment
    # variables, the token never in extra vars, files or argv.
    with open(os.path.join(os.path.dirname(info["cluster"]["kubeconfig"]), "cluster.json"), encoding="utf-8") as handle:
        cluster = json.load(handle)
    _dump(os.path.join(private, "env", "envvars"), {
        "K8S_AUTH_HOST": cluster["url"], "K8S_AUTH_API_KEY": cluster["token"], "K8S_AUTH_SSL_CA_CERT": cluster["ca_file"],
        "ANSIBLE_COLLECTIONS_PATH": BUILD, "ANSIBLE_FORKS": "5",
        "ANSIBLE_SSH_ARGS": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
    })


def _dump(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle)


def _run(private: str, playbook: str, ident: str) -> Any:
    with environ({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}):  # this venv's ansible
        return ansible_runner.run(private_data_dir=private, playbook=playbook, ident=ident, quiet=True)


def _stats(runner: Any) -> Dict[str, Any]:
    events: List[Dict[str, Any]] = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    assert len(events) == 1, [e.get("event") for e in runner.events][-20:]
    return events[0]["event_data"]


def _token(private: str) -> str:
    with open(os.path.join(private, "env", "envvars"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["K8S_AUTH_API_KEY"]


def _assert_no_token(runner: Any, token: str) -> None:
    """What AWX stores and shows of a job (its events and stdout) never holds the cluster token."""
    artifacts = runner.config.artifact_dir
    events = os.path.join(artifacts, "job_events")
    paths = [os.path.join(artifacts, "stdout")] + [os.path.join(events, name) for name in os.listdir(events)]
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            assert token not in handle.read(), path


def _report(runner: Any) -> Dict[str, Any]:
    with open(os.path.join(runner.config.artifact_dir, "gpufleet-reports", "gpufleet-verify.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _task_outcomes(runner: Any, task_prefix: str) -> List[str]:
    return [e["event"] for e in runner.events if e.get("event", "").startswith("runner_on_")
            and e["event"] != "runner_on_start" and (e.get("event_data") or {}).get("task", "").startswith(task_prefix)]


def _stdout(runner: Any) -> str:
    with open(os.path.join(runner.config.artifact_dir, "stdout"), encoding="utf-8") as handle:
        return handle.read()


def test_site_then_verify_as_awx_job_templates(job_dir):
    site = _run(job_dir, "site.yml", "site-1")
    assert (site.status, site.rc) == ("successful", 0), _stdout(site)[-4000:]
    artifacts = site.config.artifact_dir
    assert artifacts == os.path.join(job_dir, "artifacts", "site-1")
    assert os.listdir(os.path.join(artifacts, "job_events"))  # one file per event, as AWX ingests them
    reports = os.path.join(artifacts, "gpufleet-reports")
    assert sorted(os.listdir(reports)) == ["fleet-report.html", "gpufleet-verify.json", "gpufleet-verify.txt",
                                           "rollout-summary.json"]
    with open(os.path.join(reports, "rollout-summary.json"), encoding="utf-8") as handle:
        rollout = json.load(handle)
    assert sorted((row["node"], row["outcome"], row.get("batch")) for row in rollout["nodes"]) == [("awx-0", "changed", 1)]

    _assert_no_token(site, _token(job_dir))
    stats = _stats(site)
    assert stats["failures"] == {} and stats["dark"] == {}
    published = stats["artifact_data"]
    assert published["gpufleet_rollout"] == {
        "run": rollout["run"], "ok": True, "changed": ["awx-0"], "failed": [], "unchanged": [],
        "stopped_early": False, "report": os.path.join(reports, "rollout-summary.json")}
    assert published["gpufleet_verify"]["ok"] is True
    assert published["gpufleet_verify"]["failed_nodes"] == []
    assert published["gpufleet_verify"]["report"] == os.path.join(reports, "gpufleet-verify.json")
    assert published["gpufleet_verify"]["html"] == os.path.join(reports, "fleet-report.html")
    assert _report(site)["pods"]  # the run changed the sharing configs: pods prove them

    # AWX's fact storage hands the facts of the last job to the next one (ansible-runner's jsonfile
    # cache): verify.yml must read the GPUs as they are now, not trust the cached read.
    shutil.copytree(os.path.join(artifacts, "fact_cache"), os.path.join(job_dir, "artifacts", "verify-1", "fact_cache"))
    again = _run(job_dir, "verify.yml", "verify-1")
    assert (again.status, again.rc) == ("successful", 0), _stdout(again)[-4000:]
    assert os.path.isfile(os.path.join(again.config.artifact_dir, "gpufleet-reports", "gpufleet-verify.json"))
    assert _stats(again)["artifact_data"]["gpufleet_verify"]["ok"] is True
    assert "PASSED" in _stdout(again)
    assert _task_outcomes(again, "Read each host's GPUs") == ["runner_on_ok"]
    assert _report(again)["pods"]  # verify.yml on its own: pods by default (gpufleet_verify_pods: always)

    # A no-op site.yml: nothing changes, the nodes are still checked, no pod is started.
    noop = _run(job_dir, "site.yml", "site-2")
    assert (noop.status, noop.rc) == ("successful", 0), _stdout(noop)[-4000:]
    assert _stats(noop)["changed"] == {}
    report = _report(noop)
    assert report["summary"]["ok"] is True and report["summary"]["checks"] > 0 and report["pods"] == []
    assert _stats(noop)["artifact_data"]["gpufleet_rollout"]["unchanged"] == ["awx-0"]
    _assert_no_token(again, _token(job_dir))


def test_a_failed_verification_is_a_failed_job_with_the_failed_nodes_published(job_dir):
    extravars = os.path.join(job_dir, "env", "extravars")
    with open(extravars, encoding="utf-8") as handle:
        saved = handle.read()
    try:
        variables = yaml.safe_load(saved)
        variables["mig_config"] = "all-disabled"  # the plan changes, the hosts do not (verify.yml changes nothing)
        _dump(extravars, variables)
        failed = _run(job_dir, "verify.yml", "verify-2")
    finally:
        with open(extravars, "w", encoding="utf-8") as handle:
            handle.write(saved)
    assert (failed.status, failed.rc) == ("failed", 2)
    published = _stats(failed)["artifact_data"]["gpufleet_verify"]
    assert published["ok"] is False and published["failed_nodes"] == ["awx-0"]

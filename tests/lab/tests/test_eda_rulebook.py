"""The EDA rulebook (issue 37): ansible-rulebook runs extensions/eda/rulebooks/gpu_fleet.yml against a
lab fleet, with the collection's own event sources watching the lab cluster's Nodes and listening for
Alertmanager's webhook. Each test makes one event happen in the lab and checks which of the
collection's playbooks ran, and on which hosts (the PLAY RECAP of the job ansible-rulebook printed, and
the reports the playbook wrote): the event's node and no other.

ansible-rulebook needs a Java runtime (Debian's default-jre-headless, `make system-deps`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Dict

import pytest
import yaml

from gpulab import hosts

from labtools import REPO, wait_until
from rollout_lab import flat, start_lab

pytestmark = pytest.mark.lab_hosts

RULEBOOK = os.path.join(REPO, "extensions", "eda", "rulebooks", "gpu_fleet.yml")
SHARING = [{"name": "ts-mig", "strategy": "time-slicing", "nodes": ["flt-1"],
            "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}]
DP_LABEL, MIG_STATE = "nvidia.com/device-plugin.config", "nvidia.com/mig.config.state"
TOKEN = "eda-test-token"  # noqa: S105 (a lab secret)
RECAP = re.compile(r"^(\S+)\s*: ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=\d+", re.M)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Rulebook:
    """ansible-rulebook in the background; ``job(event)`` makes an event happen and returns the job it started."""

    def __init__(self, lab: Any, work: str) -> None:
        self.lab, self.port = lab, free_port()
        inventory = os.path.join(work, "inventory")
        os.makedirs(os.path.join(inventory, "group_vars"))
        shutil.copy(lab.inventory, os.path.join(inventory, "hosts.yml"))
        with open(os.path.join(inventory, "group_vars", "all.yml"), "w", encoding="utf-8") as handle:
            yaml.safe_dump(dict(lab.base_vars(), gpu_sharing_configs=SHARING), handle)
        variables = os.path.join(work, "eda-vars.yml")
        with open(variables, "w", encoding="utf-8") as handle:
            yaml.safe_dump({"gpufleet_kubeconfig": lab.kubeconfig, "gpufleet_webhook_port": self.port,
                            "gpufleet_webhook_token": TOKEN}, handle)
        self.log_path = os.path.join(work, "rulebook.log")
        self.log = open(self.log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
        bindir = os.path.dirname(sys.executable)  # ansible-runner starts ansible-playbook from PATH
        env = dict(lab.env(), PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        self.proc = subprocess.Popen([os.path.join(bindir, "ansible-rulebook"), "-v", "-r", RULEBOOK,  # noqa: S603
                                      "-i", inventory, "--vars", variables],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=work)
        wait_until("the node source's first list", lambda: self.failed() or "gpu_nodes: watching" in self.output(), 120)
        assert not self.failed(), self.output()[-3000:]

    def output(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def failed(self) -> bool:
        return self.proc.poll() is not None

    def job(self, make_event: Any, timeout: float = 300) -> Dict[str, Any]:
        """Clear the reports, make the event, wait for the one job it starts; its plays and recap hosts."""
        shutil.rmtree(self.lab.report_dir, ignore_errors=True)
        start = len(self.output())
        make_event()

        def finished() -> Any:
            assert not self.failed(), self.output()[-3000:]
            text = self.output()[start:]
            if "PLAY RECAP" not in text:
                return None
            recap = text.split("PLAY RECAP", 1)[1]
            return text if RECAP.search(recap) else None

        wait_until("the job of the event", finished, timeout)
        time.sleep(3)  # the rest of the recap, and no second job started by the same event
        # A failed job's output is logged once more, as ansible-rulebook's error: not a second job.
        text = self.output()[start:].split("ansible_rulebook.action.run_playbook - ERROR - ", 1)[0]
        assert text.count("PLAY RECAP") == 1, flat(text)[-4000:]
        return {"text": text, "plays": re.findall(r"^PLAY \[(.*?)\]", text, re.M),
                "hosts": sorted(set(RECAP.findall(text.split("PLAY RECAP", 1)[1])))}

    def post_alert(self, labels: Dict[str, str], token: str = TOKEN) -> int:
        body = json.dumps({"version": "4", "status": "firing", "receiver": "eda", "alerts": [
            {"status": "firing", "labels": labels, "annotations": {"summary": "XID 79 on GPU 0"},
             "startsAt": "2026-12-04T17:00:00Z"}]}).encode("utf-8")
        request = urllib.request.Request("http://127.0.0.1:%d/gpufleet" % self.port, data=body, method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def rulebook(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("edalab"))
    lab = start_lab(lab_dir)
    runner = None
    try:
        result = lab.play("site.yml", gpu_sharing_configs=SHARING)
        assert result.returncode == 0, flat(result.stdout + result.stderr)[-4000:]
        runner = Rulebook(lab, str(tmp_path_factory.mktemp("eda")))
        yield runner
    finally:
        if runner is not None:
            runner.stop()
        hosts.down(lab_dir)


def report(lab: Any, name: str) -> Any:
    with open(os.path.join(lab.report_dir, name), encoding="utf-8") as handle:
        return json.load(handle)


def test_a_failed_mig_state_rolls_out_that_node_only(rulebook):
    lab = rulebook.lab
    job = rulebook.job(lambda: lab.k8s.set_node_labels("flt-1", {MIG_STATE: "failed"}))
    assert job["hosts"] == ["flt-1"], flat(job["text"])[-3000:]  # site.yml --limit flt-1
    assert "Cluster - time-slicing and MPS" in job["plays"] and "Hosts - MIG in batches" not in job["plays"], job["plays"]
    assert [row["node"] for row in report(lab, "rollout-summary.json")["nodes"]] == ["flt-1"]
    assert [n["node"] for n in report(lab, "gpufleet-verify.json")["nodes"]] == ["flt-1"]
    lab.k8s.set_node_labels("flt-1", {MIG_STATE: None})


def test_a_new_gpu_node_rolls_out_that_node_only(rulebook):
    lab = rulebook.lab

    def join() -> None:  # the node leaves the cluster, and its kubelet registers it again
        lab.k8s.delete("Node", "flt-0")
        wait_until("flt-0 deleted", lambda: lab.k8s.get("Node", "flt-0") is None, 30)
        lab.restart_kubelet("flt-0")

    job = rulebook.job(join)
    assert job["hosts"] == ["flt-0"], flat(job["text"])[-3000:]
    assert [n["node"] for n in report(lab, "gpufleet-verify.json")["nodes"]] == ["flt-0"]


def test_an_xid_alert_verifies_that_node(rulebook):
    lab = rulebook.lab
    assert rulebook.post_alert({"alertname": "GPUXidError"}, token="wrong") == 401

    def alerts() -> None:
        # An alert whose node is an inventory pattern starts nothing (a job on every host would be the
        # first recap); then the real one.
        assert rulebook.post_alert({"alertname": "GPUXidError", "Hostname": "all"}) == 202
        assert rulebook.post_alert({"alertname": "GPUXidError", "Hostname": "flt-0", "gpu": "0",
                                    "instance": "10.0.0.7:9400"}) == 202

    job = rulebook.job(alerts)
    assert job["hosts"] == ["flt-0"], flat(job["text"])[-3000:]
    assert job["plays"][-1].startswith("Verify"), job["plays"]
    verified = report(lab, "gpufleet-verify.json")
    assert [n["node"] for n in verified["nodes"]] == ["flt-0"], verified


def test_a_label_changed_by_hand_reports_the_drift_of_that_node(rulebook):
    lab = rulebook.lab
    job = rulebook.job(lambda: lab.k8s.set_node_labels("flt-1", {DP_LABEL: None}))
    assert job["hosts"] == ["flt-1"], flat(job["text"])[-3000:]
    drift = report(lab, "fleet-drift.json")
    assert [(row["node"], row["what"]) for row in drift["drift"]] == [("flt-1", "label " + DP_LABEL)], drift

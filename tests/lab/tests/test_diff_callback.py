"""Issue 43 #7 as the user saw it: ``ansible-playbook --diff`` with ``node_taints`` printed
``[WARNING]: Callback dispatch 'v2_on_file_diff' failed for plugin 'default': 'list' object has no attribute
'splitlines'`` instead of the diff. A real playbook run against the lab API server, check mode then for
real, with the default callback: the diff is printed and no callback method fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from labtools import BUILD, serve_lab

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_node_taints_diff_prints_with_the_default_callback(tmp_path):
    running, _states = serve_lab(str(tmp_path), [("tn", "A100-40GB", 1)])
    try:
        playbook = tmp_path / "taints.yml"
        playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [{
            "name": "Taint the node", "gpufleet.sharing.node_taints": {
                "kubeconfig": running.kubeconfig, "nodes": [{"node": "tn", "taints": [TAINT]}]}}]}]))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default")
        binary = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        for extra in (["--check"], []):
            proc = subprocess.run([binary, "--diff", "-i", "localhost,", "-c", "local",
                                   "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)] + extra,
                                  capture_output=True, text=True, timeout=300, check=False, env=env)
            output = proc.stdout + proc.stderr
            assert proc.returncode == 0, output[-3000:]
            assert not any(w in output for w in ("Callback dispatch", "Failure using method", "splitlines")), output[-3000:]
            assert "--- before: node tn taints" in output and '+        "key": "dedicated",' in output, output[-3000:]
    finally:
        running.stop()

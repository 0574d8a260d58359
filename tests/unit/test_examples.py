"""The example files users copy (docs/examples/) are valid for the tools that read them."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "docs", "examples")
BIN = os.path.dirname(sys.executable)


def test_the_fleet_ansible_cfg_is_read_without_warnings():
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(EXAMPLES, "ansible.cfg"))
    proc = subprocess.run([os.path.join(BIN, "ansible-config"), "dump", "--only-changed", "--format", "json"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    changed = {entry["name"]: entry["value"] for entry in yaml.safe_load(proc.stdout) if isinstance(entry, dict) and "name" in entry}
    assert changed["DEFAULT_FORKS"] == 50
    assert changed["DEFAULT_GATHERING"] == "explicit"
    assert changed["CACHE_PLUGIN"] == "memory"  # no fact cache: GPUs are read in every run


def test_the_execution_environment_example_names_the_collection_and_helm():
    with open(os.path.join(EXAMPLES, "execution-environment.yml"), encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    assert definition["version"] == 3
    collections = definition["dependencies"]["galaxy"]["collections"]
    assert [c["type"] for c in collections] == ["file"]
    assert collections[0]["name"].endswith("gpufleet-sharing-COLLECTION_VERSION.tar.gz")
    assert {f["src"] for f in definition["additional_build_files"]} == {"gpufleet-sharing-COLLECTION_VERSION.tar.gz", "helm"}

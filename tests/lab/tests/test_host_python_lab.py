"""The GPU hosts' Python through Ansible (issue 37): on a lab SSH host, gpu_facts runs with the oldest
Python that both this ansible-core and the collection manage, and is refused, clearly, on one older than
the collection's minimum (3.7) where this ansible-core still manages it (2.16 and Python 3.6, RHEL 8's
platform Python): the host, its Python and the minimum named, no traceback, the play's verdict failed.

Real interpreters from pyenv, on the lab host (an sshd on this machine); a version leg of the matrix
(tests/tools/matrix_leg.sh) runs this file with its own ansible-core.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest
from ansible.release import __version__ as CORE_VERSION

from gpulab import hosts
from labtools import BUILD

pytestmark = pytest.mark.lab_hosts

HOST = "py-h100"
CORE = tuple(int(part) for part in CORE_VERSION.split(".")[:2])
# The oldest target Python of each ansible-core (its support matrix), and the collection's minimum.
# (2.16: 2.7 and 3.6+; 2.17: 3.7+; 2.18, 2.19: 3.8+; 2.20, 2.21: 3.9+, ansible/module_utils/basic.py _PY_MIN.)
OLDEST_TARGET = (3, 6) if CORE <= (2, 16) else (3, 7) if CORE == (2, 17) else (3, 8) if CORE <= (2, 19) else (3, 9)
MINIMUM = (3, 7)


def interpreter(version):
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%d.%d.*/bin/python%d.%d" % (version * 2))))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("pylab"))
    info = hosts.up(lab_dir, [hosts.parse_host_spec(HOST + "=H100-80GB:1")],
                    first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.0.2"))
    try:
        yield info["inventory"]
    finally:
        hosts.down(lab_dir)


def read_gpus(inventory, tmp_path, python):
    playbook = tmp_path / "read.yml"
    out = tmp_path / "result.json"
    playbook.write_text(textwrap.dedent("""\
        - hosts: all
          gather_facts: false
          tasks:
            - gpufleet.sharing.gpu_facts: {gather_profiles: false, gather_processes: false}
              register: read
              ignore_errors: true
            - ansible.builtin.copy: {content: "{{ read | to_json }}", dest: "%s"}
              delegate_to: localhost
        """ % out))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, str(playbook),
            "-e", "ansible_python_interpreter=%s" % python]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1"))
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads(out.read_text())


def test_gpu_facts_runs_on_the_oldest_python_both_manage(lab, tmp_path):
    version = max(OLDEST_TARGET, MINIMUM)
    python = interpreter(version)
    if python is None:
        pytest.skip("no Python %d.%d on this machine (pyenv)" % version)
    proc, result = read_gpus(lab, tmp_path, python)
    assert not result.get("failed"), (result, proc.stdout[-3000:])
    gpus = result["ansible_facts"]["gpufleet_gpus"]
    assert len(gpus) == 1 and "H100" in json.dumps(gpus), gpus


def test_an_older_python_is_refused_with_the_host_its_python_and_the_minimum(lab, tmp_path):
    if OLDEST_TARGET >= MINIMUM:
        pytest.skip("ansible-core %s manages no Python older than %d.%d" % ((CORE_VERSION,) + MINIMUM))
    python = interpreter(OLDEST_TARGET)
    if python is None:
        pytest.skip("no Python %d.%d on this machine (pyenv)" % OLDEST_TARGET)
    proc, result = read_gpus(lab, tmp_path, python)
    assert result["failed"] and result["minimum_python"] == "3.7", result
    assert "gpufleet.sharing.gpu_facts needs Python 3.7 or newer on the GPU host: " in result["msg"]
    assert ("with Python %d.%d." % OLDEST_TARGET) in result["msg"] and python in result["msg"], result["msg"]
    assert "Traceback" not in proc.stdout + json.dumps(result), proc.stdout[-3000:]

"""The host modules' minimum Python (module_utils/base/_host_python.py, issue 37).

The host modules (gpu_facts, mig_config) run on the GPU hosts with the host's Python. On one older
than the minimum they end with a failed result naming the host, its Python and the minimum; never a
traceback. Checked with the real old interpreters where this machine has them (pyenv's 3.6; 3.7, the
minimum, must get past the refusal), and always as pure logic.
"""

import glob
import json
import os
import subprocess

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._host_python import MINIMUM_PYTHON, too_old_message

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BUILD = os.path.join(REPO, ".build")
HOST_MODULES = ("gpu_facts", "mig_config")


def interpreter(version):
    """A real interpreter of that version (pyenv's), or None."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (version, version))))
    return found[-1] if found else None


def test_the_minimum_is_37_and_older_ones_are_named_with_the_host():
    assert MINIMUM_PYTHON == (3, 7)
    message = too_old_message("gpufleet.sharing.gpu_facts", (3, 6, 8, "final", 0), "/usr/libexec/platform-python", "gpu-07")
    assert message.startswith("gpufleet.sharing.gpu_facts needs Python 3.7 or newer on the GPU host: gpu-07 runs it "
                              "with Python 3.6.8 (/usr/libexec/platform-python).")
    assert "ansible_python_interpreter" in message and "nothing was changed" in message
    assert too_old_message("m", (2, 7, 18), "/usr/bin/python", "h").count("Python 2.7.18") == 1
    for new_enough in ((3, 7, 0), (3, 12, 1), (4, 0, 0)):
        assert too_old_message("m", new_enough, "/usr/bin/python3", "h") is None


@pytest.mark.parametrize("module", HOST_MODULES)
def test_on_python_36_a_host_module_refuses_cleanly(module):
    python = interpreter("3.6")
    if python is None:
        pytest.skip("no Python 3.6 on this machine (pyenv)")
    path = os.path.join(REPO, "plugins", "modules", module + ".py")
    proc = subprocess.run([python, path], cwd=REPO, env=dict(os.environ, PYTHONPATH=BUILD),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    result = json.loads(proc.stdout)
    assert result["failed"] and not result["changed"] and result["minimum_python"] == "3.7"
    assert ("gpufleet.sharing.%s needs Python 3.7 or newer on the GPU host: " % module) in result["msg"]
    assert "with Python 3.6." in result["msg"] and python in result["msg"]


@pytest.mark.parametrize("module", HOST_MODULES)
def test_on_python_37_a_host_module_gets_past_the_refusal(module):
    """3.7 compiles the module and everything it imports from the collection, and is not refused
    (it then stops on ansible-core's own module_utils, which this test does not ship: that is not ours)."""
    python = interpreter("3.7")
    if python is None:
        pytest.skip("no Python 3.7 on this machine (pyenv)")
    path = os.path.join(REPO, "plugins", "modules", module + ".py")
    proc = subprocess.run([python, path], cwd=REPO, env=dict(os.environ, PYTHONPATH=BUILD),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert "needs Python" not in proc.stdout, proc.stdout
    assert "SyntaxError" not in proc.stderr, proc.stderr
    compiled = subprocess.run([python, "-m", "compileall", "-q", "-f", os.path.join(REPO, "plugins", "modules"),
                               os.path.join(REPO, "plugins", "module_utils")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert compiled.returncode == 0, compiled.stdout[-3000:]

"""The lab's tool server: a host's nvidia-smi answers as the simulator does, at a real one's cost.

A real nvidia-smi uses about 20 ms of its own host's CPU; the lab's launcher used about 55 ms of the
machine the controller runs on, importing the simulator (gpulab.toolclient says why that matters).
These tests fail on a lab whose launchers load the simulator themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import List

import pytest

import labtools
from gpulab import gpustate, hosts, launchers, toolclient, toolserver
from gpulab.hosts import processes
from gpulab.smi import command

pytestmark = pytest.mark.lab_hosts

LAB_ROOT = launchers.LAB_ROOT
SPECS = ["srv-h100=H100-80GB:2", "srv-a100=A100-40GB:1"]

# Read-only calls and refusals; the plain table is left out (its first line is the time of the call).
CALLS = [["-L"], ["--query-gpu=index,name,uuid,mig.mode.current,mig.mode.pending", "--format=csv,noheader"],
         ["mig", "-lgi"], ["mig", "-lgip"], ["-i", "9", "-L"], ["--no-such-option"], ["mig", "-cgi", "99", "-C"]]


class Lab:
    def __init__(self, lab_dir: str, info: dict):
        self.dir = lab_dir
        self.hosts = {h["name"]: h for h in info["hosts"]}
        self.paths = hosts.LabPaths(lab_dir)

    def ssh(self, host: str, *argv: str) -> subprocess.CompletedProcess:
        return labtools.ssh(self.paths.client_key, self.hosts[host], *argv)

    def launcher(self, host: str) -> str:
        return os.path.join(self.paths.bin_dir(host), "nvidia-smi")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("tools"))
    with labtools.lab_hosts(lab_dir, SPECS) as info:
        yield Lab(lab_dir, info)


def _imports(stderr: str) -> List[str]:
    """Module names of ``python -X importtime`` output."""
    return [line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")]


def test_a_hosts_nvidia_smi_answers_as_the_simulator_does(lab):
    """Over SSH, through the server: the same output, errors and exit status as the simulator run here;
    a change made through the server is in the host's state."""
    enable = lab.ssh("srv-h100", "nvidia-smi", "-i", "0", "-mig", "1")
    assert enable.returncode == 0 and "Enabled MIG Mode" in enable.stdout, enable
    gpu = gpustate.load(lab.paths.state_file("srv-h100")).gpus[0]
    assert gpu.mig_current
    create = lab.ssh("srv-h100", "nvidia-smi", "mig", "-i", "0", "-cgi", "1g.10gb", "-C")
    assert create.returncode == 0, create
    assert len(gpustate.load(lab.paths.state_file("srv-h100")).gpus[0].gpu_instances) == 1
    for host in lab.hosts:
        state_file = lab.paths.state_file(host)
        for argv in CALLS:
            answer = lab.ssh(host, "nvidia-smi", *argv)
            rc, out, err = command.run(argv, state_file)
            assert (answer.returncode, answer.stdout, answer.stderr) == (rc, out, err), (host, argv)


def test_a_served_call_does_not_load_the_simulator_in_the_launcher(lab):
    """The launcher imports the client only; the simulator runs in the server. Without a server (here a
    launcher naming a socket nobody listens on) it runs the simulator itself, with the same answer."""
    launcher = lab.launcher("srv-a100")
    with open(launcher, encoding="utf-8") as handle:
        shebang = handle.readline()
    assert shebang.startswith("#!") and shebang.split()[1] == "-IS", shebang
    served = subprocess.run([sys.executable, "-IS", "-X", "importtime", launcher, "-L"],  # noqa: S603
                            capture_output=True, text=True, check=False, timeout=60)
    expected = command.run(["-L"], lab.paths.state_file("srv-a100"))
    assert (served.returncode, served.stdout) == expected[:2]
    loaded = _imports(served.stderr)
    assert "gpulab.toolclient" in loaded
    assert not [name for name in loaded if name.startswith(("gpulab.smi", "gpulab.gpustate", "gpulab.launchers"))], loaded

    alone = os.path.join(lab.dir, "nvidia-smi-without-server")
    with open(alone, "w", encoding="utf-8") as handle:
        handle.write(launchers.render("nvidia-smi", "srv-a100", lab.paths.state_file("srv-a100"),
                                      lab.paths.boot_id_file("srv-a100"), tool_socket=b"\0gpulab-tools-nobody-listens"))
    fallback = subprocess.run([sys.executable, "-IS", "-X", "importtime", alone, "-L"],  # noqa: S603
                              capture_output=True, text=True, check=False, timeout=60)
    assert (fallback.returncode, fallback.stdout) == expected[:2]
    assert [name for name in _imports(fallback.stderr) if name.startswith("gpulab.smi")]


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_a_caller_with_a_closed_standard_stream_is_answered_as_by_the_simulator(lab, closed):
    """The socket then takes the closed stream's number, and must not become the call's stdout or stderr
    (the exit status would be read from the tool's output): the launcher runs the call itself, as an
    unserved launcher does in the same situation."""
    unserved = os.path.join(lab.dir, "nvidia-smi-unserved")
    with open(unserved, "w", encoding="utf-8") as handle:
        handle.write(launchers.render("nvidia-smi", "srv-h100", lab.paths.state_file("srv-h100"),
                                      lab.paths.boot_id_file("srv-h100")))
    os.chmod(unserved, 0o755)
    script = 'exec %d>&-; exec "$0" -L' % closed
    served, alone = (subprocess.run(["sh", "-c", script, launcher], capture_output=True, text=True,  # noqa: S603
                                    check=False, timeout=60) for launcher in (lab.launcher("srv-h100"), unserved))
    assert (served.returncode, served.stdout if closed != 1 else "") == (alone.returncode, alone.stdout if closed != 1 else "")


def test_a_call_lasts_at_least_what_a_real_nvidia_smi_takes(lab):
    """A lower bound (the client sleeps to it), so it cannot flake: the lab is no faster than a real host."""
    start = time.monotonic()
    result = subprocess.run([lab.launcher("srv-h100"), "-L"], capture_output=True, text=True, check=False, timeout=60)  # noqa: S603
    assert result.returncode == 0
    assert time.monotonic() - start >= toolclient.MIN_SECONDS["nvidia-smi"]


@pytest.mark.parametrize("host, tool, message", [
    ("../srv-h100", "nvidia-smi", "is not a lab host name"),
    ("no-such-host", "nvidia-smi", "is not a host of the lab"),
    ("srv-h100", "reboot", "is not a served tool"),
])
def test_the_server_runs_only_served_tools_of_its_own_hosts(lab, host, tool, message):
    program = ("import sys; sys.path.insert(0, %r); from gpulab import toolclient; "
               "sys.exit(toolclient.served(%r, %r, %r, [%r, '-L']))"
               % (LAB_ROOT, toolserver.socket_name(lab.dir), host, tool, tool))
    result = subprocess.run([sys.executable, "-IS", "-c", program],  # noqa: S603
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and result.stdout == ""


def test_status_shows_the_tool_server_and_down_stops_it(tmp_path):
    lab_dir = str(tmp_path / "lab")
    hosts.up(lab_dir, [hosts.parse_host_spec("one=A30:1")])
    try:
        record = hosts.tools_status(lab_dir)
        assert record is not None and record["running"]
        pid = int(record["pid"])
        assert "gpulab.toolserver" in processes.cmdline(pid)
    finally:
        stopped = hosts.down(lab_dir)
    assert "tools" in stopped
    assert hosts.tools_status(lab_dir) is None
    assert not processes.tools_check(os.path.abspath(lab_dir))(pid)

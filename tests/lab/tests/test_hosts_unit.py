"""Lab hosts without starting sshd: host specs, inventory, views, launchers, fail-closed checks."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
import yaml


from gpulab import hosts, launchers, nsinit

LAB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------- host specs

def test_parse_host_spec_with_groups():
    spec = hosts.parse_host_spec("gpu-a=H100-80GB:8@h100_training,shared_pool")
    assert spec == hosts.HostSpec("gpu-a", "H100-80GB", 8, ("h100_training", "shared_pool"))
    assert hosts.parse_host_spec("b1=A30:1").groups == ()


@pytest.mark.parametrize("text, fragment", [
    ("gpu-a", "expected NAME=MODEL:GPUS"),
    ("Gpu_A=H100-80GB:1", "host name 'Gpu_A'"),
    ("gpu-a=H999:1", "unknown GPU model 'H999'"),
    ("gpu-a=A30:0", "GPU count '0'"),
    ("gpu-a=A30:two", "GPU count 'two'"),
    ("gpu-a=A30:1@Bad-Group", "group 'Bad-Group'"),
    ("gpu-a=A30:1@lab_gpu_hosts", "already in lab_gpu_hosts"),
])
def test_parse_host_spec_rejects_bad_input(text, fragment):
    with pytest.raises(hosts.LabError) as error:
        hosts.parse_host_spec(text)
    assert fragment in str(error.value)
    assert text in str(error.value)


def test_validate_specs_rejects_duplicates_and_empty():
    spec = hosts.parse_host_spec("a=A30:1")
    with pytest.raises(hosts.LabError, match="given twice"):
        hosts.validate_specs([spec, spec])
    with pytest.raises(hosts.LabError, match="at least one"):
        hosts.validate_specs([])
    with pytest.raises(hosts.LabError, match="group names equal to host names"):
        hosts.validate_specs([spec, hosts.parse_host_spec("b=A30:1@a")])


def test_host_addresses_are_loopback_only():
    assert hosts.host_address("127.0.0.2", 0) == "127.0.0.2"
    assert hosts.host_address("127.0.0.250", 10) == "127.0.1.4"
    with pytest.raises(hosts.LabError, match="loopback"):
        hosts.host_address("10.0.0.2", 0)


def test_cli_reports_bad_host_and_creates_nothing(tmp_path):
    lab_dir = tmp_path / "lab"
    result = subprocess.run(
        [sys.executable, "-m", "gpulab", "up", "--dir", str(lab_dir), "--host", "gpu-a=NOPE:1"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": LAB_ROOT}, check=False, timeout=60,
    )
    assert result.returncode == 2
    assert "unknown GPU model 'NOPE'" in result.stderr
    assert not lab_dir.exists()


def test_down_of_an_unknown_dir_stops_nothing(tmp_path):
    assert hosts.down(str(tmp_path)) == []


# --------------------------------------------------------------------------- inventory

def test_inventory_groups_and_variables(tmp_path):
    paths = hosts.LabPaths(str(tmp_path))
    lab_hosts = [
        hosts.Host(hosts.parse_host_spec("a1=A100-40GB:4@a100_inference"), "127.0.0.2", 2222,
                   paths.state_file("a1"), paths.host_dir("a1")),
        hosts.Host(hosts.parse_host_spec("h1=H100-80GB:8@h100_training,h200_shared"), "127.0.0.3", 2222,
                   paths.state_file("h1"), paths.host_dir("h1")),
    ]
    hosts.write_inventory(paths, lab_hosts, "/usr/bin/python3")
    data = yaml.safe_load((tmp_path / "inventory.yml").read_text())
    group = data["all"]["children"]["lab_gpu_hosts"]
    assert group["hosts"]["a1"] == {
        "ansible_host": "127.0.0.2", "ansible_port": 2222, "gpulab_state_file": paths.state_file("a1"),
        "gpulab_model": "A100-40GB", "gpulab_gpu_count": 4, "gpulab_host_dir": paths.host_dir("a1"),
        # the lab kubelet's device checkpoint of the host (issue 38), beside its state file
        "gpufleet_kubelet_checkpoint": os.path.join(paths.host_dir("a1"), "state-kubelet", "device-plugins",
                                                    "kubelet_internal_checkpoint"),
    }
    assert group["vars"]["ansible_user"] == "root"
    assert group["vars"]["ansible_ssh_private_key_file"] == paths.client_key
    assert "StrictHostKeyChecking=no" in group["vars"]["ansible_ssh_common_args"]
    assert group["vars"]["ansible_ssh_pipelining"] is True
    assert group["vars"]["ansible_python_interpreter"] == "/usr/bin/python3"
    assert set(group["children"]) == {"a100_inference", "h100_training", "h200_shared"}
    assert list(group["children"]["h200_shared"]["hosts"]) == ["h1"]


# --------------------------------------------------------------------------- views

def test_view_manifests_give_launchers_for_shims_and_dangerous_binaries(tmp_path):
    paths = hosts.LabPaths(str(tmp_path))
    views = {view["target"]: view for view in hosts.view_manifests(paths)}
    for path, tool in hosts.SHIM_PATHS.items():
        view = views[os.path.realpath(os.path.dirname(path))]
        assert [os.path.basename(path), "launcher", tool] in view["entries"], path
        assert view["read_only"] is True
    forbidden = hosts.dangerous_inodes()
    for target, view in views.items():
        if target == "/etc":
            continue
        for name, kind, data in view["entries"]:
            assert kind in ("link", "launcher")
            if kind == "link":  # whatever a link reaches, it is never a dangerous real binary
                real = os.path.join(target, name)
                assert hosts.stat_key(real) not in forbidden, real
                if not os.path.islink(real):
                    assert data == os.path.join(paths.real_mount_point("usr"), target[len("/usr/"):], name)


def test_etc_manifest_owns_the_mig_manager_directories(tmp_path):
    paths = hosts.LabPaths(str(tmp_path))
    etc = next(view for view in hosts.view_manifests(paths) if view["target"] == "/etc")
    assert etc["read_only"] is False
    entries = {rel: (kind, data) for rel, kind, data in etc["entries"]}
    assert entries["nvidia-mig-manager"] == ("own_dir", "nvidia-mig-manager")
    assert entries["systemd/system/nvidia-mig-manager.service.d"][0] == "own_dir"
    assert entries["hostname"] == ("own_file", "hostname")
    assert entries["passwd"] == ("link", os.path.join(paths.real_mount_point("etc"), "passwd"))
    order = [rel for rel, _kind, _data in etc["entries"]]
    assert order.index("systemd") < order.index("systemd/system/nvidia-mig-manager.service.d")


def test_viewed_dirs_cover_every_shim_path():
    viewed = hosts.viewed_dirs()
    for path in hosts.SHIM_PATHS:
        assert os.path.realpath(os.path.dirname(path)) in viewed


# --------------------------------------------------------------------------- launchers

def test_launchers_are_generated_for_every_tool(tmp_path):
    digests = launchers.write_launchers(str(tmp_path / "bin"), "gpu-a", "/lab/state.json", "/lab/boot_id",
                                        python="/opt/python")
    assert set(digests) == set(launchers.ALL_LAUNCHERS)
    text = (tmp_path / "bin" / "reboot").read_text()
    assert text.startswith("#!/opt/python -I\n")
    assert "launchers.run('reboot', sys.argv, '/lab/state.json', '/lab/boot_id')" in text
    assert os.access(tmp_path / "bin" / "reboot", os.X_OK)
    assert digests["reboot"] == hashlib.sha256(text.encode()).hexdigest()


def test_with_a_tool_server_only_the_served_tools_ask_it(tmp_path):
    """nvidia-smi asks the lab's tool server (Python without site); the power tools and mig-parted
    still run in their launcher (gpulab.toolserver)."""
    launchers.write_launchers(str(tmp_path / "bin"), "gpu-a", "/lab/state.json", "/lab/boot_id",
                              python="/opt/python", tool_socket=b"\0gpulab-tools-x")
    served = (tmp_path / "bin" / "nvidia-smi").read_text()
    assert served.startswith("#!/opt/python -IS\n")
    assert "toolclient.run(b'\\x00gpulab-tools-x', 'gpu-a', 'nvidia-smi', sys.argv," in served
    for tool in set(launchers.ALL_LAUNCHERS) - {"nvidia-smi"}:
        text = (tmp_path / "bin" / tool).read_text()
        assert text.startswith("#!/opt/python -I\n") and "toolclient" not in text, tool


def test_write_boot_id_keeps_the_inode(tmp_path):
    path = tmp_path / "boot_id"
    assert launchers.write_boot_id(str(path), "aaaa")
    inode = path.stat().st_ino
    assert not launchers.write_boot_id(str(path), "aaaa")
    assert launchers.write_boot_id(str(path), "bbbb")
    assert path.read_text() == "bbbb\n"
    assert path.stat().st_ino == inode  # a bind mount of the old inode sees the new id


def test_refused_launcher_runs_nothing(capsys):
    assert launchers.run(launchers.REFUSED, ["/usr/sbin/telinit", "0"], "/nonexistent", "/nonexistent") == 1
    assert "/usr/sbin/telinit is not simulated" in capsys.readouterr().err


def test_launcher_without_state_fails(tmp_path, capsys):
    assert launchers.run("nvidia-smi", ["/usr/bin/nvidia-smi", "-L"], str(tmp_path / "missing.json"),
                         str(tmp_path / "boot_id")) == 1
    assert "missing" in capsys.readouterr().err


# --------------------------------------------------------------------------- fail-closed checks

def _verify_config(tmp_path, shim_path, launcher, digest):
    return {"shims": [{"path": str(shim_path), "launcher": str(launcher), "sha256": digest}],
            "same_paths": [], "forbidden_inodes": [], "search_dirs": [], "must_not_exist": [],
            "must_be_read_only": []}


def test_verify_accepts_the_launcher_itself(tmp_path):
    launcher = tmp_path / "reboot"
    launcher.write_text("launcher\n")
    config = _verify_config(tmp_path, launcher, launcher, nsinit.file_digest(str(launcher)))
    assert nsinit.verify(config) == []


def test_verify_rejects_missing_foreign_and_altered_shims(tmp_path):
    launcher = tmp_path / "reboot"
    launcher.write_text("launcher\n")
    digest = nsinit.file_digest(str(launcher))
    other = tmp_path / "real-reboot"
    other.write_text("launcher\n")  # same content, another file: still not the host's launcher
    assert "missing" in nsinit.verify(_verify_config(tmp_path, tmp_path / "nope", launcher, digest))[0]
    assert "not to the host's launcher" in nsinit.verify(_verify_config(tmp_path, other, launcher, digest))[0]
    assert "content differs" in nsinit.verify(_verify_config(tmp_path, launcher, launcher, "0" * 64))[0]


def test_verify_rejects_a_search_path_entry_reaching_a_dangerous_binary(tmp_path):
    real = tmp_path / "systemctl"
    real.write_text("real\n")
    search = tmp_path / "sbin"
    search.mkdir()
    os.symlink(real, search / "halt")
    info = real.stat()
    config = {"shims": [], "same_paths": [], "must_not_exist": [str(tmp_path / "absent")],
              "must_be_read_only": [],
              "forbidden_inodes": [[info.st_dev, info.st_ino, "real systemctl"]], "search_dirs": [str(search)]}
    assert nsinit.verify(config) == [f"{search}/halt: reaches the real machine's real systemctl"]
    (tmp_path / "absent").write_text("")
    assert f"{tmp_path}/absent: the real machine's file is visible" in nsinit.verify(config)


def test_nsinit_refuses_to_mount_in_the_lab_namespace(tmp_path):
    """Run in the caller's own namespaces, nsinit must refuse before mounting anything."""
    own = {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "uts", "pid")}
    config = {"hostname": "x", "status_file": str(tmp_path / "status.json"), "lab_namespaces": own}
    (tmp_path / "nsinit.json").write_text(__import__("json").dumps(config))
    result = subprocess.run([sys.executable, "-I", "-S", nsinit.__file__, str(tmp_path / "nsinit.json")],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == nsinit.EXIT_REFUSED
    assert "not in a private mnt namespace" in result.stderr
    status = __import__("json").loads((tmp_path / "status.json").read_text())
    assert status["ok"] is False


def test_verify_rejects_writable_real_directories(tmp_path):
    config = {"shims": [], "same_paths": [], "must_not_exist": [], "forbidden_inodes": [], "search_dirs": [],
              "must_be_read_only": [str(tmp_path)]}
    assert nsinit.verify(config) == [f"{tmp_path}: the real machine's files are writable from the host"]


def test_mountinfo_parsing_unescapes_mount_points():
    points = {point: fstype for point, _options, fstype in nsinit.mounts()}
    assert points["/proc"] == "proc"
    assert nsinit._unescape("/a\\040b") == "/a b"  # pylint: disable=protected-access

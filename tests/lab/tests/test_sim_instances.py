"""GPU/compute instance creation and destruction through nvidia-smi mig (docs/reference/specs.md §3.2, §4.4-§4.6, §5)."""

from __future__ import annotations

import pytest

from gpulab import driver, gpustate, smi, workload


@pytest.fixture
def a100(make_host):
    path = make_host([("A100-40GB", 1)])
    smi.run(["-mig", "1"], path)
    return path


def _layout(path, index=0):
    return [(gi.profile, gi.start, gi.size) for gi in
            sorted(gpustate.load(path).gpus[index].gpu_instances, key=lambda gi: gi.start)]


def test_documented_order_failure_19_19_14_9(a100):
    rc, out, _err = smi.run(["mig", "-cgi", "19,19,14,9"], a100)
    assert rc == 255
    assert out.endswith("Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources\n"
                        "Failed to create GPU instances: Insufficient Resources\n")
    assert len(_layout(a100)) == 3  # the first three stay created


def test_documented_order_success_9_19_14_19(a100):
    rc, out, _err = smi.run(["mig", "-cgi", "9,19,14,19"], a100)
    assert rc == 0
    assert out.count("Successfully created GPU instance") == 4
    assert sorted(_layout(a100), key=lambda x: -x[2])[0] == ("3g.20gb", 4, 4)


def test_two_3g_take_4_then_0(a100):
    rc, out, _err = smi.run(["mig", "-cgi", "9,3g.20gb", "-C"], a100)
    assert rc == 0
    assert out.splitlines() == [
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.20gb (ID  9)",
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 3g.20gb (ID  2)",
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.20gb (ID  9)",
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  1 using profile MIG 3g.20gb (ID  2)",
    ]
    assert _layout(a100) == [("3g.20gb", 0, 4), ("3g.20gb", 4, 4)]


def test_example_19_14_5(a100):
    assert smi.run(["mig", "-cgi", "19,14,5"], a100)[0] == 0
    assert _layout(a100) == [("4g.20gb", 0, 4), ("2g.10gb", 4, 2), ("1g.5gb", 6, 1)]


def test_lgi_table_and_gi_ids(a100):
    smi.run(["mig", "-cgi", "9:4,14:2,19:1,19:0"], a100)
    _rc, out, _err = smi.run(["mig", "-lgi"], a100)
    assert out == (
        "+----------------------------------------------------+\n"
        "| GPU instances:                                     |\n"
        "| GPU   Name          Profile  Instance   Placement  |\n"
        "|                       ID       ID       Start:Size |\n"
        "|====================================================|\n"
        "|   0  MIG 3g.20gb       9        2          4:4     |\n"
        "+----------------------------------------------------+\n"
        "|   0  MIG 2g.10gb      14        4          2:2     |\n"
        "+----------------------------------------------------+\n"
        "|   0  MIG 1g.5gb       19        7          0:1     |\n"
        "+----------------------------------------------------+\n"
        "|   0  MIG 1g.5gb       19        8          1:1     |\n"
        "+----------------------------------------------------+\n"
    )


def test_explicit_placement_used_or_refused(a100):
    assert smi.run(["mig", "-cgi", "9:0"], a100)[0] == 0
    rc, out, _err = smi.run(["mig", "-cgi", "5:0"], a100)
    assert rc == 255 and "using profile 5:0: Insufficient Resources" in out
    rc, out, _err = smi.run(["mig", "-cgi", "14:6"], a100)  # 2g never starts at 6
    assert rc == 2 and "using profile 14:6: Invalid Argument" in out
    assert _layout(a100) == [("3g.20gb", 0, 4)]


def test_unknown_profile_is_invalid_argument(a100):
    rc, out, _err = smi.run(["mig", "-cgi", "1"], a100)
    assert rc == 2
    assert out == ("Unable to create a GPU instance on GPU  0 using profile 1: Invalid Argument\n"
                   "Failed to create GPU instances: Invalid Argument\n")


def test_full_name_and_max_instances(a100):
    assert smi.run(["mig", "-cgi", "MIG 1g.5gb+me"], a100)[0] == 0
    rc, out, _err = smi.run(["mig", "-cgi", "20"], a100)  # +me: at most one
    assert rc == 255 and "Insufficient Resources" in out


def test_free_counts_drop_as_instances_are_created(a100):
    smi.run(["mig", "-cgi", "9"], a100)  # 3g at 4:4
    _rc, out, _err = smi.run(["mig", "-lgip"], a100)
    free = {line.split()[3]: line.split()[5] for line in out.splitlines() if "MIG " in line}
    assert free == {"1g.5gb": "4/7", "1g.5gb+me": "1/1", "1g.10gb": "2/4", "2g.10gb": "2/3",
                    "3g.20gb": "1/2", "4g.20gb": "1/1", "7g.40gb": "0/1"}
    smi.run(["mig", "-cgi", "5"], a100)
    _rc, out, _err = smi.run(["mig", "-lgip"], a100)
    assert all(line.split()[5].startswith("0/") for line in out.splitlines() if "MIG " in line)


def test_compute_slice_limit_is_enforced(a100):
    """With memory slice 0 free but all 7 compute slices used, nothing more can be created.

    The state is fabricated (a 4g at 4:4 is not a real placement) because real placements always
    run out of memory slices first; the rule is enforced independently all the same."""
    with gpustate.locked(a100) as state:
        gpu = state.gpus[0]
        gpu.gpu_instances = [
            gpustate.GpuInstance(gi_id=2, profile_id=5, profile="4g.20gb", start=4, size=4),
            gpustate.GpuInstance(gi_id=4, profile_id=14, profile="2g.10gb", start=2, size=2),
            gpustate.GpuInstance(gi_id=8, profile_id=19, profile="1g.5gb", start=1, size=1),
        ]
        spec = gpu.spec
        assert driver.used_compute_slices(gpu) == 7
        assert driver.free_starts(gpu, spec.profile("19")) == [0]
        with pytest.raises(driver.DriverError, match="Insufficient Resources"):
            driver.create_gpu_instance(gpu, spec.profile("19"))
        assert all(driver.free_instances(gpu, p) == 0 for p in spec.profiles)


def test_a30_geometry(make_host):
    path = make_host([("A30", 1)])
    smi.run(["-mig", "1"], path)
    assert smi.run(["mig", "-cgi", "5,14,14", "-C"], path)[0] == 0
    assert _layout(path) == [("1g.6gb", 0, 1), ("1g.6gb", 1, 1), ("2g.12gb", 2, 2)]
    assert [gi.gi_id for gi in gpustate.load(path).gpus[0].gpu_instances] == [2, 3, 4]
    assert smi.run(["mig", "-cgi", "0"], path)[0] == 255


def test_dgi_with_compute_instances_is_in_use(a100):
    smi.run(["mig", "-cgi", "9", "-C"], a100)
    rc, out, _err = smi.run(["mig", "-dgi"], a100)
    assert rc == 255
    assert out == ("Unable to destroy GPU instance ID  2 from GPU  0: In use by another client\n"
                   "Failed to destroy GPU instances: In use by another client\n")
    assert smi.run(["mig", "-dci"], a100) == (
        0, "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  2\n", "")
    assert smi.run(["mig", "-dgi", "-gi", "2"], a100) == (0, "Successfully destroyed GPU instance ID  2 from GPU  0\n", "")
    assert smi.run(["mig", "-lgi"], a100) == (0, "No GPU instances found.\n", "")


def test_dci_with_running_process_is_in_use(a100):
    smi.run(["mig", "-cgi", "19,19", "-C"], a100)
    pid = workload.start(a100, 0, "infer.py", 500, mig_device=1)
    _rc, out, _err = smi.run(["mig", "-dci"], a100)
    assert "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID 13: In use by another client" in out
    assert "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID 12" in out
    workload.stop(a100, pid)
    assert smi.run(["mig", "-dci", "-gi", "13", "-ci", "0"], a100)[0] == 0


def test_compute_instances_and_profiles(a100):
    smi.run(["mig", "-cgi", "9"], a100)
    rc, out, _err = smi.run(["mig", "-cci", "1c.3g.20gb", "-gi", "2"], a100)
    assert rc == 0
    assert out == ("Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile "
                   "MIG 1c.3g.20gb (ID  0)\n")
    assert smi.run(["mig", "-cci", "2", "-gi", "2"], a100)[0] == 255  # 1 + 3 slices > 3
    assert smi.run(["mig", "-cci", "1", "-gi", "2"], a100)[0] == 0  # 2c.3g.20gb
    _rc, out, _err = smi.run(["mig", "-lci"], a100)
    assert "|   0      2       MIG 1c.3g.20gb       0         0          0:1     |" in out
    assert "|   0      2       MIG 2c.3g.20gb       1         1          1:2     |" in out
    _rc, out, _err = smi.run(["mig", "-lcip"], a100)
    assert "MIG 3g.20gb          2*" in out
    _rc, out, _err = smi.run(["-L"], a100)
    assert "  MIG 1c.3g.20gb  Device  0: (UUID: MIG-" in out


def test_mig_devices_in_list_and_summary(make_host):
    path = make_host([("H100-80GB", 1)])
    smi.run(["-mig", "1"], path)
    smi.run(["mig", "-cgi", "9,14,19,19", "-C"], path)
    _rc, out, _err = smi.run(["-L"], path)
    lines = out.splitlines()
    assert lines[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    assert [line.split("Device")[0] for line in lines[1:]] == [
        "  MIG 3g.40gb     ", "  MIG 2g.20gb     ", "  MIG 1g.10gb     ", "  MIG 1g.10gb     "]
    uuids = [line.split("UUID: ")[1].rstrip(")") for line in lines[1:]]
    assert len(set(uuids)) == 4 and all(u.startswith("MIG-") for u in uuids)
    assert smi.run(["-L"], path)[1] == out  # deterministic
    workload.start(path, 0, "train.py", 4096, mig_device=0)
    _rc, summary, _err = smi.run([], path)
    assert "| MIG devices:" in summary
    assert "|  0    2   0   0  |              4096MiB / 40448MiB  | 60      0 |  3   0    3    0    3 |" in summary
    assert "|    0    2    0             4100      C   train.py" in summary


def test_mig_commands_need_mig_mode(make_host):
    path = make_host([("H100-80GB", 1)])
    assert smi.run(["mig", "-cgi", "19"], path) == (6, "No MIG-enabled devices found.\n", "")
    assert smi.run(["mig", "-lgi"], path) == (0, "No MIG-enabled devices found.\n", "")

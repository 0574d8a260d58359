"""Read-only nvidia-smi output on the reference host equals the real H200 capture, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpulab import gpustate, smi
from gpulab.models import MODELS_DIR, available_models

QUERY = ("--query-gpu=index,name,uuid,pci.bus_id,pci.device_id,pci.sub_device_id,memory.total,"
         "mig.mode.current,mig.mode.pending,driver_version,vbios_version,compute_cap")


@pytest.mark.parametrize("capture, argv", [
    ("smi_L.txt", ["-L"]),
    ("query.txt", [QUERY, "--format=csv"]),
    ("mig_lgip.txt", ["mig", "-lgip"]),
    ("mig_lgipp.txt", ["mig", "-lgipp"]),
    ("mig_lgi.txt", ["mig", "-lgi"]),
    ("mig_lci.txt", ["mig", "-lci"]),
    ("mig_lcip.txt", ["mig", "-lcip"]),
    ("apps.txt", ["--query-compute-apps=pid,process_name,used_memory", "--format=csv"]),
    ("help.txt", ["-h"]),
    ("help_mig.txt", ["mig", "-h"]),
])
def test_read_only_output_matches_capture(h200_host, h200_capture, capture, argv):
    rc, out, err = smi.run(argv, h200_host)
    assert (rc, err) == (0, "")
    assert out == h200_capture(capture)


def test_plain_summary_matches_capture_except_timestamp(h200_host, h200_capture):
    rc, out, _err = smi.run([], h200_host)
    expected = h200_capture("smi.txt").split("\n")
    actual = out.split("\n")
    assert rc == 0
    assert len(actual[0]) == len(expected[0])  # "Mon Nov 30 04:03:11 2026       "
    assert actual[1:] == expected[1:]


def test_read_only_commands_do_not_touch_the_state(h200_host):
    before = open(h200_host, encoding="utf-8").read()
    for argv in (["-L"], [], ["mig", "-lgip"], ["mig", "-lgi"], [QUERY, "--format=csv,noheader"]):
        smi.run(argv, h200_host)
    assert open(h200_host, encoding="utf-8").read() == before


@pytest.mark.parametrize("selector", ["0", "00000000:00:06.0", "00:06.0", "GPU-163e5d76-4ee1-1290-9652-cc41f8103e00"])
def test_gpu_selection_by_index_bus_id_or_uuid(h200_host, selector):
    rc, out, _err = smi.run(["-i", selector, "--query-gpu=index,uuid", "--format=csv,noheader"], h200_host)
    assert rc == 0
    assert out == "0, GPU-163e5d76-4ee1-1290-9652-cc41f8103e00\n"


def test_unknown_gpu_and_unknown_field(h200_host):
    assert smi.run(["-i", "3", "-L"], h200_host) == (6, "No devices were found\n", "")
    rc, out, _err = smi.run(["--query-gpu=bogus", "--format=csv"], h200_host)
    assert rc == 2 and 'Field "bogus" is not a valid field to query.' in out


def test_csv_nounits_and_noheader(make_host):
    path = make_host([("A100-40GB", 2)])
    rc, out, _err = smi.run(["--query-gpu=index,memory.total,mig.mode.current", "--format=csv,noheader,nounits"], path)
    assert rc == 0
    assert out == "0, 40960, Disabled\n1, 40960, Disabled\n"


def test_non_mig_gpu_reports_na_and_no_mig_support(make_host):
    path = make_host([("A10", 1)])
    _rc, out, _err = smi.run(["--query-gpu=name,mig.mode.current,mig.mode.pending", "--format=csv,noheader"], path)
    assert out == "NVIDIA A10, [N/A], [N/A]\n"
    assert smi.run(["mig", "-lgip"], path) == (6, "No MIG-supported devices found.\n", "")


def test_version(h200_host):
    rc, out, _err = smi.run(["--version"], h200_host)
    assert rc == 0 and "DRIVER version      : 580.159.04" in out and "CUDA Version        : 13.0" in out


def test_module_entry_point(h200_host, h200_capture):
    lab_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=lab_dir)
    completed = subprocess.run([sys.executable, "-m", "gpulab.smi", "--state", h200_host, "--", "-L"],
                               env=env, capture_output=True, text=True, check=False)
    assert completed.returncode == 0
    assert completed.stdout == h200_capture("smi_L.txt")


def test_other_models_render_their_fixture_tables(make_host):
    """lgip.txt of every model re-renders identically (the parser and renderer agree)."""
    for key in available_models():
        spec_dir = os.path.join(MODELS_DIR, key)
        if not os.path.exists(os.path.join(spec_dir, "lgip.txt")):
            continue
        path = make_host([(key, 1)])
        with open(os.path.join(spec_dir, "lgip.txt"), encoding="utf-8") as handle:
            assert smi.run(["mig", "-lgip"], path)[1] == handle.read(), key
        with open(os.path.join(spec_dir, "lgipp.txt"), encoding="utf-8") as handle:
            assert smi.run(["mig", "-lgipp"], path)[1] == handle.read(), key
        assert gpustate.load(path).gpus[0].name == smi.run(["--query-gpu=name", "--format=csv,noheader"], path)[1].strip()

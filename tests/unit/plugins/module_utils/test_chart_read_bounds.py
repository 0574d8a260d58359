"""The local chart reader on what is not a chart (issue 43 #2): it never blocks, never reads without
bounds and never recurses.

- a ``chart_ref`` that is a FIFO (named ``x.tgz``), a device (``/dev/zero``) or a symlink to one is
  refused with an error naming ``chart_ref``, before helm runs (helm's ``loader.Load`` would open
  it and block on the FIFO, or read the device);
- inside a chart directory, whatever is not a regular file (a FIFO, a device through a symlink), a
  tree deeper than ``MAX_DEPTH``, more than ``MAX_ENTRIES`` entries, a file over ``MAX_FILE_SIZE`` or a
  chart over ``MAX_CHART_SIZE`` in all is left to helm (``Unsupported``), as today, which refuses
  irregular files and oversize ones itself.

Each case runs in a child process with a deadline, so a reader that blocks fails the test instead
of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BUILD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))), ".build")
DEADLINE = 30

# The child: reads chart_ref through Helm.chart_metadata (helm must not run) and prints what happened.
CHILD = r"""
import sys
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _helm, _chart_files

def no_helm(argv, data=None):
    raise AssertionError("helm ran: %r" % (argv,))

ref, how = sys.argv[1], sys.argv[2]
try:
    if how == "files":
        _helm.read_chart_files(ref)
        print("READ")
    else:
        print("META", _helm.Helm(_helm.HelmCommand("helm"), no_helm).chart_metadata(ref, None))
except _chart_files.Unsupported as exc:
    print("UNSUPPORTED", exc)
except _helm.HelmError as exc:
    print("HELMERROR", exc)
"""


def child(ref, how="meta"):
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(ref), how], capture_output=True, text=True,
                              timeout=DEADLINE, env=dict(os.environ, PYTHONPATH=BUILD), check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("the chart reader blocked on %s for %d s" % (ref, DEADLINE))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def chart(root, name="c"):
    top = root / name
    (top / "templates").mkdir(parents=True)
    (top / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    return top


def test_a_fifo_named_like_an_archive_is_refused_naming_chart_ref(tmp_path):
    fifo = tmp_path / "x.tgz"
    os.mkfifo(fifo)
    out = child(fifo)
    assert out.startswith("HELMERROR") and "chart_ref %s" % fifo in out and "FIFO" in out, out


@pytest.mark.parametrize("through_symlink", [False, True], ids=["dev-zero", "symlink-x.tgz-to-dev-zero"])
def test_a_device_is_refused_naming_chart_ref_without_reading_it(tmp_path, through_symlink):
    ref = "/dev/zero"
    if through_symlink:
        ref = str(tmp_path / "x.tgz")
        os.symlink("/dev/zero", ref)
    out = child(ref)
    assert out.startswith("HELMERROR") and "chart_ref %s" % ref in out and "character device" in out, out


def test_a_fifo_or_a_device_inside_a_chart_directory_is_left_to_helm(tmp_path):
    top = chart(tmp_path)
    os.mkfifo(top / "templates" / "pipe.yaml")
    assert child(top, "files").startswith("UNSUPPORTED")
    top = chart(tmp_path, "d")
    os.symlink("/dev/zero", top / "values.yaml")
    assert child(top, "files").startswith("UNSUPPORTED")


def test_a_directory_1100_levels_deep_is_left_to_helm_without_recursion(tmp_path):
    top = chart(tmp_path)
    deep = os.path.join(str(top), *(["d"] * 1100))
    # os.makedirs recurses once per level; build it level by level from a short relative path instead.
    here = os.getcwd()
    try:
        os.chdir(top)
        for _level in range(1100):
            os.mkdir("d")
            os.chdir("d")
        with open("Chart.yaml", "w", encoding="utf-8") as handle:
            handle.write("apiVersion: v2\nname: deep\nversion: 1.0.0\n")
    finally:
        os.chdir(here)
    del deep
    try:
        out = child(top, "files")
    finally:
        _remove_levels(str(top), 1100)  # shutil.rmtree (pytest's clean-up) recurses once per level
    assert out.startswith("UNSUPPORTED") and "deep" in out, out


def _remove_levels(top, levels):
    here = os.getcwd()
    try:
        os.chdir(top)
        for _level in range(levels):
            os.chdir("d")
        os.unlink("Chart.yaml")
        for _level in range(levels):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(here)


def test_too_many_files_or_too_much_data_is_left_to_helm(tmp_path):
    from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _chart_read
    top = chart(tmp_path)
    for index in range(_chart_read.MAX_ENTRIES + 1):
        (top / "templates" / ("f%05d.yaml" % index)).write_text("")
    out = child(top, "files")
    assert out.startswith("UNSUPPORTED") and "entries" in out, out
    big = chart(tmp_path, "big")
    with open(big / "values.yaml", "wb") as handle:
        handle.truncate(_chart_read.MAX_FILE_SIZE + 1)
    assert child(big, "files").startswith("UNSUPPORTED")
    archive = tmp_path / "huge.tgz"
    with open(archive, "wb") as handle:
        handle.truncate(_chart_read.MAX_CHART_SIZE + 1)
    out = child(archive, "files")
    assert out.startswith("UNSUPPORTED") and "larger" in out, out


def test_a_regular_chart_still_reads(tmp_path):
    top = chart(tmp_path)
    (top / "crds").mkdir()
    (top / "crds" / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    assert child(top, "files") == "READ"
    assert "'name': 'c'" in child(top)

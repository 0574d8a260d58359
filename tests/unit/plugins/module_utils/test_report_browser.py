"""The HTML fleet report in a real browser (issue 24): Debian's headless Chromium (installed by
`make system-deps`) loads the report of a lab run, the test reads the DOM the browser built and the
browser's own network log, and the screenshot is left in tests/output/fleet-report.png for people.

Skipped without Chromium, except under `make test` (GPUFLEET_REQUIRE_PREREQUISITES=1, tests/unit/plugins/module_utils/prerequisites.py), where that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_html import render_html

from prerequisites import missing_prerequisite
from report_dom import Tree, disagreements
from test_report_html import DRIFT, load

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
OUTPUT = os.path.join(REPO, "tests", "output")
CHROMIUM = os.environ.get("GPUFLEET_CHROMIUM") or shutil.which("chromium")
# Chromium's own background traffic (updates, accounts) is switched off and, whatever is left, goes to
# a dead proxy on loopback: the machine reaches no network. The page's requests are told apart by the
# network partition of the file:// page that made them.
FLAGS = ["--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
         "--disable-domain-reliability", "--no-pings", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]

pytestmark = pytest.mark.browser


@pytest.fixture(name="chromium")
def fixture_chromium():
    if not CHROMIUM:
        missing_prerequisite("chromium is not installed", "`make system-deps` installs Debian's chromium package")
    return CHROMIUM


def browse(chromium, page, tmp_path, *args):
    """Chromium on ``page`` with ``args``: (stdout, the URLs the page requested)."""
    netlog = str(tmp_path / ("net-%s.json" % os.path.basename(page)))
    argv = [chromium] + FLAGS + ["--user-data-dir=%s" % (tmp_path / "profile"), "--log-net-log=%s" % netlog]
    argv += (["--no-sandbox"] if os.geteuid() == 0 else []) + list(args) + ["file://" + page]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(netlog) as handle:
        log = json.load(handle)
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requested = [e["params"]["url"] for e in log["events"]
                 if e["type"] == start and "file://" in (e.get("params") or {}).get("network_isolation_key", "")]
    return done.stdout, requested


@pytest.fixture(name="data")
def fixture_data():
    report = load("verify.json")
    report.update(rollout=load("rollout-summary.json"), drift=DRIFT, generated="2026-12-02 01:40 UTC")
    return json.loads(json.dumps(report))


def test_the_request_log_sees_a_page_that_reaches_out(chromium, tmp_path):
    """The check below can fail: a page with one external image is caught by the same log."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><p>x</p><img src="http://198.51.100.7/pixel.png">')
    _dom, requested = browse(chromium, str(page), tmp_path, "--dump-dom")
    assert requested == ["http://198.51.100.7/pixel.png"]


def test_the_report_in_chromium(chromium, tmp_path, data):
    page = tmp_path / "fleet-report.html"
    page.write_text(render_html(data))
    dom, requested = browse(chromium, str(page), tmp_path, "--dump-dom", "--virtual-time-budget=2000")
    assert requested == []  # no request of any kind: not a font, not a style sheet, not an image
    tree = Tree(dom)
    sections = {e.attrs["data-node"]: e for e in tree.all("data-node", "section")}
    assert sorted(sections) == sorted(n["node"] for n in data["nodes"])
    for node, gpus in data["gpus"].items():
        drawn = [e.attrs for e in sections[node].walk() if "data-gpu" in e.attrs]
        assert [(int(a["data-gpu"]), a["data-uuid"] or None) for a in drawn] == [(g["index"], g["uuid"]) for g in gpus]
        assert len([e for e in sections[node].walk() if e.tag == "svg"]) >= len(gpus)
    failed = set(data["summary"]["failed_nodes"])
    assert {n for n, e in sections.items() if e.attrs["data-failed"] == "true"} == failed
    marked = {e.attrs["data-node"] for e in tree.all("data-failed", "tr") if "data-node" in e.attrs}
    assert marked >= failed | {row["node"] for row in DRIFT}
    assert disagreements(dom, data)[0] == []  # the figures of the DOM the browser built are the JSON's


def test_the_screenshot_for_people(chromium, tmp_path, data):
    page = tmp_path / "fleet-report.html"
    page.write_text(render_html(data))
    os.makedirs(OUTPUT, exist_ok=True)
    shot = os.path.join(OUTPUT, "fleet-report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    _out, requested = browse(chromium, str(page), tmp_path, "--window-size=1200,2200", "--screenshot=%s" % shot,
                             "--virtual-time-budget=2000")
    assert requested == []
    with open(shot, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1200, 2200)
    assert os.path.getsize(shot) > 50000  # a drawn page, not a blank one


def test_it_prints(chromium, tmp_path, data):
    """Printed (the @media print rules), the report is a PDF of a few A4 pages, made with no request."""
    page = tmp_path / "fleet-report.html"
    page.write_text(render_html(data))
    pdf = tmp_path / "fleet-report.pdf"
    _out, requested = browse(chromium, str(page), tmp_path, "--print-to-pdf=%s" % pdf, "--no-pdf-header-footer")
    assert requested == []
    content = pdf.read_bytes()
    pages = content.count(b"/Type /Page") - content.count(b"/Type /Pages")
    assert content[:5] == b"%PDF-" and 2 <= pages <= 20, pages

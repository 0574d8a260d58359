"""A local chart read from its files (``_chart_files``, ``_helm.read_chart_files``) answers what the
real helm answers (``helm show chart``, ``helm show crds``), so that a run that changes nothing needs
no helm (issue 26).

Every chart here is read both ways and compared: the lab's two stand-in charts as directories and as
archives made by ``helm package``, and charts built for the rules that matter (.helmignore with its
negated rules, the default ``templates/.?*`` rule, manifest extensions, a byte order mark, subcharts as
directories and archives, ``_``/``.`` subcharts skipped). What the reader leaves to helm (a symlink, a
pattern with a character class, ``requirements.yaml``, a version helm would have to judge) reads as
None, and ``Helm`` then asks helm, whose answer it returns.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import List, Optional, Tuple

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._chart_files import chart_fields, crds_text
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import (
    Helm, HelmCommand, parse_chart_metadata)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDINS = [os.path.join(REPO, "tests", "lab", "charts", name)
            for name in ("gpu-operator-standin", "nvidia-dra-driver-gpu-standin", "dra-driver-nvidia-gpu-standin")]


class Recorder:
    """A command runner that runs the real helm and records each argv."""

    def __init__(self, tmp_path):
        self.calls: List[List[str]] = []
        home = tmp_path / "helm-home"
        self.env = dict(os.environ, HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
                        HELM_DATA_HOME=str(home / "data"))

    def __call__(self, argv: List[str], data: Optional[str] = None) -> Tuple[int, str, str]:
        self.calls.append(argv[1:])
        proc = subprocess.run(argv, input=data, capture_output=True, text=True, check=False, env=self.env)
        return proc.returncode, proc.stdout, proc.stderr


def helm_says(helm_binary, chart, what):
    proc = subprocess.run([helm_binary, "show", what, chart], capture_output=True, text=True, check=True)
    return proc.stdout


def package(helm_binary, chart, destination):
    proc = subprocess.run([helm_binary, "package", chart, "-d", str(destination)], capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip().rsplit(" ", 1)[-1]


def write(root, files):
    for name, content in files.items():
        path = os.path.join(str(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(root)


def crd(name):
    return ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %s.example.com\n"
            % name)


def chart_yaml(name, version="1.2.3", extra=""):
    return "apiVersion: v2\nname: %s\nversion: %s\nappVersion: \"v9.8.7\"\n%s" % (name, version, extra)


def documents(text):
    return sorted(chunk.strip() for chunk in re.split(r"^---$", text, flags=re.M) if chunk.strip())


def same_crds(ours, helms, subcharts_in_any_order):
    """Helm prints the chart's CRDs, then each subchart's in the order of a Go map (it varies from run
    to run): with CRDs in more than one subchart only the set of documents is helm's to compare."""
    if subcharts_in_any_order:
        return documents(ours) == documents(helms)
    return ours == helms


def same_as_helm(helm_binary, chart, tmp_path, subcharts_in_any_order=False):
    """Read both ways; the metadata and the CRD text must be helm's."""
    recorder = Recorder(tmp_path)
    reader = Helm(HelmCommand(helm_binary), recorder)
    local = reader.local_chart(chart)
    assert local is not None, "read without helm: %s" % chart
    helm_meta = parse_chart_metadata(helm_says(helm_binary, chart, "chart"))
    ours = chart_fields(local)
    assert {key: ours.get(key) for key in ("name", "version", "appVersion")} == \
        {key: helm_meta.get(key) for key in ("name", "version", "appVersion")}
    assert same_crds(crds_text(local), helm_says(helm_binary, chart, "crds"), subcharts_in_any_order)
    assert reader.chart_metadata(chart, None)["version"] == helm_meta["version"]
    assert same_crds(reader.crds_text(chart, None), helm_says(helm_binary, chart, "crds"), subcharts_in_any_order)
    assert recorder.calls == [], "no helm for a chart read from its files"
    return local


@pytest.mark.parametrize("standin", STANDINS, ids=os.path.basename)
def test_the_lab_charts_read_as_helm_reads_them_as_directories_and_archives(helm_binary, standin, tmp_path):
    same_as_helm(helm_binary, standin, tmp_path)
    same_as_helm(helm_binary, package(helm_binary, standin, tmp_path / "packaged"), tmp_path)


def built_chart(root, helm_binary, tmp_path):
    sub_archive_src = write(tmp_path / "src" / "archived", {
        "Chart.yaml": chart_yaml("archived", "0.1.0"),
        "crds/archived.yaml": crd("archived"),
        "crds/zz.yml": "---\n" + crd("zz"),
    })
    archive = package(helm_binary, sub_archive_src, tmp_path / "src")
    write(root, {
        "Chart.yaml": chart_yaml("parent", "2.0.0-rc.1+build.5", "description: a chart for the reader\n"),
        "values.yaml": "a: 1\n",
        ".helmignore": "# comment\n\n*.bak\nskipped/\n/crds/ignored.yaml\ncrds/nested/*.json\n",
        "crds/a.yaml": "---\n" + crd("a"),
        "crds/b.yml": crd("b"),
        "crds/c.JSON": '{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}',
        "crds/d.yaml.bak": crd("bak"),
        "crds/ignored.yaml": crd("ignored"),
        "crds/notes.txt": "not a manifest\n",
        "crds/nested/e.yaml": crd("e"),
        "crds/nested/f.json": "{}",
        "crds/bom.yaml": b"\xef\xbb\xbf" + crd("bom").encode("utf-8"),
        "skipped/crds/x.yaml": crd("x"),
        "templates/.hidden.yaml": "hidden: true\n",
        "templates/ok.yaml": "kind: ConfigMap\n",
        "charts/dir/Chart.yaml": chart_yaml("dir", "0.3.0"),
        "charts/dir/crds/dir.yaml": crd("dir"),
        "charts/_private/Chart.yaml": chart_yaml("private", "0.1.0"),
        "charts/_private/crds/private.yaml": crd("private"),
        "charts/.hidden/Chart.yaml": chart_yaml("hidden", "0.1.0"),
    })
    shutil.copy(archive, os.path.join(str(root), "charts", os.path.basename(archive)))
    return str(root)


def test_a_chart_with_the_rules_that_matter_reads_as_helm_reads_it(helm_binary, tmp_path):
    chart = built_chart(tmp_path / "parent", helm_binary, tmp_path)
    local = same_as_helm(helm_binary, chart, tmp_path, subcharts_in_any_order=True)
    names = [item.name for item in local.crds]
    assert "crds/ignored.yaml" not in names and "crds/d.yaml.bak" not in names and "crds/nested/f.json" not in names
    assert "crds/c.JSON" in names and "crds/nested/e.yaml" in names
    # the chart's own CRDs first, in the walk's order, in helm's answer too; then the subcharts'
    own = ["crds/a.yaml", "crds/b.yml", "crds/bom.yaml", "crds/c.JSON", "crds/nested/e.yaml"]
    assert names[:5] == own and len(names) == 8
    assert helm_says(helm_binary, chart, "crds").startswith(crds_text(local._replace(crds=local.crds[:5])))
    # the same chart packaged: archives keep every file helm packaged
    same_as_helm(helm_binary, package(helm_binary, chart, tmp_path / "packaged"), tmp_path, subcharts_in_any_order=True)


def test_a_negated_helmignore_rule_ignores_what_it_does_not_match_as_helm_does(helm_binary, tmp_path):
    chart = write(tmp_path / "negated", {
        "Chart.yaml": chart_yaml("negated"),
        ".helmignore": "!*.yaml\n",
        "crds/a.yaml": crd("a"),
        "values.yaml": "a: 1\n",
    })
    # helm's rule: a path a negated rule does not match is ignored - here the crds directory itself
    # (Chart.yaml and values.yaml match the rule and stay)
    assert same_as_helm(helm_binary, chart, tmp_path).crds == []
    assert helm_says(helm_binary, chart, "crds") == ""


@pytest.mark.parametrize("files, why", [
    ({".helmignore": "*.sw[op]\n"}, "a character class"),
    ({"requirements.yaml": "dependencies: []\n"}, "requirements.yaml"),
    ({"Chart.yaml": chart_yaml("odd", "1.0")}, "a version helm judges"),
    ({"Chart.yaml": "apiVersion: v2\nname: odd\nversion: 1.0.0\nappVersion: 1.16\n"}, "a number where helm wants a string"),
    ({"charts/README.md": "stray\n"}, "a file in charts/ that is no chart"),
])
def test_what_the_reader_leaves_to_helm_is_asked_of_helm(helm_binary, tmp_path, files, why):
    chart = write(tmp_path / "chart", dict({"Chart.yaml": chart_yaml("chart"), "crds/a.yaml": crd("a")}, **files))
    recorder = Recorder(tmp_path)
    reader = Helm(HelmCommand(helm_binary), recorder)
    assert reader.local_chart(chart) is None, why
    shown = subprocess.run([helm_binary, "show", "crds", chart], capture_output=True, text=True, check=False)
    if shown.returncode == 0:
        assert reader.crds_text(chart, None) == shown.stdout
        assert ["version", "--short"] in recorder.calls and ["show", "crds", chart] in recorder.calls
    else:
        with pytest.raises(Exception):
            reader.crds_text(chart, None)


def test_a_symlink_in_the_chart_is_left_to_helm(helm_binary, tmp_path):
    chart = write(tmp_path / "linked", {"Chart.yaml": chart_yaml("linked"), "elsewhere/a.yaml": crd("a")})
    os.makedirs(os.path.join(chart, "crds"))
    os.symlink(os.path.join(chart, "elsewhere", "a.yaml"), os.path.join(chart, "crds", "a.yaml"))
    reader = Helm(HelmCommand(helm_binary), Recorder(tmp_path))
    assert reader.local_chart(chart) is None
    assert reader.crds_text(chart, None) == helm_says(helm_binary, chart, "crds")

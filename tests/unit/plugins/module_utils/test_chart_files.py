"""_chart_files: a local chart's metadata and CRDs as helm reads them (pure). Compared with the real
helm in tests/lab/tests/test_chart_read.py; here each rule on its own, and what is left to helm."""

import io
import tarfile

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _chart_files as cf

META = b"apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: v4.5.6\n"


def rules(text=""):
    return cf.ignore_rules(text)


@pytest.mark.parametrize("text, path, is_dir, expected", [
    ("", "templates/.hidden", False, True),          # the default rule
    ("", "templates/shown.yaml", False, False),
    ("", "crds/.hidden.yaml", False, False),          # the default rule is for templates/ only
    ("*.bak", "crds/deep/a.bak", False, True),        # no slash: the base name
    ("*.bak", "crds/a.bak.yaml", False, False),
    ("crds/*.yaml", "crds/a.yaml", False, True),      # a slash: the whole path, "*" stops at "/"
    ("crds/*.yaml", "crds/deep/a.yaml", False, False),
    ("/crds/a.yaml", "crds/a.yaml", False, True),     # a leading slash: from the chart's top
    ("skip/", "skip", True, True),                    # a trailing slash: directories only
    ("skip/", "skip", False, False),
    ("a?.yaml", "ab.yaml", False, True),
    ("a?.yaml", "a/.yaml", False, False),
    ("!*.yaml", "crds", True, True),                  # helm: what a negated rule does not match is ignored
    ("!*.yaml", "crds/a.yaml", False, False),
    ("!keep/", "file.txt", False, True),              # a negated directory rule ignores every file
    ("# comment\n\n  \n", "a.yaml", False, False),
    ("\ufeff*.bak", "a.bak", False, True),            # a byte order mark on the first line
])
def test_helmignore_rules(text, path, is_dir, expected):
    assert cf.ignored(rules(text), path, is_dir) is expected


def test_the_top_of_the_chart_is_never_ignored():
    assert not cf.ignored(rules("*"), "", True) and not cf.ignored(rules("*"), ".", True)


@pytest.mark.parametrize("text", ["**/a.yaml", "*.sw[op]", "a\\*b"])
def test_patterns_this_reader_does_not_follow_are_left_to_helm(text):
    with pytest.raises(cf.Unsupported):
        rules(text)


def chart(files):
    return cf.load_chart([cf.ChartFile(name, data) for name, data in files.items()])


def test_crds_are_the_manifests_under_crds_then_the_subcharts_in_name_order():
    loaded = chart({"Chart.yaml": META, "crds/a.yaml": b"---\nkind: A", "crds/b.JSON": b"{}", "crds/c.txt": b"x",
                    "templates/crds/t.yaml": b"kind: T", "charts/zeta/Chart.yaml": META,
                    "charts/zeta/crds/z.yml": b"kind: Z", "charts/alpha/Chart.yaml": META,
                    "charts/alpha/crds/y.yaml": b"kind: Y", "charts/_skip/crds/s.yaml": b"kind: S",
                    "charts/x.prov": b"signature"})
    assert [item.name for item in loaded.crds] == ["crds/a.yaml", "crds/b.JSON", "crds/y.yaml", "crds/z.yml"]
    assert cf.crds_text(loaded) == "---\nkind: A\n---\n{}\n---\nkind: Y\n---\nkind: Z\n"
    assert cf.chart_fields(loaded) == {"apiVersion": "v2", "name": "demo", "version": "1.2.3", "appVersion": "v4.5.6"}


def test_no_crds_prints_nothing():
    assert cf.crds_text(chart({"Chart.yaml": META})) == ""


def archive(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as handle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                handle.addfile(info)
                continue
            info.size = len(data)
            handle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_archive_loses_its_top_directory_and_its_byte_order_marks():
    files = cf.archive_files(archive({"demo/": None, "demo/Chart.yaml": META, "demo/crds/a.yaml": b"\xef\xbb\xbfkind: A"}))
    assert files == [cf.ChartFile("Chart.yaml", META), cf.ChartFile("crds/a.yaml", b"kind: A")]


def test_a_subchart_archive_is_read_too():
    sub = archive({"sub/Chart.yaml": META, "sub/crds/s.yaml": b"kind: S"})
    loaded = chart({"Chart.yaml": META, "charts/sub-1.2.3.tgz": sub})
    assert cf.crds_text(loaded) == "---\nkind: S\n"


@pytest.mark.parametrize("members", [
    {"Chart.yaml": META},                              # not in a directory (helm refuses)
    {"demo/../evil.yaml": b"x", "demo/Chart.yaml": META},
    {"demo/./Chart.yaml": META},                       # a path helm cleans first
    {},
])
def test_archives_helm_refuses_or_cleans_are_left_to_helm(members):
    with pytest.raises(cf.Unsupported):
        cf.archive_files(archive(members))


def test_not_an_archive_is_left_to_helm():
    with pytest.raises(cf.Unsupported):
        cf.archive_files(b"not gzip")


@pytest.mark.parametrize("files", [
    {"crds/a.yaml": b"kind: A"},                                               # no Chart.yaml
    {"Chart.yaml": META, "requirements.yaml": b"dependencies: []"},
    {"Chart.yaml": META.replace(b"1.2.3", b"1.2")},                          # helm judges lenient versions
    {"Chart.yaml": META.replace(b"v4.5.6", b"1.16")},                         # a number, not a string
    {"Chart.yaml": META.replace(b"v2", b"v3")},
    {"Chart.yaml": META.replace(b"demo", b"a/b")},
    {"Chart.yaml": META + b"type: plugin\n"},
    {"Chart.yaml": META + b"dependencies:\n- version: 1.0.0\n"},             # a dependency without a name
    {"Chart.yaml": b"- a list\n"},
    {"Chart.yaml": META, "values.yaml": b"a: [unclosed"},                    # helm parses values.yaml
    {"Chart.yaml": META, "charts/README.md": b"stray"},                      # no Chart.yaml in that subchart
    {"Chart.yaml": META, "crds/a.yaml": b"\xff\xfe"},                         # not UTF-8 (crds_text)
])
def test_charts_this_reader_does_not_judge_are_left_to_helm(files):
    with pytest.raises(cf.Unsupported):
        cf.crds_text(chart(files))


def test_a_chart_without_api_version_is_a_v1_chart():
    assert cf.chart_fields(chart({"Chart.yaml": b"name: old\nversion: 0.1.0\n"}))["apiVersion"] == "v1"

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A local Helm chart's metadata and CRDs, read from its files as helm reads them, without running helm.

What ``helm show chart`` and ``helm show crds`` answer for a chart directory or archive depends only
on the chart's files. Helm's rules, followed here (helm v4.1.4, the same in v3.16):

* a chart directory is walked in lexical order, and its ``.helmignore`` with the default rule
  ``templates/.?*`` leaves files and whole directories out (pkg/chart/v2/loader/directory.go LoadDir,
  pkg/ignore/rules.go); an archive keeps every file, its top directory stripped
  (pkg/chart/loader/archive/archive.go LoadArchiveFiles); a UTF-8 byte order mark is dropped;
* ``Chart.yaml`` is the metadata, validated (pkg/chart/v2/metadata.go Validate); a file under
  ``charts/`` belongs to the subchart its first path element names, a directory or a ``.tgz``
  archive, skipped when that name starts with ``_`` or ``.`` (pkg/chart/v2/loader/load.go LoadFiles);
* the CRDs are the files under ``crds/`` with a ``.yaml``, ``.yml`` or ``.json`` extension (any
  case), the chart's then its subcharts' (pkg/chart/v2/chart.go CRDObjects), printed each after a
  ``---`` line unless it starts with one (pkg/action/show.go).

This reader is deliberately narrower than helm: whatever it does not follow exactly - a symlink, a
``.helmignore`` pattern with a character class or an escape, a file helm would refuse, ``requirements.yaml``,
a Chart.yaml field that is not a plain string, a version that is not plain SemVer, a chart API other
than v1/v2 - raises ``Unsupported``, and the caller runs helm instead. So the answer is always helm's;
only the cost differs. Subcharts are read in the order of their names (helm's own order comes from a
Go map, so it varies from run to run; what the CRDs are does not).

Pure: file names and contents in, metadata and text out (``_chart_read.read_chart_files`` reads them).
"""

from __future__ import annotations

import io
import re
import tarfile
from typing import Any, Callable, Dict, List, NamedTuple, Optional

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core; without it helm reads the chart
    yaml = None

MAX_FILE_SIZE = 5 * 1024 * 1024  # archive.MaxDecompressedFileSize
MAX_CHART_SIZE = 100 * 1024 * 1024  # archive.MaxDecompressedChartSize
DEFAULT_IGNORE = "templates/.?*"  # ignore.Rules.AddDefaults
_BOM = b"\xef\xbb\xbf"
_MANIFEST = (".yaml", ".yml", ".json")
# Plain SemVer 2.0 with an optional "v" (what Masterminds/semver's NewVersion, helm's check, accepts and more);
# anything else goes to helm, which decides.
_SEMVER = re.compile(r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                     r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?\Z")
_STRING_FIELDS = ("apiVersion", "name", "version", "appVersion", "kubeVersion", "description", "type", "home", "icon",
                  "condition", "tags")


class Unsupported(ValueError):
    """Something this reader does not follow exactly: the caller asks helm."""


class ChartFile(NamedTuple):
    name: str  # relative, "/"-separated
    data: bytes


class Chart(NamedTuple):
    metadata: Dict[str, Any]
    crds: List[ChartFile]  # the chart's, then its subcharts'


def strip_bom(data: bytes) -> bytes:
    """A file's contents as helm keeps them: without a leading UTF-8 byte order mark."""
    return data[len(_BOM):] if data.startswith(_BOM) else data


def _glob(pattern: str) -> Callable[[str], bool]:
    """Go's filepath.Match for the patterns kept here: "*" (any run of characters but "/"), "?" (one
    character but "/") and literals. A character class or an escape is Unsupported."""
    if "[" in pattern or "\\" in pattern:
        raise Unsupported(".helmignore pattern %r (a character class or an escape)" % pattern)
    expression = re.compile("".join("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
                                    for char in pattern) + r"\Z", re.DOTALL)
    return lambda name: expression.match(name) is not None


class _Rule(NamedTuple):
    match: Callable[[str], bool]
    negate: bool
    must_dir: bool
    base_only: bool


def ignore_rules(text: str) -> List[_Rule]:
    """The rules of a .helmignore (ignore.Parse, parseRule), then the default rule (AddDefaults)."""
    rules: List[_Rule] = []
    lines = text.splitlines()
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    for line in lines + [DEFAULT_IGNORE]:
        rule = line.strip()
        if not rule or rule.startswith("#"):
            continue
        if "**" in rule:
            raise Unsupported(".helmignore: double-star (**) syntax is not supported (helm refuses the chart)")
        negate = rule.startswith("!")
        rule = rule[1:] if negate else rule
        must_dir = rule.endswith("/")
        rule = rule[:-1] if must_dir else rule
        base_only = "/" not in rule
        rules.append(_Rule(_glob(rule[1:] if rule.startswith("/") else rule), negate, must_dir, base_only))
    return rules


def ignored(rules: List[_Rule], path: str, is_dir: bool) -> bool:
    """ignore.Rules.Ignore, including its handling of negated rules (a file a negated rule does not
    match is ignored)."""
    if path in ("", ".", "./"):
        return False
    for rule in rules:
        name = path.rsplit("/", 1)[-1] if rule.base_only else path
        if rule.negate:
            if rule.must_dir and not is_dir:
                return True
            if not rule.match(name):
                return True
            continue
        if rule.must_dir and not is_dir:
            continue
        if rule.match(name):
            return True
    return False


def archive_files(data: bytes) -> List[ChartFile]:
    """The files of a chart archive (.tgz), the top directory stripped (LoadArchiveFiles)."""
    files: List[ChartFile] = []
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                if member.isdir():
                    continue
                if not member.isfile() or "\\" in member.name:
                    raise Unsupported("archive member %r (not a regular file, or a Windows path)" % member.name)
                parts = member.name.split("/")
                if parts[0] == "Chart.yaml" or len(parts) < 2:
                    raise Unsupported("archive member %r outside the chart's directory" % member.name)
                name = "/".join(parts[1:])
                if name.startswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
                    raise Unsupported("archive member %r (a path helm cleans or refuses)" % member.name)
                total += member.size
                if member.size > MAX_FILE_SIZE or total > MAX_CHART_SIZE:
                    raise Unsupported("archive member %r is larger than helm loads" % member.name)
                handle = archive.extractfile(member)
                content = handle.read() if handle is not None else b""
                files.append(ChartFile(name, strip_bom(content)))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise Unsupported("not a chart archive helm reads as this reader does: %s" % exc) from exc
    if not files:
        raise Unsupported("no files in chart archive")
    return files


def _metadata(data: bytes) -> Dict[str, Any]:
    if yaml is None:
        raise Unsupported("no YAML parser (PyYAML)")
    try:
        meta = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise Unsupported("Chart.yaml: %s" % exc) from exc
    if not isinstance(meta, dict):
        raise Unsupported("Chart.yaml is not a mapping")
    odd = [key for key in _STRING_FIELDS if key in meta and not isinstance(meta[key], str)]
    if odd:
        raise Unsupported("Chart.yaml: %s not plain strings" % ", ".join(odd))
    meta = {key: value for key, value in meta.items() if isinstance(key, str)}
    meta.setdefault("apiVersion", "v1")
    name, version = meta.get("name") or "", meta.get("version") or ""
    if meta["apiVersion"] not in ("v1", "v2") or meta.get("type", "") not in ("", "application", "library"):
        raise Unsupported("Chart.yaml: apiVersion %r, type %r" % (meta["apiVersion"], meta.get("type")))
    if not name or name in (".", "..") or "/" in name or not name.isprintable() or not _SEMVER.match(version):
        raise Unsupported("Chart.yaml: name %r, version %r (helm validates these)" % (name, version))
    for key in ("maintainers", "dependencies"):
        entries = meta.get(key) or []
        if not isinstance(entries, list) or not all(isinstance(entry, dict) and entry.get("name") for entry in entries):
            raise Unsupported("Chart.yaml: %s" % key)
    return meta


def _check_yaml(name: str, data: bytes) -> None:
    """values.yaml and Chart.lock are parsed when helm loads a chart: one that does not parse fails it."""
    if yaml is None:
        raise Unsupported("no YAML parser (PyYAML)")
    try:
        list(yaml.safe_load_all(data.decode("utf-8")))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise Unsupported("%s: %s" % (name, exc)) from exc


def _extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return base[base.rfind("."):].lower() if "." in base else ""


def load_chart(files: List[ChartFile]) -> Chart:
    """A chart from its files (LoadFiles), with its subcharts' CRDs."""
    meta: Optional[Dict[str, Any]] = None
    own: List[ChartFile] = []
    subcharts: Dict[str, List[ChartFile]] = {}
    for item in files:
        name = item.name
        if name == "Chart.yaml":
            meta = _metadata(item.data)
        elif name in ("requirements.yaml", "requirements.lock"):
            raise Unsupported("%s (dependencies of a v1 chart)" % name)
        elif name in ("values.yaml", "Chart.lock"):
            _check_yaml(name, item.data)
        elif name.startswith("charts/") and not name.endswith(".prov"):
            rest = name[len("charts/"):]
            subcharts.setdefault(rest.split("/", 1)[0], []).append(ChartFile(rest, item.data))
        elif not name.startswith("templates/") and name != "values.schema.json":
            own.append(item)
    if meta is None:
        raise Unsupported("Chart.yaml file is missing")
    crds = [item for item in own if item.name.startswith("crds/") and _extension(item.name) in _MANIFEST]
    for subchart in sorted(subcharts):
        if subchart[:1] in ("_", "."):
            continue
        entries = subcharts[subchart]
        if subchart.endswith(".tgz"):
            if entries[0].name != subchart:
                raise Unsupported("subchart archive %s" % subchart)
            crds += load_chart(archive_files(entries[0].data)).crds
        else:
            crds += load_chart([ChartFile(entry.name.split("/", 1)[1], entry.data)
                                for entry in entries if "/" in entry.name]).crds
    return Chart(meta, crds)


def crds_text(chart: Chart) -> str:
    """What `helm show crds` prints for the chart."""
    out = []
    for item in chart.crds:
        try:
            text = item.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unsupported("%s is not UTF-8" % item.name) from exc
        out.append(("" if text.startswith("---") else "---\n") + text + "\n")
    return "".join(out)


def chart_fields(chart: Chart) -> Dict[str, Any]:
    """The top-level scalars of the chart's metadata, as `helm show chart` gives them (name, version,
    appVersion, ...)."""
    return {key: value for key, value in chart.metadata.items() if isinstance(value, str) and value}


__all__ = ["MAX_CHART_SIZE", "MAX_FILE_SIZE", "Chart", "ChartFile", "Unsupported", "archive_files", "chart_fields", "crds_text",
           "ignore_rules", "ignored", "load_chart", "strip_bom"]

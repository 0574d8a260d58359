# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helm CLI: argv builders and output parsers (pure; the module runs the commands).

``Helm`` puts the two together over a command runner the module passes in (its ``run_command``):
one call per step (version, release, values, chart, CRDs, repositories, upgrade), the output parsed,
a failing command raised as ``HelmFailed``. It, ``read_chart_files`` (``_chart_read``) and ``find_helm`` are the only
parts that touch the file system (the binary, local charts, the private values file).

Helm runs only when a step needs it (issue 26): a local chart's metadata and CRDs are read from its
files as helm reads them (``_chart_files``; anything that reader does not follow exactly goes to
helm), and the helm version is checked once, before the first helm command. A run that changes
nothing with a local chart starts no helm.

Rules kept here so they are unit-tested:
- argv lists only, never a shell string;
- values always go through a file (``-f``), never ``--set``; secrets never in argv: the API token
  goes to helm through the environment (HELM_KUBETOKEN), repository passwords through stdin;
- works with helm 3.12+ and helm 4 (only flags both understand are used).
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._chart_files import (
    Chart, Unsupported, chart_fields, crds_text, load_chart)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._chart_read import NotAChart, check_chart_ref, read_chart_files

MIN_HELM_VERSION = (3, 12, 0)

_VERSION_RE = re.compile(r'v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?')


class HelmError(Exception):
    """Unexpected helm output or an unsupported helm."""


def parse_helm_version(output: str) -> Tuple[int, int, int]:
    """`helm version --short` ("v3.14.2+gc309b6f", "v4.0.1+g1a2b3c4") or the long form
    (`version.BuildInfo{Version:"v3.12.0", ...}`) -> (major, minor, patch)."""
    text = (output or "").strip()
    long_form = re.search(r'Version:"([^"]+)"', text)
    candidate = long_form.group(1) if long_form else text.split()[0] if text else ""
    match = _VERSION_RE.match(candidate)
    if not match:
        raise HelmError("cannot read the helm version from %r" % text[:200])
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def check_helm_version(version: Tuple[int, int, int]) -> None:
    if version < MIN_HELM_VERSION:
        raise HelmError("helm %s is too old: %s or newer is required"
                        % (".".join(map(str, version)), ".".join(map(str, MIN_HELM_VERSION))))


def is_local_chart(chart_ref: str) -> bool:
    """A path (absolute, ./, ../ or an existing directory/archive) rather than repo/name or oci://."""
    if chart_ref.startswith("oci://"):
        return False
    if chart_ref.startswith(("/", "./", "../")) or chart_ref.endswith(".tgz"):
        return True
    return os.path.isdir(chart_ref)


def repo_of(chart_ref: str) -> Optional[str]:
    """'nvidia/gpu-operator' -> 'nvidia'; local paths and oci:// refs -> None."""
    if is_local_chart(chart_ref) or chart_ref.startswith("oci://") or "/" not in chart_ref:
        return None
    return chart_ref.split("/", 1)[0]


class HelmCommand:
    """Builds helm argv lists with the connection flags every call needs."""

    def __init__(self, binary: str = "helm", kubeconfig: Optional[str] = None, context: Optional[str] = None) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.context = context

    def _kube(self) -> List[str]:
        argv: List[str] = []
        if self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        if self.context:
            argv += ["--kube-context", self.context]
        return argv

    def version(self) -> List[str]:
        return [self.binary, "version", "--short"]

    def repo_list(self) -> List[str]:
        return [self.binary, "repo", "list", "-o", "json"]

    def repo_add(self, name: str, url: str, username: Optional[str] = None, with_password: bool = False) -> List[str]:
        argv = [self.binary, "repo", "add", name, url, "--force-update"]
        if username:
            argv += ["--username", username]
        if with_password:
            argv.append("--password-stdin")  # the password is fed on stdin, never in argv
        return argv

    def repo_update(self, names: List[str]) -> List[str]:
        return [self.binary, "repo", "update"] + list(names)

    def list_releases(self, namespace: str, release: str) -> List[str]:
        # --deployed --failed --pending: flags both helm 3 and 4 know (helm 4 dropped --all)
        return [self.binary, "list", "-n", namespace, "--deployed", "--failed", "--pending", "--filter", "^%s$" % re.escape(release),
                "-o", "json"] + self._kube()

    def get_values(self, release: str, namespace: str) -> List[str]:
        return [self.binary, "get", "values", release, "-n", namespace, "-o", "json"] + self._kube()

    def status(self, release: str, namespace: str) -> List[str]:
        return [self.binary, "status", release, "-n", namespace, "-o", "json"] + self._kube()

    def show_chart(self, chart_ref: str, version: Optional[str] = None) -> List[str]:
        return [self.binary, "show", "chart", chart_ref] + self._version_flag(chart_ref, version)

    def show_crds(self, chart_ref: str, version: Optional[str] = None) -> List[str]:
        return [self.binary, "show", "crds", chart_ref] + self._version_flag(chart_ref, version)

    def show_values(self, chart_ref: str, version: Optional[str] = None) -> List[str]:
        return [self.binary, "show", "values", chart_ref] + self._version_flag(chart_ref, version)

    def pull(self, chart_ref: str, version: Optional[str], directory: str) -> List[str]:
        """`helm pull --untar` of a repository or oci:// chart into ``directory`` (to read its subcharts)."""
        return [self.binary, "pull", chart_ref, "--untar", "--untardir", directory] + self._version_flag(chart_ref, version)

    @staticmethod
    def _version_flag(chart_ref: str, version: Optional[str]) -> List[str]:
        # --version selects a chart from a repository; a local chart is what it is.
        return ["--version", version] if version and not is_local_chart(chart_ref) else []

    def upgrade_install(self, release: str, chart_ref: str, namespace: str, values_file: str,
                        version: Optional[str] = None, extra: Optional[List[str]] = None) -> List[str]:
        """`helm upgrade --install` with values from a file only; --reset-values so that values
        removed from the plan are removed from the release (both helm 3.12+ and 4)."""
        argv = [self.binary, "upgrade", "--install", release, chart_ref, "-n", namespace,
                "-f", values_file, "--reset-values"]
        argv += self._version_flag(chart_ref, version)
        argv += list(extra or [])
        return argv + self._kube()

    def rollback(self, release: str, namespace: str) -> List[str]:
        """`helm rollback` to the previous revision (recovers a release left pending-upgrade)."""
        return [self.binary, "rollback", release, "-n", namespace] + self._kube()

    def uninstall(self, release: str, namespace: str) -> List[str]:
        return [self.binary, "uninstall", release, "-n", namespace] + self._kube()


def helm_environment(host: Optional[str] = None, api_key: Optional[str] = None, ca_cert: Optional[str] = None,
                     validate_certs: Optional[bool] = None) -> Dict[str, str]:
    """Connection settings helm reads from its environment (keeps the token out of argv)."""
    env: Dict[str, str] = {}
    if host:
        env["HELM_KUBEAPISERVER"] = host
    if api_key:
        env["HELM_KUBETOKEN"] = api_key
    if ca_cert:
        env["HELM_KUBECAFILE"] = ca_cert
    if validate_certs is False:
        env["HELM_KUBEINSECURE_SKIP_TLS_VERIFY"] = "true"
    return env


def _load_json(output: str, what: str) -> Any:
    text = (output or "").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise HelmError("helm %s did not print JSON: %r" % (what, text[:300]))


def parse_release_list(output: str, release: str) -> Optional[Dict[str, Any]]:
    """The release named ``release`` from `helm list -o json`, or None."""
    data = _load_json(output, "list")
    if data is None:
        return None
    if not isinstance(data, list):
        raise HelmError("helm list: expected a JSON list, got %s" % type(data).__name__)
    for entry in data:
        if isinstance(entry, dict) and entry.get("name") == release:
            return entry
    return None


def split_chart_field(chart_field: str, chart_name: Optional[str] = None) -> Tuple[str, str]:
    """`helm list`'s "chart" column ("gpu-operator-v25.10.1") -> ("gpu-operator", "v25.10.1").

    With the chart name known the split is exact; otherwise the version starts at the last
    "-" followed by an optional "v" and a digit."""
    if chart_name and chart_field.startswith(chart_name + "-"):
        return chart_name, chart_field[len(chart_name) + 1:]
    match = re.match(r'^(.*?)-(v?\d+\.\d+\.\d+.*)$', chart_field)
    if not match:
        raise HelmError("cannot split chart %r into name and version" % chart_field)
    return match.group(1), match.group(2)


def parse_values(output: str) -> Dict[str, Any]:
    """`helm get values -o json` (user-supplied values; "null" when none)."""
    data = _load_json(output, "get values")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HelmError("helm get values: expected a JSON object")
    return data


def parse_chart_metadata(output: str) -> Dict[str, Any]:
    """`helm show chart` prints Chart.yaml; only flat top-level scalars are needed (name, version,
    appVersion), so a minimal reader avoids a YAML dependency in this pure module."""
    meta: Dict[str, Any] = {}
    for line in (output or "").splitlines():
        if not line or line[0] in " \t#-":
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if value:
            meta[key.strip()] = value
    if "name" not in meta or "version" not in meta:
        raise HelmError("helm show chart: no name/version in %r" % (output or "")[:300])
    return meta


def normalize_version(version: Optional[str]) -> Optional[str]:
    """Chart versions compare without a leading "v" (helm accepts both for --version)."""
    if version is None:
        return None
    return version[1:] if version[:1] in ("v", "V") else version


def same_version(first: Optional[str], second: Optional[str]) -> bool:
    return normalize_version(first) == normalize_version(second)


class HelmFailed(HelmError):
    """A helm command exited with an unexpected code; ``argv`` holds no secret (see above)."""

    def __init__(self, what: str, argv: List[str], rc: int, output: str) -> None:
        super().__init__("helm %s failed (rc=%d): %s" % (what, rc, output.strip()))
        self.argv = argv
        self.rc = rc


# run(argv, stdin) -> (rc, stdout, stderr)
CommandRunner = Callable[[List[str], Optional[str]], Tuple[int, str, str]]


class Helm:
    """The helm steps of a release, over ``run`` (which executes one argv with optional stdin)."""

    def __init__(self, command: HelmCommand, run: CommandRunner) -> None:
        self.command = command
        self._run = run
        self.checked_version: Optional[Tuple[int, int, int]] = None  # set by the first helm command
        self._local: Dict[str, Optional[Chart]] = {}

    def call(self, argv: List[str], what: str, data: Optional[str] = None, ok_rcs: Sequence[int] = (0,)) -> str:
        """One helm command, after the version check (once, before the first)."""
        if self.checked_version is None:
            self.version()
        return self._call(argv, what, data, ok_rcs)

    def _call(self, argv: List[str], what: str, data: Optional[str] = None, ok_rcs: Sequence[int] = (0,)) -> str:
        rc, out, err = self._run(argv, data)
        if rc not in ok_rcs:
            raise HelmFailed(what, argv, rc, err or out)
        return out

    def version(self) -> Tuple[int, int, int]:
        """The helm version; HelmError when it is too old."""
        version = parse_helm_version(self._call(self.command.version(), "version"))
        check_helm_version(version)
        self.checked_version = version
        return version

    def checked_version_text(self) -> Optional[str]:
        """The version checked before helm's first command ("3.14.2"), or None when helm did not run."""
        return None if self.checked_version is None else ".".join(str(part) for part in self.checked_version)

    def local_chart(self, chart_ref: str) -> Optional[Chart]:
        """A local chart read from its files (once), or None when helm must read it (a repository chart,
        or what ``_chart_files`` leaves to helm)."""
        if not is_local_chart(chart_ref):
            return None
        if chart_ref not in self._local:
            try:
                self._local[chart_ref] = load_chart(read_chart_files(chart_ref))
            except NotAChart as exc:  # a FIFO or a device: helm would block on it or read it (issue 43 #2)
                raise HelmError(str(exc)) from exc
            except (Unsupported, OSError):
                self._local[chart_ref] = None
        return self._local[chart_ref]

    def release(self, namespace: str, release: str) -> Optional[Dict[str, Any]]:
        return parse_release_list(self.call(self.command.list_releases(namespace, release), "list"), release)

    def values(self, release: str, namespace: str) -> Dict[str, Any]:
        return parse_values(self.call(self.command.get_values(release, namespace), "get values"))

    def chart_metadata(self, chart_ref: str, version: Optional[str]) -> Dict[str, Any]:
        """Chart.yaml of the chart. HelmError when a repository chart has no pinned ``version``, a
        local chart does not exist, or ``version`` is given and is not the chart's."""
        if not is_local_chart(chart_ref) and not version:
            raise HelmError("chart_version is required for the repository chart %s: pin the version you mean "
                            "(for example v26.7.0)" % chart_ref)
        if is_local_chart(chart_ref) and not os.path.exists(chart_ref):
            raise HelmError("chart_ref %s: no such chart directory or archive" % chart_ref)
        chart = self.local_chart(chart_ref)
        meta = chart_fields(chart) if chart is not None else \
            parse_chart_metadata(self.call(self.command.show_chart(chart_ref, version), "show chart"))
        if version and not same_version(version, meta["version"]):
            raise HelmError("chart_version %s does not match the chart %s, which is version %s"
                            % (version, chart_ref, meta["version"]))
        return meta

    def crds_text(self, chart_ref: str, version: Optional[str]) -> str:
        chart = self.local_chart(chart_ref)
        if chart is not None:
            try:
                return crds_text(chart)
            except Unsupported:
                pass
        return self.call(self.command.show_crds(chart_ref, version), "show crds")

    def values_text(self, chart_ref: str, version: Optional[str]) -> str:
        """The chart's default values (YAML), which say where its images are."""
        return self.call(self.command.show_values(chart_ref, version), "show values")

    def subcharts(self, chart_ref: str, version: Optional[str]) -> Dict[str, Tuple[str, str]]:
        """Each subchart the chart carries (``charts/``): name -> (its default values as YAML, its appVersion).
        ``helm show values`` prints only the parent's; a repository chart is pulled to a temporary directory."""
        found: Dict[str, Tuple[str, str]] = {}
        with tempfile.TemporaryDirectory(prefix="gpufleet-chart-") as scratch:
            charts = os.path.join(self._chart_dir(chart_ref, version, scratch), "charts")
            for entry in sorted(os.listdir(charts)) if os.path.isdir(charts) else []:
                path = os.path.join(charts, entry)
                if not (os.path.isdir(path) or entry.endswith(".tgz")):
                    continue
                meta = parse_chart_metadata(self.call(self.command.show_chart(path), "show chart"))
                found[str(meta["name"])] = (self.call(self.command.show_values(path), "show values"),
                                            str(meta.get("appVersion") or meta["version"]))
        return found

    def _chart_dir(self, chart_ref: str, version: Optional[str], scratch: str) -> str:
        if os.path.isdir(chart_ref):
            return chart_ref
        if is_local_chart(chart_ref):
            try:
                check_chart_ref(chart_ref)  # a FIFO or a device would block tarfile (issue 43 #2)
            except NotAChart as exc:
                raise HelmError(str(exc)) from exc
            with tarfile.open(chart_ref) as archive:
                members = [m for m in archive.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
                           and ".." not in m.name.split("/")]
                archive.extractall(scratch, members=members)  # nosec - members checked above
        else:
            self.call(self.command.pull(chart_ref, version, scratch), "pull")
        tops = sorted(d for d in os.listdir(scratch) if os.path.isdir(os.path.join(scratch, d)))
        return os.path.join(scratch, tops[0]) if tops else scratch

    def repositories(self) -> Dict[str, Any]:
        """Configured repositories, name -> URL (none configured: helm exits 1)."""
        out = self.call(self.command.repo_list(), "repo list", ok_rcs=(0, 1))
        try:
            repos = json.loads(out) if out.strip().startswith("[") else []
        except ValueError:
            repos = []
        return dict((r.get("name"), r.get("url")) for r in repos if isinstance(r, dict))

    def sync_repository(self, name: str, url: str, username: Optional[str], password: Optional[str],
                        dry_run: bool = False) -> bool:
        """Add the repository ``name`` (or correct its URL) and refresh it. With ``dry_run`` nothing
        is changed; False then says that the repository would have to be added first."""
        if self.repositories().get(name) != url:
            if dry_run:
                return False
            self.call(self.command.repo_add(name, url, username, with_password=bool(password)), "repo add",
                      data=password)
        if not dry_run:
            self.call(self.command.repo_update([name]), "repo update")
        return True

    def upgrade_install(self, release: str, chart_ref: str, namespace: str, values: Dict[str, Any],
                        version: Optional[str], tmpdir: Optional[str] = None) -> None:
        """`helm upgrade --install` with ``values`` in a private file (mode 0600, removed afterwards)."""
        handle, path = tempfile.mkstemp(prefix="gpu-operator-values-", suffix=".yaml", dir=tmpdir)
        try:
            with os.fdopen(handle, "w") as stream:
                json.dump(values, stream, indent=2, sort_keys=True)  # JSON is YAML
            self.call(self.command.upgrade_install(release, chart_ref, namespace, path, version), "upgrade --install")
        finally:
            os.unlink(path)


def find_helm(binary: str, search: Callable[[str], str]) -> str:
    """The helm executable: a path must be executable; a name is looked up with ``search`` (which
    raises ValueError when it finds nothing). HelmError otherwise."""
    if os.path.sep in binary:
        if not os.access(binary, os.X_OK):
            raise HelmError("helm_binary %s is not an executable file" % binary)
        return binary
    try:
        return search(binary)
    except ValueError as exc:
        raise HelmError(str(exc)) from exc

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The images a GPU Operator chart version pulls, and their repositories rewritten to a mirror.

Pure, no I/O. Which values hold an image is read from the chart's own default values (``helm show
values``), not from a hand-kept list (docs/reference/specs.md §17.1): a mapping with ``repository``
and ``image`` is an image triple (``repository/image:version``, the version defaulting to the
chart's appVersion); a mapping ``image`` with ``repository`` and ``tag`` is a subchart image
(``repository:tag``). A mirror keeps each image's path below its registry host, its name and its tag.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._image_plan import OsError, pulled, tagged_images
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._values_tree import get_path

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    yaml = None

Path = Tuple[str, ...]

TRIPLE = "repository/image/version"
REPO_TAG = "image.repository/tag"
# A subchart switched on by another value than its own section (docs/reference/specs.md §17.1).
SUBCHART_SWITCHES: Dict[str, Path] = {"node-feature-discovery": ("nfd", "enabled")}
_REGISTRY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


class ImageError(ProblemsError):
    """Input that cannot name images; ``problems`` lists every reason."""


@dataclass(frozen=True)
class ImageSlot:
    """A values mapping that holds one image: its path and its style (TRIPLE or REPO_TAG)."""

    path: Path
    style: str

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def registry_problems(registry: Optional[str], option: str = "registry") -> List[str]:
    """Why ``registry`` cannot be a mirror prefix (host[:port][/path]); [] when it can or is empty."""
    if not registry:
        return []
    if "://" in registry:
        return ["%s %r must not have a scheme: give host[:port][/path], such as %s"
                % (option, registry, registry.split("://", 1)[1].rstrip("/") or "mirror.example.com:5000")]
    if registry.endswith("/"):
        return ["%s %r must not end with a slash: give %s" % (option, registry, registry.rstrip("/"))]
    if not _REGISTRY.match(registry):
        return ["%s %r is not host[:port][/path] (lower-case path, no spaces, no tag)" % (option, registry)]
    return []


def parse_values_text(text: str) -> Dict[str, Any]:
    """``helm show values`` output (YAML) -> a mapping; ImageError when it is not one."""
    try:
        data = yaml.safe_load(text or "") or {}
    except yaml.YAMLError as exc:
        raise ImageError(["the chart's values do not parse: %s" % exc]) from exc
    if not isinstance(data, dict):
        raise ImageError(["the chart's values are not a mapping"])
    return data


def full_chart_values(values_text: str, subcharts: Mapping[str, Tuple[str, str]]) -> Dict[str, Any]:
    """``helm show values`` of the chart and of each subchart (name -> (YAML, appVersion)) -> the values
    every image and pull secret of the chart lives in (``with_subcharts``); ImageError when one does not parse."""
    return with_subcharts(parse_values_text(values_text),
                          {name: (parse_values_text(text), version) for name, (text, version) in subcharts.items()})


def image_slots(values: Mapping[str, Any], path: Path = ()) -> List[ImageSlot]:
    """Every image-holding mapping of the chart's default ``values``, in document order."""
    slots: List[ImageSlot] = []
    if isinstance(values.get("repository"), str) and isinstance(values.get("image"), str):
        slots.append(ImageSlot(path, TRIPLE))
    elif path and path[-1] == "image" and isinstance(values.get("repository"), str) and "tag" in values:
        slots.append(ImageSlot(path, REPO_TAG))
    for key, child in values.items():
        if isinstance(child, dict):
            slots.extend(image_slots(child, path + (str(key),)))
    return slots


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    """Helm's value merge: mappings merge key by key, anything else replaces."""
    result = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _at(values: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path``, None when it is missing."""
    return get_path(values, path)[1]


def with_subcharts(chart_values: Mapping[str, Any], subcharts: Mapping[str, Tuple[Mapping[str, Any], str]]) -> Dict[str, Any]:
    """The chart's values as Helm gives them to each subchart: ``subcharts`` maps a dependency's name to
    its own default values and appVersion (``helm show values`` prints only the parent's); the
    parent's section of that name overrides them, and an empty ``image.tag`` means the appVersion
    (docs/reference/specs.md §17.1)."""
    result = copy.deepcopy(dict(chart_values))
    for name, (own, app_version) in subcharts.items():
        merged = merge(own, result.get(name) or {})
        image = merged.get("image")
        if isinstance(image, dict) and "repository" in image and not image.get("tag"):
            image["tag"] = app_version
        result[name] = merged
    return result


def mirror_repository(repository: str, registry: str) -> str:
    """``nvcr.io/nvidia/k8s`` -> ``<registry>/nvidia/k8s``: the registry host is replaced, the path
    kept; a repository without a host (Docker Hub) keeps its whole path."""
    first, sep, rest = repository.partition("/")
    has_host = sep and ("." in first or ":" in first or first == "localhost")
    return "%s/%s" % (registry, rest if has_host else repository)


def mirror_values(chart_values: Mapping[str, Any], values: Mapping[str, Any], registry: str) -> Dict[str, Any]:
    """The value overrides that point every image of the chart (with ``values`` applied) at ``registry``."""
    problems = registry_problems(registry)
    if problems:
        raise ImageError(problems)
    effective = merge(chart_values, values)
    overrides: Dict[str, Any] = {}
    for slot in image_slots(chart_values):
        repository = _at(effective, slot.path + ("repository",))
        if isinstance(repository, str) and repository:
            node = overrides
            for key in slot.path:
                node = node.setdefault(key, {})
            node["repository"] = mirror_repository(repository, registry)
    return overrides


def _reference(slot: ImageSlot, section: Mapping[str, Any], app_version: str) -> str:
    if slot.style == TRIPLE:
        name, tag = "%s/%s" % (section["repository"], section["image"]), section.get("version") or app_version
    else:
        name, tag = section["repository"], section.get("tag") or app_version
    tag = str(tag)
    return "%s@%s" % (name, tag) if tag.startswith("sha256:") else "%s:%s" % (name, tag)


def chart_images(chart_values: Mapping[str, Any], values: Mapping[str, Any], app_version: str,
                 extra: Iterable[str] = (), os_tags: Sequence[str] = ()) -> List[Dict[str, str]]:
    """Each image the chart and the operator pull with ``values`` (what they do not deploy left out;
    the driver-type images once per OS tag in ``os_tags``; ``_image_plan``), then ``extra`` (ours,
    such as the verification pods' image): ``{"image", "value"}``, sorted, no duplicates. ImageError
    when a driver-type image is pulled and ``os_tags`` is empty, or the driver is precompiled."""
    effective = merge(chart_values, values)
    found: Dict[str, str] = {}
    problems: List[str] = []
    for slot in image_slots(chart_values):
        section = _at(effective, slot.path)
        if not (isinstance(section, Mapping) and section.get("repository") and pulled(effective, slot.path)):
            continue
        if slot.path == ("driver",) and str(section.get("usePrecompiled")).lower() == "true":
            problems.append("driver.usePrecompiled: precompiled driver images are tagged per node kernel "
                            "(<version>-<kernel>-<os>); list them by hand or set driver.usePrecompiled=false")
            continue
        images, missing = tagged_images(_reference(slot, section, app_version), slot.path, os_tags)
        problems += [p for p in missing if p not in problems]
        for image in images:
            found.setdefault(image, slot.dotted)
    if problems:
        raise ImageError(problems)
    for image in extra:
        found.setdefault(image, "(collection)")
    return [{"image": image, "value": found[image]} for image in sorted(found)]


def mirror_image(image: str, registry: Optional[str]) -> str:
    """One image reference (``nvcr.io/nvidia/cuda:12.6.3``) pointed at ``registry``; unchanged when empty."""
    if not registry:
        return image
    problems = registry_problems(registry)
    if problems:
        raise ImageError(problems)
    return mirror_repository(image, registry)


def _existing_pull_secrets(values: Mapping[str, Any], names: List[str]) -> Dict[str, Any]:
    overrides: Dict[str, Any] = {}
    for key, child in values.items():
        if key == "imagePullSecrets":
            overrides[key] = list(names)
        elif isinstance(child, dict):
            nested = _existing_pull_secrets(child, names)
            if nested:
                overrides[key] = nested
    return overrides


def pull_secret_values(chart_values: Mapping[str, Any], names: List[str], subcharts: Iterable[str] = ()) -> Dict[str, Any]:
    """Value overrides that give every pod that pulls the secret ``names`` (docs/reference/specs.md §17.2):
    every ``imagePullSecrets`` of the chart, and one in each section that holds an image where the
    defaults have no such key (dcgm, dcgmExporter: the ClusterPolicy accepts it); a subchart of
    ``subcharts`` (node-feature-discovery) gets its own top-level key with Kubernetes' form
    ``[{name: ...}]``, which its pod templates take as is."""
    overrides = _existing_pull_secrets({k: v for k, v in chart_values.items() if k not in set(subcharts)}, names)
    for key, child in chart_values.items():
        if key in set(subcharts):
            overrides[key] = {"imagePullSecrets": [{"name": name} for name in names]}
        elif isinstance(child, dict) and isinstance(child.get("repository"), str) and isinstance(child.get("image"), str):
            overrides.setdefault(key, {})["imagePullSecrets"] = list(names)
    return overrides


def registry_host(registry: str) -> str:
    """``mirror.example:5000/gpu`` -> ``mirror.example:5000``, the key of a docker config's ``auths``."""
    return registry.split("/", 1)[0]


def docker_config_secret(name: str, namespace: str, server: str, username: str, password: str) -> Dict[str, Any]:
    """A ``kubernetes.io/dockerconfigjson`` Secret with the credentials for ``server`` (§17.2)."""
    auth = base64.b64encode(("%s:%s" % (username, password)).encode("utf-8")).decode("ascii")
    config = {"auths": {server: {"username": username, "password": password, "auth": auth}}}
    encoded = base64.b64encode(json.dumps(config, sort_keys=True).encode("utf-8")).decode("ascii")
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
            "data": {".dockerconfigjson": encoded}}


def secret_forms(username: str, password: str) -> List[str]:
    """The forms of a password that a docker config holds (masked in every output)."""
    return [password, base64.b64encode(("%s:%s" % (username, password)).encode("utf-8")).decode("ascii")]


PROXY_NAMES = (("http_proxy", "HTTP_PROXY"), ("https_proxy", "HTTPS_PROXY"), ("no_proxy", "NO_PROXY"))


def env_with(values: Mapping[str, Any], section: str, wanted: List[Tuple[str, str, str]]) -> List[Dict[str, str]]:
    """``<section>.env`` of ``values`` with each (option, name, value) of ``wanted`` appended when absent;
    ImageError naming the option when ``values`` sets that name to another value."""
    current = [dict(e) for e in (_at(values, (section, "env")) or []) if isinstance(e, Mapping)]
    present = {e.get("name"): e.get("value") for e in current}
    problems = []
    for option, name, value in wanted:
        if name not in present:
            current.append({"name": name, "value": value})
            present[name] = value
        elif present[name] != value:
            problems.append("%s=%r contradicts values.%s.env %s=%r" % (option, value, section, name, present[name]))
    if problems:
        raise ImageError(problems)
    return current


def proxy_env(values: Mapping[str, Any], proxy: Mapping[str, Any]) -> List[Dict[str, str]]:
    """``driver.env`` with the proxy settings, upper- and lower-case as NVIDIA's proxy page sets them
    (docs/reference/specs.md §17.4), after the entries ``values`` already has."""
    return env_with(values, "driver", [("proxy.%s" % option, name, str(proxy[option]))
                                       for option, upper in PROXY_NAMES if proxy.get(option) for name in (upper, option)])


# DCGM exporter settings that attribute a shared GPU's series to every pod holding it, and the first exporter
# release that has them all (docs/reference/specs.md §17.5).
PER_POD_METRICS_ENV = (("KUBERNETES_VIRTUAL_GPUS", "true"), ("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "true"))
PER_POD_METRICS_EXPORTER = (4, 2, 0)
# The newest exporter release the collection was checked against (chart v26.7.0, §17.5): a later one is
# used, with a warning that its settings were not checked.
PER_POD_METRICS_KNOWN = (4, 8, 3)
_EXPORTER_TAG = re.compile(r"^(\d+)\.(\d+)\.(\d+)-(\d+)\.(\d+)\.(\d+)(?:-.*)?$")


def per_pod_metrics_warnings(tag: str) -> List[str]:
    """A warning when the exporter release of ``tag`` is newer than any the collection knows (its per-pod
    settings are assumed, not checked); none for a known or an unparsable tag (per_pod_metrics_env refuses that)."""
    match = _EXPORTER_TAG.match(tag)
    exporter = tuple(int(part) for part in match.groups()[3:]) if match else None
    if exporter is None or exporter <= PER_POD_METRICS_KNOWN:
        return []
    return ["per_pod_metrics: DCGM exporter %s (tag %s, dcgmExporter.version) is newer than any release the collection "
            "knows (%s): its per-pod settings %s are assumed, not checked; see docs/metrics-on-shared-gpus.md"
            % (".".join(map(str, exporter)), tag, ".".join(map(str, PER_POD_METRICS_KNOWN)),
               ", ".join(name for name, _value in PER_POD_METRICS_ENV))]


def exporter_tag(chart_values: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """The DCGM exporter image tag in use (``dcgmExporter.version``: the values over the chart's)."""
    return str(_at(merge(chart_values, values), ("dcgmExporter", "version")) or "")


def per_pod_metrics_env(chart_values: Mapping[str, Any], values: Mapping[str, Any]) -> List[Dict[str, str]]:
    """``dcgmExporter.env`` with per-pod attribution on; ImageError when the exporter tag in use
    (``dcgmExporter.version``) is older than PER_POD_METRICS_EXPORTER or does not say its release."""
    tag = exporter_tag(chart_values, values)
    match = _EXPORTER_TAG.match(tag)
    if not match:
        raise ImageError(["per_pod_metrics: the DCGM exporter tag %r (dcgmExporter.version) does not say its release "
                          "(<DCGM>-<exporter>[-flavour]); per-pod attribution needs exporter %d.%d.%d or later"
                          % ((tag,) + PER_POD_METRICS_EXPORTER)])
    exporter = tuple(int(part) for part in match.groups()[3:])
    if exporter < PER_POD_METRICS_EXPORTER:
        raise ImageError(["per_pod_metrics: DCGM exporter %s (tag %s) lacks per-pod attribution on shared GPUs "
                          "(pod labels came with exporter %d.%d.%d); use a newer GPU Operator chart"
                          % ((".".join(map(str, exporter)), tag) + PER_POD_METRICS_EXPORTER)])
    return env_with(values, "dcgmExporter", [("per_pod_metrics", name, value) for name, value in PER_POD_METRICS_ENV])


__all__ = ["ImageError", "PER_POD_METRICS_ENV", "PER_POD_METRICS_EXPORTER", "PROXY_NAMES", "env_with",
           "per_pod_metrics_env", "per_pod_metrics_warnings", "exporter_tag", "PER_POD_METRICS_KNOWN", "proxy_env", "ImageSlot",
           "REPO_TAG", "TRIPLE", "chart_images", "docker_config_secret", "image_slots", "merge",
           "mirror_image", "mirror_repository", "mirror_values", "parse_values_text", "pull_secret_values", "registry_host",
           "registry_problems", "secret_forms", "with_subcharts", "full_chart_values", "OsError"]

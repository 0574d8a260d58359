"""Image pulls from the lab's private registries (docs/reference/specs.md §17.2).

A registry host named in ``Settings.private_registries`` (``GPULAB_PRIVATE_REGISTRIES``, comma
separated) answers only pulls that carry credentials for it: the kubelet takes them from the pod's
``imagePullSecrets``, each a Secret of type ``kubernetes.io/dockerconfigjson`` in the pod's namespace
whose ``.dockerconfigjson`` has ``auths[<host>]``. A named Secret that does not exist is passed
over (Kubernetes records ``FailedToRetrieveImagePullSecret`` and pulls without it). The lab checks
that credentials for the host are present, not what they are. Pure: the caller reads the Secrets.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from gpulab.cluster.objects import Obj

DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"


# The reference grammar of distribution/reference (reference.go's grammar comment and regexp.go, the
# package the kubelet's applyDefaultImageTag parses with), written from that grammar:
# name [":" tag] ["@" digest]; name = [domain "/"] path; the path lower case; at most 255 characters.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = r"(?:%s(?:\.%s)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?" % (_DOMAIN_PART, _DOMAIN_PART)
_REFERENCE = re.compile(r"^(?:(?P<domain>%s)/)?(?P<path>%s(?:/%s)*)(?::(?P<tag>[\w][\w.-]{0,127}))?"
                        r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
                        % (_DOMAIN, _COMPONENT, _COMPONENT))
_HEX64 = re.compile(r"^[a-f0-9]{64}$")


def reference_problem(image: str) -> Optional[str]:
    """Why the kubelet cannot parse ``image`` (its ``InvalidImageName``), or None."""
    found = _REFERENCE.match(image or "")
    if found is None:
        lowered = _REFERENCE.match((image or "").lower())
        return "repository name must be lowercase" if lowered and image else "invalid reference format"
    domain = found.group("domain")
    if domain and "." not in domain and ":" not in domain and domain != "localhost" and domain.lower() != domain:
        return "repository name must be lowercase"  # an upper-case first component is a path, not a host
    if len(found.group("path")) + len(domain or "") + (1 if domain else 0) > 255:
        return "repository name must not be more than 255 characters"
    if _HEX64.match(image):
        return "invalid repository name (%s), cannot specify 64-byte hexadecimal strings" % image
    return None


def image_host(image: str) -> str:
    first, sep, _rest = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


def private_hosts(setting: str) -> Tuple[str, ...]:
    return tuple(host.strip() for host in (setting or "").split(",") if host.strip())


def _auth_hosts(secret: Obj) -> List[str]:
    if secret.get("type") != DOCKER_CONFIG_JSON:
        return []
    try:
        raw = base64.b64decode((secret.get("data") or {}).get(".dockerconfigjson") or "")
        return list((json.loads(raw or b"{}").get("auths") or {}).keys())
    except (ValueError, TypeError, AttributeError):
        return []


def pull_problems(pod: Obj, private: Sequence[str],
                  secret: Callable[[str, str], Optional[Obj]]) -> Tuple[List[str], List[str]]:
    """(pull failures, names of missing pull secrets) of ``pod``; ``secret(namespace, name)`` reads one."""
    spec: Mapping = pod.get("spec") or {}
    namespace = pod["metadata"].get("namespace") or "default"
    names = [ref.get("name") for ref in spec.get("imagePullSecrets") or [] if ref.get("name")]
    secrets = {name: secret(namespace, name) for name in names}
    missing = [name for name, found in secrets.items() if found is None]
    hosts = {host for found in secrets.values() if found is not None for host in _auth_hosts(found)}
    failures = []
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        host = image_host(str(container.get("image") or ""))
        if host in private and host not in hosts:
            failures.append('%s: failed to pull image "%s": pull access denied, authorization failed: no credentials '
                            "for %s" % (container.get("name"), container.get("image"), host))
    return failures, missing


__all__ = ["DOCKER_CONFIG_JSON", "image_host", "private_hosts", "pull_problems", "reference_problem"]

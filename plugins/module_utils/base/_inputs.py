# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the gpu_operator's network and credential inputs, and URL redaction (pure, no I/O).

One place for each rule, so that the module (before any request) and the preflight give the same
message: the proxy settings (``proxy_problems``), pull-secret names and registry credentials
(``pull_secret_problems``), whether an existing Secret may be written (``secret_owner_problem``),
and ``redact_urls``, which hides the userinfo (``user:password@``) of every URL in a message, a
result or a diff. A message never repeats a password: it names the option and shows the URL redacted.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

REDACTED = "<redacted>"
# scheme://userinfo@ (RFC 3986 §3.2.1): up to the last "@" before a space or a quote, so that a password
# with an unencoded "/" or "@" is hidden too (a path with "@" is hidden with it: more, never less)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s'\"]*@")
PROXY_SCHEMES = ("http", "https")
_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_IPV6 = re.compile(r"^\[[0-9A-Fa-f:.]+\]$")
_NO_PROXY_ENTRY = re.compile(r"^[A-Za-z0-9.*:/\[\]_-]{1,255}$")
# A Secret's name is a DNS-1123 subdomain (Kubernetes: ValidateSecretName, IsDNS1123Subdomain).
_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The label that marks the Secrets the collection created (and so may update).
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpufleet.sharing")
DOCKER_CONFIG_TYPE = "kubernetes.io/dockerconfigjson"


def redact_url(text: str) -> str:
    """``text`` with the userinfo of every ``scheme://user:password@host`` replaced by <redacted>."""
    return _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)


def redact_urls(value: Any) -> Any:
    """A copy of ``value`` (nested dicts, lists, strings) with every URL's userinfo redacted."""
    if isinstance(value, str):
        return redact_url(value) if "@" in value else value
    if isinstance(value, Mapping):
        return {key: redact_urls(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_urls(item) for item in value]
    return value


def _control(text: str) -> bool:
    return any(ord(char) < 0x21 or ord(char) == 0x7F for char in text)


def host_problem(option: str, host: str, port: Optional[str]) -> Optional[str]:
    """Why ``host[:port]`` cannot be a host: a DNS name (labels of at most 63 characters, 253 in
    all) or an IP address, and a port from 1 to 65535."""
    if not (_HOST.match(host) or _IPV6.match(host)):
        return "%s: host %r is not a DNS name or an IP address (labels of at most 63 letters, digits or " \
               "'-', 253 characters in all)" % (option, host[:80])
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return "%s: port %r is not a number from 1 to 65535" % (option, port)
    return None


def proxy_url_problem(option: str, url: Any) -> Optional[str]:
    """Why ``url`` cannot be an HTTP proxy: http:// or https://, a host, an optional port, nothing else."""
    if not isinstance(url, str):
        return "%s must be a URL string such as http://proxy.example.com:3128, got %s" % (option, type(url).__name__)
    shown = redact_url(url)
    if _control(url):
        return "%s %r contains a space, a newline or another control character" % (option, shown)
    if "://" not in url:
        return "%s %r has no scheme: give http://%s" % (option, shown, shown)
    parts = urlsplit(url)
    if parts.scheme.lower() not in PROXY_SCHEMES:
        return "%s %r: the scheme must be http or https, got %r" % (option, shown, parts.scheme)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "%s %r: a proxy URL has no path, query or fragment" % (option, shown)
    return host_problem(option, *split_host_port(parts.netloc.rpartition("@")[2]))


def split_host_port(text: str) -> Tuple[str, Optional[str]]:
    """``host:port`` / ``[v6]:port`` -> (host, port or None)."""
    if text.startswith("["):
        host, _sep, rest = text.partition("]")
        return host + "]", (rest[1:] if rest.startswith(":") else rest or None)
    host, sep, port = text.partition(":")
    return host, (port if sep else None)


def no_proxy_text(value: Any) -> Any:
    """``no_proxy`` as the comma-separated text the variable holds: a list is joined, text kept."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item).strip() for item in value)
    return value


def no_proxy_problem(value: Any) -> Optional[str]:
    """Why ``value`` cannot be a NO_PROXY list (host names, .domains, IP addresses, CIDRs, *)."""
    if not isinstance(value, str):
        return "proxy.no_proxy must be a comma-separated string or a list of hosts, got %s" % type(value).__name__
    bad = [entry for entry in value.split(",") if not _NO_PROXY_ENTRY.match(entry.strip())]
    if _control(value.replace(" ", "")) or bad:
        return "proxy.no_proxy: %s is not a host, .domain, IP address or CIDR (no spaces inside, no control " \
               "characters, no empty entries)" % ", ".join(repr(entry) for entry in bad[:5] or [value[:80]])
    return None


def proxy_problems(proxy: Optional[Mapping[str, Any]]) -> List[str]:
    """Every problem of the gpu_operator's ``proxy`` option (the settings that go into ``driver.env``)."""
    problems: List[str] = []
    for option in ("http_proxy", "https_proxy"):
        if (proxy or {}).get(option):
            problem = proxy_url_problem("proxy." + option, proxy[option])
            problems += [problem] if problem else []
    if (proxy or {}).get("no_proxy"):
        problem = no_proxy_problem(no_proxy_text(proxy["no_proxy"]))
        problems += [problem] if problem else []
    return problems


def secret_name_problem(option: str, name: Any) -> Optional[str]:
    if not isinstance(name, str) or not _SUBDOMAIN.match(name):
        return "%s: %r is not a Secret name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', " \
               "at most 253 characters)" % (option, name if not isinstance(name, str) else name[:80])
    return None


def pull_secret_problems(names: Sequence[Any], credentials: Optional[Mapping[str, Any]]) -> List[str]:
    """The problems of ``image_pull_secrets`` and ``registry_credentials`` (the password never shown)."""
    if not isinstance(names, (list, tuple)) or (credentials and not isinstance(credentials, Mapping)):
        return ["image_pull_secrets must be a list of Secret names and registry_credentials a mapping "
                "(name, username, password, server)"]
    problems = [p for i, name in enumerate(names or []) for p in [secret_name_problem("image_pull_secrets[%d]" % i, name)] if p]
    duplicates = sorted({name for name in names or [] if list(names).count(name) > 1 and isinstance(name, str)})
    problems += ["image_pull_secrets: %s listed more than once" % ", ".join(duplicates)] if duplicates else []
    if credentials:
        problem = secret_name_problem("registry_credentials.name", credentials.get("name"))
        problems += [problem] if problem else []
        username, password = credentials.get("username") or "", credentials.get("password") or ""
        if not username or ":" in username or _control(username):
            problems.append("registry_credentials.username must be non-empty, without ':' (it separates user and password "
                            "in the docker config's auth), spaces or control characters")
        if not password or _control(password):
            problems.append("registry_credentials.password must be non-empty, without spaces or control characters")
        server = credentials.get("server")
        if server and ("@" in server or "://" in server):
            problems.append("registry_credentials.server must be host[:port] only, without scheme or user:password@")
    return problems


def userinfo_problem(option: str, value: Optional[str]) -> Optional[str]:
    """A registry given as ``user:password@host``: refused without repeating it."""
    if value and "@" in value:
        return "%s must not contain credentials (user:password@): give host[:port][/path] and the credentials " \
               "in registry_credentials" % option
    return None


def registry_host_problem(option: str, registry: Optional[str]) -> Optional[str]:
    """The host and port of ``host[:port][/path]`` (the rest is _images.registry_problems')."""
    if not registry or "@" in registry or "://" in registry:
        return None
    return host_problem(option, *split_host_port(registry.split("/", 1)[0]))


# A container image reference (github.com/distribution/reference, reference.go, v0.6.0: domain[:port]/path[:tag][@digest]).
_IMAGE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?/)?"
                    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
                    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")


def image_problem(option: str, image: Any) -> Optional[str]:
    """Why ``image`` is not an image reference (no spaces, shell characters or upper-case path)."""
    if isinstance(image, str) and len(image) <= 1024 and _IMAGE.match(image):
        return None
    return "%s %r is not an image reference ([registry[:port]/]path[:tag][@digest], lower-case path)" \
        % (option, image[:120] if isinstance(image, str) else image)


def input_problems(params: Mapping[str, Any]) -> List[str]:
    """The gpu_operator's registry, proxy and pull-secret inputs (its option names)."""
    credentials = params.get("registry_credentials") or None
    problems = [p for p in (userinfo_problem("registry", params.get("registry")),
                            registry_host_problem("registry", params.get("registry")),
                            registry_host_problem("registry_credentials.server", (credentials or {}).get("server"))) if p]
    return problems + proxy_problems(params.get("proxy")) + pull_secret_problems(params.get("image_pull_secrets") or [],
                                                                                 credentials)


def secret_owner_problem(existing: Optional[Mapping[str, Any]], namespace: str, name: str) -> Optional[str]:
    """Why the Secret ``existing`` (None: absent) may not be written by registry_credentials: it was not
    created by the collection (no MANAGED_BY label), or it is of another type (immutable in Kubernetes)."""
    if existing is None:
        return None
    meta: Dict[str, Any] = dict(existing.get("metadata") or {})
    if (meta.get("labels") or {}).get(MANAGED_BY[0]) != MANAGED_BY[1]:
        return "registry_credentials: Secret %s/%s exists and was not created by gpufleet.sharing (no label %s=%s); " \
               "it is left as it is: choose another name, or name it in image_pull_secrets to use it" \
               % ((namespace, name) + MANAGED_BY)
    if existing.get("type", "Opaque") != DOCKER_CONFIG_TYPE:
        return "registry_credentials: Secret %s/%s is of type %s, not %s (a Secret's type cannot change); delete it " \
               "or choose another name" % (namespace, name, existing.get("type", "Opaque"), DOCKER_CONFIG_TYPE)
    return None


__all__ = ["DOCKER_CONFIG_TYPE", "MANAGED_BY", "REDACTED", "host_problem", "image_problem", "input_problems", "no_proxy_problem", "no_proxy_text",
           "proxy_problems", "proxy_url_problem", "pull_secret_problems", "registry_host_problem", "redact_url", "redact_urls",
           "secret_name_problem", "secret_owner_problem", "split_host_port", "userinfo_problem"]

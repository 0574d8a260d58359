"""Issue 21 (3, 6, 7, 8, 10): the gpu_operator's proxy, registry and pull-secret inputs, URL redaction."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import (
    input_problems, no_proxy_text, proxy_problems, pull_secret_problems, redact_url, redact_urls, secret_owner_problem)

PASSWORD = "pa55-W0rd"


@pytest.mark.parametrize("text,expected", [
    ("http://bob:%s@proxy:3128" % PASSWORD, "http://<redacted>@proxy:3128"),
    ("HTTPS_PROXY=https://bob:%s@proxy.example/ x" % PASSWORD, "HTTPS_PROXY=https://<redacted>@proxy.example/ x"),
    ("'http://u:p/a@ss@h:1' and 'http://h:2'", "'http://<redacted>@h:1' and 'http://h:2'"),
    ("http://proxy:3128", "http://proxy:3128"),
    ("mail bob@example.com", "mail bob@example.com"),
])
def test_redact_url(text, expected):
    assert redact_url(text) == expected


def test_redact_urls_walks_results_and_diffs():
    value = {"diff": [{"after": {"driver": {"env": [{"name": "HTTP_PROXY", "value": "http://u:%s@p:1" % PASSWORD}]}}}]}
    assert PASSWORD not in repr(redact_urls(value))
    assert redact_urls({"n": 1, "t": ("a",)}) == {"n": 1, "t": ["a"]}


@pytest.mark.parametrize("proxy,words", [
    ({"http_proxy": "htp://proxy:3128"}, "scheme must be http or https"),
    ({"https_proxy": "ftp://proxy:21"}, "scheme must be http or https"),
    ({"http_proxy": "proxy.example:3128"}, "has no scheme"),
    ({"http_proxy": "http://proxy.example:99999"}, "port '99999'"),
    ({"http_proxy": "http://proxy.example:0"}, "port '0'"),
    ({"http_proxy": "http://proxy:3128\nLD_PRELOAD=/tmp/x.so"}, "control character"),
    ({"http_proxy": "http://proxy:3128/path"}, "no path"),
    ({"http_proxy": "http://%s:3128" % ("a" * 64)}, "not a DNS name"),
    ({"http_proxy": "http://pro xy:3128"}, "control character"),
    ({"no_proxy": ".svc,\n10.0.0.0/8"}, "proxy.no_proxy"),
    ({"no_proxy": ".svc,,x"}, "proxy.no_proxy"),
    ({"no_proxy": {"a": 1}}, "proxy.no_proxy"),
])
def test_proxy_problems(proxy, words):
    problems = proxy_problems(proxy)
    assert len(problems) == 1 and words in problems[0], problems


def test_a_proxy_problem_never_repeats_the_password():
    problems = proxy_problems({"http_proxy": "htp://bob:%s@proxy:3128" % PASSWORD})
    assert problems and PASSWORD not in problems[0] and "<redacted>" in problems[0]


@pytest.mark.parametrize("proxy", [
    {"http_proxy": "http://proxy.example.com:3128", "https_proxy": "https://u:p@10.0.0.1:8443/",
     "no_proxy": ".svc,10.0.0.0/8,localhost,*.cluster.local,[::1]"},
    {"http_proxy": "http://[fd00::1]:3128", "no_proxy": [".svc", "10.0.0.0/8"]},
    {}, None,
])
def test_good_proxies(proxy):
    assert proxy_problems(proxy) == []


def test_no_proxy_list_is_joined():
    assert no_proxy_text([".svc", " 10.0.0.0/8"]) == ".svc,10.0.0.0/8"
    assert no_proxy_text(".svc") == ".svc"


@pytest.mark.parametrize("names,credentials,words", [
    ([""], None, "image_pull_secrets[0]"),
    (["Team_Cred"], None, "image_pull_secrets[0]"),
    (["a", "a"], None, "more than once"),
    ([], {"name": "c", "username": "ro:bot", "password": "x"}, "username"),
    ([], {"name": "c", "username": "robot", "password": ""}, "password"),
    ([], {"name": "c", "username": "", "password": "x"}, "username"),
    ([], {"name": "c", "username": "robot", "password": "a\nb"}, "password"),
    ([], {"name": "../c", "username": "robot", "password": "x"}, "registry_credentials.name"),
    ([], {"name": "c", "username": "robot", "password": "x", "server": "https://m"}, "server"),
])
def test_pull_secret_problems(names, credentials, words):
    problems = pull_secret_problems(names, credentials)
    assert problems and words in " ".join(problems), problems
    assert "a\nb" not in " ".join(problems)


@pytest.mark.parametrize("registry,words", [
    ("bob:%s@mirror.example:5000" % PASSWORD, "must not contain credentials"),
    ("mirror.example:99999", "port '99999'"),
    ("%s.example" % ("a" * 300), "not a DNS name"),
])
def test_registry_inputs(registry, words):
    problems = input_problems({"registry": registry})
    assert problems and words in problems[0] and PASSWORD not in problems[0]


def test_good_inputs():
    assert input_problems({"registry": "mirror.example:5000/gpu", "image_pull_secrets": ["a", "b.c"],
                           "registry_credentials": {"name": "c", "username": "robot", "password": "x y"[:1]},
                           "proxy": {"http_proxy": "http://p:3128"}}) == []


def _secret(labels=None, kind="kubernetes.io/dockerconfigjson"):
    return {"metadata": {"name": "regcred", "labels": labels or {}}, "type": kind}


def test_only_secrets_the_collection_created_are_written():
    assert secret_owner_problem(None, "ns", "regcred") is None
    assert secret_owner_problem(_secret({"app.kubernetes.io/managed-by": "gpufleet.sharing"}), "ns", "regcred") is None
    foreign = secret_owner_problem(_secret(), "ns", "regcred")
    assert "ns/regcred" in foreign and "not created by gpufleet.sharing" in foreign
    helm = secret_owner_problem(_secret({"owner": "helm"}, "helm.sh/release.v1"), "ns", "sh.helm.release.v1.x.v1")
    assert "not created by gpufleet.sharing" in helm
    retyped = secret_owner_problem(_secret({"app.kubernetes.io/managed-by": "gpufleet.sharing"}, "Opaque"), "ns", "r")
    assert "type Opaque" in retyped

"""gpu_operator reads the release's state from its Helm release records (issue 26): a no-op runs
neither `helm list` nor `helm get values`; without access to the records it asks helm as before.

The fake helm of test_gpu_operator.py keeps its release in a state file; here the scripted API also
serves that release as helm stores it (Secret sh.helm.release.v1.NAME.vN: base64 of gzip of JSON)."""

from __future__ import annotations

import base64
import gzip
import json

from test_gpu_operator import base, env, run  # noqa: F401  pylint: disable=unused-import

SECRETS = "/api/v1/namespaces/gpu-operator/secrets"


def record(entry, values, revision=None):
    name, version = entry["chart"].rsplit("-", 1)
    release = {"name": entry["name"], "namespace": entry["namespace"], "version": int(revision or entry["revision"]),
               "info": {"status": entry["status"], "last_deployed": "2026-12-02T04:00:00Z"},
               "chart": {"metadata": {"name": name, "version": version, "appVersion": entry["app_version"]}},
               "config": values}
    helm_data = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return {"metadata": {"name": "sh.helm.release.v1.%s.v%s" % (entry["name"], release["version"]),
                         "namespace": "gpu-operator",
                         "labels": {"owner": "helm", "name": entry["name"], "status": entry["status"],
                                    "version": str(release["version"])}},
            "type": "helm.sh/release.v1", "data": {"release": base64.b64encode(helm_data).decode()}}


def serve_records(env, extra=()):  # noqa: F811
    state = env.state()
    items = [record(state["release"], state["values"])] if state["release"] else []
    env.k8s.objects[SECRETS] = {"items": items + list(extra), "metadata": {}}


def helm_verbs(env, since=0):  # noqa: F811
    return [" ".join(call["argv"][:2]) for call in env.state()["calls"][since:]]


def test_noop_runs_no_helm_list_nor_get_values(env, capsys):  # noqa: F811
    run(base(env), capsys)
    serve_records(env)
    calls = len(env.state()["calls"])
    again = run(base(env), capsys)
    assert not again["changed"] and again["action"] == "unchanged", again
    assert again["release"]["revision"] == 1 and again["release"]["status"] == "deployed"
    verbs = helm_verbs(env, calls)
    assert not [verb for verb in verbs if verb.startswith("list") or verb.startswith("get values")], verbs


def test_values_changed_in_the_record_is_an_upgrade(env, capsys):  # noqa: F811
    run(base(env), capsys)
    state = env.state()
    # the latest revision (2) was installed with another strategy; revision 1 is superseded
    old = record(dict(state["release"], status="superseded"), state["values"], revision=1)
    newer = record(dict(state["release"], revision="2"), dict(state["values"], mig={"strategy": "single"}))
    env.k8s.objects[SECRETS] = {"items": [newer, old], "metadata": {}}
    result = run(base(env), capsys, check=True, diff=True)
    assert result["action"] == "upgraded" and result["release"]["revision"] == 2
    assert result["diff"]["before"]["values"]["mig"] == {"strategy": "single"}


def test_pending_record_is_refused_as_helm_list_would(env, capsys):  # noqa: F811
    run(base(env), capsys)
    state = env.state()
    env.k8s.objects[SECRETS] = {"items": [record(dict(state["release"], status="pending-upgrade"), state["values"])],
                                "metadata": {}}
    result = run(base(env), capsys)
    assert result["failed"] and "pending-upgrade" in result["msg"]


def test_without_records_helm_is_asked(env, capsys):  # noqa: F811
    run(base(env), capsys)  # the scripted API answers 404 for Secrets: helm list and get values, as before
    calls = len(env.state()["calls"])
    again = run(base(env), capsys)
    assert again["action"] == "unchanged"
    verbs = helm_verbs(env, calls)
    assert "list -n" in verbs and "get values" in verbs

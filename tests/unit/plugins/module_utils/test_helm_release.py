"""_helm_release: Helm's release records decoded in pure code (issue 26)."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm_release import (
    ReleaseRecordError, decode_release, release_from_records, release_selector)


def secret(name, revision, status, config=None, compress=True, release_type="helm.sh/release.v1", owner="helm"):
    body = json.dumps({"name": name, "namespace": "ns", "version": revision, "config": config,
                       "info": {"status": status, "last_deployed": "2026-12-02T04:00:00Z"},
                       "chart": {"metadata": {"name": "gpu-operator", "version": "v25.10.1", "appVersion": "v25.10.1"}}})
    raw = gzip.compress(body.encode()) if compress else body.encode()
    return {"metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, revision), "namespace": "ns",
                         "labels": {"owner": owner, "name": name, "status": status, "version": str(revision)}},
            "type": release_type, "data": {"release": base64.b64encode(base64.b64encode(raw)).decode()}}


def test_latest_revision_as_helm_list_prints_it():
    entry, values = release_from_records([secret("op", 1, "superseded", {"a": 1}), secret("op", 2, "deployed", {"a": 2})],
                                         "op", "ns")
    assert entry == {"name": "op", "namespace": "ns", "revision": "2", "updated": "2026-12-02T04:00:00Z",
                     "status": "deployed", "chart": "gpu-operator-v25.10.1", "app_version": "v25.10.1"}
    assert values == {"a": 2}


def test_uncompressed_record_and_null_config():
    entry, values = release_from_records([secret("op", 3, "failed", None, compress=False)], "op", "ns")
    assert entry["status"] == "failed" and values == {}


@pytest.mark.parametrize("status", ["uninstalling", "uninstalled", "superseded", "unknown"])
def test_latest_not_listed_states_mean_no_release(status):
    # helm list keeps the latest revision first, then filters by state: an older deployed one is not shown
    assert release_from_records([secret("op", 1, "deployed"), secret("op", 2, status)], "op", "ns")[0] is None


def test_other_releases_and_foreign_secrets_are_ignored():
    records = [secret("other", 9, "deployed"), secret("op", 8, "deployed", release_type="Opaque"),
               secret("op", 7, "deployed", owner="someone"), secret("op", 1, "deployed", {"x": 1})]
    entry, values = release_from_records(records, "op", "ns")
    assert entry["revision"] == "1" and values == {"x": 1}
    assert release_from_records([], "op", "ns") == (None, {})
    assert release_selector("op") == "owner=helm,name=op"


def test_undecodable_record_is_an_error():
    broken = secret("op", 1, "deployed")
    broken["data"]["release"] = base64.b64encode(b"not base64 of gzip!").decode()
    with pytest.raises(ReleaseRecordError):
        release_from_records([broken], "op", "ns")
    with pytest.raises(ReleaseRecordError):
        decode_release(base64.b64encode(base64.b64encode(b"[1, 2]")).decode())

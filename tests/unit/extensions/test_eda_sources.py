"""The pure parts of the EDA event sources (extensions/eda/plugins/event_source, issue 37): which node
changes become events, which alerts name which node, which requests are accepted. ansible-rulebook
loads a source by its path, so the tests load the files the same way."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(REPO, "extensions", "eda", "plugins", "event_source")


def load(name):
    spec = importlib.util.spec_from_file_location("eda_" + name, os.path.join(SOURCES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nodes = load("gpu_nodes")
alerts = load("alertmanager")


def node(name="gpu-a", gpu=True, state=None, annotations=None):
    values = {"nvidia.com/gpu.present": "true"} if gpu else {}
    if state:
        values["nvidia.com/mig.config.state"] = state
    return nodes.node_view({"metadata": {"name": name, "labels": values, "annotations": annotations or {}}})


def kinds(found):
    return [(event["gpufleet"]["kind"], event["meta"]["hosts"]) for event in found]


def test_a_node_that_becomes_a_gpu_node_joins_once():
    assert kinds(nodes.changes(None, node())) == [("node_joined", ["gpu-a"])]
    assert kinds(nodes.changes(node(gpu=False), node())) == [("node_joined", ["gpu-a"])]
    assert nodes.changes(node(), node()) == []
    assert nodes.changes(None, node(gpu=False)) == []
    assert nodes.changes(node(), None) == []


def test_a_failed_mig_state_is_reported_when_it_becomes_failed():
    assert kinds(nodes.changes(node(state="success"), node(state="failed"))) == [("mig_failed", ["gpu-a"])]
    assert nodes.changes(node(state="failed"), node(state="failed")) == []
    assert nodes.changes(node(state="failed"), node(state="success")) == []
    # A node that joins already failed: both.
    assert kinds(nodes.changes(None, node(state="failed"))) == [("node_joined", ["gpu-a"]), ("mig_failed", ["gpu-a"])]


def test_a_watched_label_changed_outside_a_rollout_is_drift():
    before = nodes.node_view({"metadata": {"name": "gpu-a", "labels": {
        "nvidia.com/gpu.present": "true", "nvidia.com/device-plugin.config": "ts"}}})
    after = nodes.node_view({"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.present": "true"}}})
    found = nodes.changes(before, after)
    assert kinds(found) == [("labels_changed", ["gpu-a"])]
    assert found[0]["gpufleet"]["before"]["nvidia.com/device-plugin.config"] == "ts"
    during = dict(after, rollout="in progress: MIG config x (run r)")
    assert nodes.changes(before, during) == []
    other = nodes.node_view({"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.present": "true", "team": "x"}}})
    assert nodes.changes(after, other) == []  # a label nobody plans


def test_a_node_whose_name_is_no_node_name_makes_no_event():
    assert nodes.changes(None, node(name="all,flt-0")) == []
    assert nodes.changes(None, node(name="")) == []


def test_the_baseline_reports_only_failed_nodes_and_a_relist_only_changes():
    views = {"a": node("a", state="failed"), "b": node("b")}
    assert kinds(nodes.baseline_events(views, True)) == [("mig_failed", ["a"])]
    assert nodes.baseline_events(views, False) == []
    later = dict(views, c=node("c"), b=node("b", state="failed"))
    assert kinds(nodes.relist_events(views, later)) == [("mig_failed", ["b"]), ("node_joined", ["c"])]


class FakeApi:
    """A CoreV1Api stand-in for the list only (the watch is the lab test's)."""

    class api_client:  # pylint: disable=invalid-name
        @staticmethod
        def sanitize_for_serialization(item):
            return item

    def __init__(self, items):
        self.items = items

    def list_node(self, label_selector=""):
        listed = type("List", (), {})()
        listed.items = self.items
        listed.metadata = type("Meta", (), {"resource_version": "7"})()
        return listed


def test_the_watcher_lists_then_compares_with_what_it_knew():
    seen = []
    first = [{"metadata": {"name": "a", "labels": {"nvidia.com/gpu.present": "true"}}}]
    watcher = nodes.NodeWatcher(FakeApi(first), {}, seen.append)
    assert watcher._list() == "7" and seen == []  # pylint: disable=protected-access
    watcher.api = FakeApi(first + [{"metadata": {"name": "b", "labels": {"nvidia.com/gpu.present": "true"}}}])
    watcher._list()  # pylint: disable=protected-access
    assert kinds(seen) == [("node_joined", ["b"])]


@pytest.mark.parametrize("labels, wanted", [
    ({"node": "flt-0", "Hostname": "other"}, "flt-0"),
    ({"Hostname": "gpu-7.example.com"}, "gpu-7.example.com"),
    ({"instance": "gpu-7:9400"}, "gpu-7"),
    ({"instance": "10.0.0.7:9400"}, "10.0.0.7"),
    ({"Hostname": "all"}, None),
    ({"Hostname": "flt-*"}, None),
    ({"Hostname": "flt-0,flt-1"}, None),
    ({"node": "", "Hostname": "flt-1"}, "flt-1"),
    ({}, None),
])
def test_the_node_of_an_alert(labels, wanted):
    assert alerts.alert_node(labels, list(alerts.DEFAULT_HOST_LABELS)) == wanted


def test_one_event_per_firing_alert_and_meta_hosts_only_with_a_node():
    payload = {"alerts": [{"status": "firing", "labels": {"alertname": "GPUXidError", "Hostname": "flt-0"}},
                          {"status": "resolved", "labels": {"alertname": "GPUXidError", "Hostname": "flt-1"}},
                          {"status": "firing", "labels": {"alertname": "GPUXidError", "Hostname": "*"}},
                          "not an alert"]}
    found = alerts.alert_events(payload, "hook", ["Hostname"], include_resolved=False)
    assert [event["meta"].get("hosts") for event in found] == [["flt-0"], None]
    assert found[0]["gpufleet"] == {"kind": "alert", "node": "flt-0"} and found[0]["meta"]["endpoint"] == "hook"
    assert len(alerts.alert_events(payload, "", ["Hostname"], include_resolved=True)) == 3
    assert alerts.alert_events({"no": "alerts"}, "", ["Hostname"], False) == []
    assert alerts.alert_events([1, 2], "", ["Hostname"], False) == []


def test_requests_need_post_json_and_the_token():
    body = json.dumps({"alerts": []}).encode()
    assert alerts.check_request("GET", {}, b"", "") == (405, "POST only")
    assert alerts.check_request("POST", {}, body, "s3cret")[0] == 401
    assert alerts.check_request("POST", {"authorization": "Bearer wrong"}, body, "s3cret")[0] == 401
    assert alerts.check_request("POST", {"authorization": "Bearer s3cret"}, body, "s3cret") == (202, {"alerts": []})
    assert alerts.check_request("POST", {}, b"{not json", "")[0] == 400


def test_the_webhook_serves_alerts_over_http():
    async def scenario():
        queue = asyncio.Queue()
        server = await asyncio.start_server(alerts._handler(queue, {"token": "t"}), "127.0.0.1", 0)  # pylint: disable=protected-access
        port = server.sockets[0].getsockname()[1]
        body = json.dumps({"alerts": [{"status": "firing", "labels": {"alertname": "X", "node": "n1"}}]}).encode()
        replies = []
        for token in ("wrong", "t"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /am HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                         % (token.encode(), len(body)) + body)
            await writer.drain()
            replies.append((await reader.read()).split(b"\r\n", 1)[0])
            writer.close()
        server.close()
        return replies, [queue.get_nowait() for _index in range(queue.qsize())]

    replies, events = asyncio.run(scenario())
    assert replies == [b"HTTP/1.1 401 Error", b"HTTP/1.1 202 OK"]
    assert [(e["alert"]["labels"]["alertname"], e["meta"]["hosts"], e["meta"]["endpoint"]) for e in events] == [("X", ["n1"], "am")]

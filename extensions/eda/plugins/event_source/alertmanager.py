"""alertmanager: an ansible-rulebook event source that receives Prometheus Alertmanager's webhook.

Written for gpufleet.sharing (issue 37) because ansible.eda (whose ``alertmanager`` source AWX users
usually wire: ansible/event-driven-ansible, ``extensions/eda/plugins/event_source/alertmanager.py``)
is published on Galaxy only, not on PyPI. Its events have the same shape (``alert`` and
``meta.hosts``), so a rulebook written for one works with the other. The payload is Alertmanager's
webhook format (prometheus/alertmanager, ``docs/configuration.md``, ``<webhook_config>``: a JSON body
with ``alerts``, each with ``status``, ``labels``, ``annotations``).

Differences, on purpose: the node comes from the first of several labels (``node``, then
``Hostname`` as dcgm-exporter names the node, then ``instance`` without its port), and is dropped
unless it is a valid Kubernetes node name, since it becomes a ``--limit``; resolved alerts are
not passed on unless asked; a bearer token can be required (Alertmanager's ``http_config.authorization``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from typing import Any, Dict, List, Optional, Tuple

DOCUMENTATION = r"""
---
short_description: Receive alerts from Prometheus Alertmanager's webhook.
description:
  - Listens for HTTP POSTs of Alertmanager's webhook payload on any path and puts one event per alert
    on the queue, C({"alert": <the alert>, "meta": {"hosts": [<node>], "endpoint": <path>}}).
options:
  host:
    description: Address to listen on.
    type: str
    default: 127.0.0.1
  port:
    description: TCP port to listen on.
    type: int
    default: 5000
  token:
    description: When set, a POST must carry C(Authorization: Bearer <token>); others get 401.
    type: str
    default: ""
  host_labels:
    description: The alert labels that name the node, first present wins.
    type: list
    elements: str
    default: [node, Hostname, instance]
  include_resolved:
    description: Also pass on alerts whose status is C(resolved).
    type: bool
    default: false
"""

EXAMPLES = r"""
- gpufleet.sharing.alertmanager:
    host: 0.0.0.0
    port: 5000
    token: "{{ alertmanager_token }}"
"""

NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Inventory patterns that are valid node names but would widen a --limit.
PATTERN_WORDS = frozenset(("all", "ungrouped", "localhost"))
DEFAULT_HOST_LABELS = ("node", "Hostname", "instance")
MAX_BODY = 1024 * 1024
LOG = logging.getLogger(__name__)


def alert_node(labels: Dict[str, Any], host_labels: List[str]) -> Optional[str]:
    """The node an alert is about: the first of ``host_labels`` present, without a port, when it is a node name."""
    for key in host_labels:
        value = labels.get(key)
        if isinstance(value, str) and value:
            name = value.rsplit(":", 1)[0] if re.search(r":\d+$", value) else value
            if NODE_NAME.match(name) and name not in PATTERN_WORDS and len(name) <= 253:
                return name
            return None
    return None


def alert_events(payload: Any, endpoint: str, host_labels: List[str], include_resolved: bool) -> List[Dict[str, Any]]:
    """One event per alert of a webhook payload (nothing for a payload that is not Alertmanager's)."""
    alerts = payload.get("alerts") if isinstance(payload, dict) else None
    events = []
    for alert in alerts if isinstance(alerts, list) else []:
        if not isinstance(alert, dict) or not isinstance(alert.get("labels"), dict):
            continue
        if alert.get("status") != "firing" and not include_resolved:
            continue
        node = alert_node(alert["labels"], host_labels)
        meta: Dict[str, Any] = {"endpoint": endpoint}
        if node:  # without one, no meta.hosts: the rules ask for it (an empty limit would be every host)
            meta["hosts"] = [node]
        events.append({"alert": alert, "gpufleet": {"kind": "alert", "node": node}, "meta": meta})
    return events


def check_request(method: str, headers: Dict[str, str], body: bytes, token: str) -> Tuple[int, Any]:
    """(HTTP status, the parsed payload or a message) of one request."""
    if method != "POST":
        return 405, "POST only"
    if token:
        given = headers.get("authorization", "")
        if not hmac.compare_digest(given.encode("utf-8"), ("Bearer " + token).encode("utf-8")):
            return 401, "unauthorized"
    try:
        return 202, json.loads(body.decode("utf-8"))
    except ValueError:
        return 400, "the body is not JSON"


async def _read_request(reader: asyncio.StreamReader) -> Tuple[str, str, Dict[str, str], bytes]:
    request_line = (await reader.readline()).decode("latin-1").split()
    headers: Dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1")
        if line in ("\r\n", "\n", ""):
            break
        key, _sep, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = min(int(headers.get("content-length") or 0), MAX_BODY)
    body = await reader.readexactly(length) if length else b""
    method, path = (request_line + ["", ""])[:2]
    return method, path, headers, body


def _handler(queue: asyncio.Queue, args: Dict[str, Any]) -> Any:
    host_labels = [str(label) for label in (args.get("host_labels") or DEFAULT_HOST_LABELS)]
    token, include_resolved = str(args.get("token") or ""), bool(args.get("include_resolved", False))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, headers, body = await _read_request(reader)
            status, payload = check_request(method, headers, body, token)
            if status == 202:
                for event in alert_events(payload, path.lstrip("/"), host_labels, include_resolved):
                    await queue.put(event)
                payload = "received"
            reply = str(payload).encode("utf-8")
            writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % (status, b"OK" if status == 202 else b"Error", len(reply)) + reply)
            await writer.drain()
        except (ValueError, asyncio.IncompleteReadError, ConnectionError) as exc:
            LOG.warning("alertmanager: a bad request: %s", exc)
        finally:
            writer.close()

    return handle


async def main(queue: asyncio.Queue, args: Dict[str, Any]) -> None:
    """Serve the webhook until cancelled."""
    server = await asyncio.start_server(_handler(queue, args), str(args.get("host") or "127.0.0.1"),
                                        int(args.get("port") or 5000))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":

    class PrintQueue(asyncio.Queue):
        """Prints the events instead (a manual check with curl)."""

        async def put(self, item: Any) -> None:
            print(item)

    asyncio.run(main(PrintQueue(), {}))

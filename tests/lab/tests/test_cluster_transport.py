"""The lab's API server on the wire: what a client waits for beyond the server's own work.

kube-apiserver is a Go ``net/http`` server. Go turns Nagle's algorithm off on every TCP connection
it makes or accepts (Go's standard library, ``src/net/tcpsock.go``: ``newTCPConn`` calls
``setNoDelay(fd, true)``; the doc of ``TCPConn.SetNoDelay``: "The default is true (no delay)").
A Python ``http.server`` keeps Nagle on unless asked: it sends the headers of a response and then
its body, and the body waits for the client's delayed acknowledgement of the headers, about 40 ms
on Linux, on every request. The lab measured that as part of every cluster step
(docs/benchmarks.md, "Sixth pass"); these tests keep the lab's connections as a real API server's.
"""

from __future__ import annotations

import socket
from typing import Any, List, Type

from kubernetes import client, config, watch

from gpulab.cluster import server

HOSTS = [{"name": "gpu-a", "state_file": "/nonexistent/gpu-a.json"}]


def _probe(handler: Type[Any], seen: List[int]) -> Type[Any]:
    """The server's handler class, recording TCP_NODELAY of each connection it serves."""

    class Probe(handler):  # type: ignore[misc,valid-type]
        def handle(self) -> None:
            seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            super().handle()

    return Probe


def test_every_connection_the_api_server_accepts_sends_without_nagles_delay(tmp_path):
    running = server.serve_in_thread(str(tmp_path), HOSTS)
    try:
        seen: List[int] = []
        running.httpd.RequestHandlerClass = _probe(running.httpd.RequestHandlerClass, seen)
        core = client.CoreV1Api(config.new_client_from_config(config_file=running.kubeconfig))
        core.list_node()
        core.read_node("gpu-a")
        # A watch, whose events are sent as they happen (chunks of one response).
        for _event in watch.Watch().stream(core.list_node, timeout_seconds=1):
            break
        assert seen, "no connection was served"
        assert all(seen), "connections served with Nagle's algorithm on: %s" % seen
    finally:
        running.stop()

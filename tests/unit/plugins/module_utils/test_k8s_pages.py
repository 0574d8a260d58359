"""K8sClient's list page size: one setting of the client (issue 26 item 3, docs/benchmarks.md
"Fleet scale at 5,000 nodes"): every list asks for pages of ``page_size`` items and follows the
server's ``continue`` token, so a list of N objects costs ceil(N / page_size) requests."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _k8s
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient


class PagingServer:
    """A node collection served as the API server pages it: at most ``limit`` items per response,
    and a ``continue`` token (here the next index) while items remain."""

    def __init__(self, count):
        self.names = ["gpu-%04d" % i for i in range(count)]
        self.limits = []

    def request(self, method, path, body=None, **kwargs):
        assert (method, path, body) == ("GET", "/api/v1/nodes", None)
        query = dict(kwargs.get("query_params") or [])
        limit = int(query["limit"])
        self.limits.append(limit)
        start = int(query.get("continue") or 0)
        end = min(start + limit, len(self.names))
        page = {"items": [{"metadata": {"name": n}} for n in self.names[start:end]],
                "metadata": {"continue": str(end) if end < len(self.names) else ""}}
        return type("Response", (), {"data": json.dumps(page).encode()})()


@pytest.mark.parametrize("count, page_size, requests", [
    (1253, None, 3), (5000, None, 10), (500, None, 1), (501, None, 2), (0, None, 1), (5000, 1000, 5), (5000, 5000, 1)])
def test_a_list_costs_one_request_per_page(count, page_size, requests):
    server = PagingServer(count)
    client = K8sClient(server) if page_size is None else K8sClient(server, page_size=page_size)
    items = client.list("Node")
    assert [i["metadata"]["name"] for i in items] == server.names
    assert client.request_count == requests and len(server.limits) == requests
    assert set(server.limits) == {page_size or _k8s.LIST_PAGE_SIZE}


def test_the_default_page_is_the_api_servers_own_example_and_kubectls_default():
    assert _k8s.LIST_PAGE_SIZE == 500 and K8sClient(PagingServer(0)).page_size == 500


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "500"])
def test_a_page_size_that_is_not_a_positive_integer_is_refused(bad):
    with pytest.raises(ValueError, match="page_size must be a positive integer"):
        K8sClient(PagingServer(0), page_size=bad)

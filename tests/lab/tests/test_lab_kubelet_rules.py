"""Issue 21: the lab's kubelet refuses what the real kubelet refuses, and registers its Node as it does.

- An image reference the kubelet cannot parse leaves the container waiting with reason ``InvalidImageName``
  (kubernetes pkg/kubelet/images/image_manager.go, ``EnsureImageExists`` -> ``applyDefaultImageTag`` ->
  ``ErrInvalidImageName`` of pkg/kubelet/images/types.go; the grammar is distribution/reference's).
- A deleted Node object is registered again when the host's kubelet starts (a reboot, ``systemctl restart
  kubelet``), not while it runs: ``registerWithAPIServer`` (pkg/kubelet/kubelet_node_status.go) returns at
  once once ``registrationCompleted`` is set (kubernetes/kubernetes#71398, #115761; PR #123535 was not merged).
"""

from __future__ import annotations

import time

import pytest

from gpulab import gpustate, shims
from labtools import serve_lab, wait_until

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server, state_files = serve_lab(str(tmp_path_factory.mktemp("kubelet-rules")), [("node-a", "A100-40GB", 1)])
    try:
        yield server, state_files["node-a"]
    finally:
        server.stop()


def _pod(name: str, image: str):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "node-a", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": image}]}}


def _waiting(store, name):
    statuses = (store.get("v1/pods", "default", name).get("status") or {}).get("containerStatuses") or []
    return [(s.get("state") or {}).get("waiting") or {} for s in statuses]


@pytest.mark.parametrize("image", ["Busybox:1.36", "busybox:", "nvcr.io//cuda", "busybox@sha256:xyz", "-busybox",
                                   "busybox:" + "t" * 129, "nvcr.io/nvidia/CUDA:12.4.1", "a" * 64])
def test_an_image_the_kubelet_cannot_parse_waits_with_invalid_image_name(lab, image):
    server, _state = lab
    name = "bad-%d" % (abs(hash(image)) % 100000)
    server.store.create("v1/pods", _pod(name, image))
    waiting = wait_until("InvalidImageName on %s" % name,
                         lambda: [w for w in _waiting(server.store, name) if w.get("reason") == "InvalidImageName"])
    assert ('Failed to apply default image tag "%s"' % image) in waiting[0]["message"]
    assert server.store.get("v1/pods", "default", name)["status"]["phase"] == "Pending"


@pytest.mark.parametrize("image", ["busybox", "busybox:1.36", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                   "localhost:5000/team/app@" + DIGEST, "registry.example:443/a/b:v1@" + DIGEST,
                                   "docker.io/library/python:3.12-slim"])
def test_a_valid_image_runs(lab, image):
    server, _state = lab
    name = "good-%d" % (abs(hash(image)) % 100000)
    server.store.create("v1/pods", _pod(name, image))
    wait_until("%s to finish" % name,
               lambda: server.store.get("v1/pods", "default", name)["status"].get("phase") in ("Running", "Succeeded"))


def _node(server):
    try:
        return server.store.get("v1/nodes", None, "node-a")
    except Exception:  # pylint: disable=broad-except
        return None


def test_a_deleted_node_is_registered_again_when_its_kubelet_starts(lab):
    server, state = lab
    store = server.store
    patch = {"metadata": {"annotations": {"team.example/owner": "x"}}, "spec": {"unschedulable": True}}
    store.patch("v1/nodes", None, "node-a", patch, "merge")
    for restart in (lambda: shims.systemctl_main(["restart", "kubelet"], state), lambda: gpustate.reboot(state)):
        store.delete("v1/nodes", None, "node-a")
        wait_until("node-a deleted", lambda: _node(server) is None)
        time.sleep(1.5)  # a running kubelet does not register again (registrationCompleted)
        assert _node(server) is None
        restart()
        node = wait_until("node-a registered again", lambda: _node(server))
        assert not node["spec"].get("unschedulable") and "team.example/owner" not in node["metadata"].get("annotations", {})
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "node-a"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["status"]

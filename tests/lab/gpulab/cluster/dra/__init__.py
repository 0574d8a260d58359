"""Dynamic Resource Allocation in the lab cluster (``resource.k8s.io/v1``, Kubernetes 1.34+).

* ``api.py``: the four served types, the simulated Kubernetes version (``GPULAB_KUBERNETES_VERSION``);
* ``validation.py``: defaults and 422 validation of DeviceClass, ResourceSlice, ResourceClaim,
  ResourceClaimTemplate (written from kubernetes ``pkg/apis/resource/validation/validation.go``);
* ``cel.py``: CEL selectors evaluated with cel-python (``celpy``, pinned in requirements-dev.txt);
* ``slices.py``: the ResourceSlices NVIDIA's GPU kubelet plugin publishes for a host's GPU state;
* ``plugin.py``: the kubelet plugin container (snapshot at start, refuses beside the device plugin);
* ``allocator.py``: the structured-parameters allocator (pure);
* ``claims.py``: claims from templates, scheduling, deallocation, kubelet preparation.

See tests/lab/CLUSTER.md, "Dynamic Resource Allocation".
"""

"""The lab's virtual Kubernetes cluster (a test instrument, not the product).

- ``server``: the HTTPS server, kubeconfig, startup; ``api``: REST routing on top of the store
  (with ``discovery``, ``tables``, ``watch``, ``protobuf``).
- ``store``: thread-safe in-memory object store with Kubernetes semantics (the contract for
  controllers is at the top of store.py and in tests/lab/ARCHITECTURE.md),
  built from ``objecttable``, ``admission``, ``deletion``, ``disruption``, ``crds``, ``ownership``,
  ``podlogs``, ``errors``, ``objects``; ``selectors``, ``patch``, ``schema``.
- ``manager``: the controller manager (the ordered list of controllers started by the server):
  ``scheduler``, ``kubelet`` (``allocation``, ``containers``, ``podstatus``, ``gpuprocesses``),
  ``nodelifecycle``, ``daemonsets`` and the GPU Operator in ``operator/``; ``devices`` and
  ``pluginconfig`` are its pure model of a GPU node.
- ``faults``: fault injection registry (``faults.active(name)`` for controllers).

The module layout is in tests/lab/CLUSTER.md.
"""

"""The lab's virtual Kubernetes cluster (a test instrument, not the product).

- ``store``: thread-safe in-memory object store with Kubernetes semantics (the contract for
  controllers is at the top of store.py and in docs/architecture.md, "Virtual cluster store").
- ``api``: the REST routing on top of the store; ``server``: the HTTP server, kubeconfig, startup.
- ``selectors``, ``patch``: label/field selectors and the PATCH formats.
- ``faults``: fault injection registry (``faults.active(name)`` for controllers).
- ``operator``, ``scheduler``, ``kubelet`` (another helper): controllers started by the server.
"""

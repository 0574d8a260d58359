"""The lab's NVIDIA GPU Operator (a test instrument, not the product), one module per controller.

It behaves like the real operator where the collection can observe it (docs/reference/specs.md §7-§10), reading the
same GPU state files as the lab's SSH hosts:

- ``clusterpolicy``: the ClusterPolicy controller (node labels, operand DaemonSets, status);
- ``deviceplugin``: the device plugin's node capacity/allocatable and the devices it publishes
  to the kubelet;
- ``gfd``: GPU Feature Discovery's node labels;
- ``migmanager``: the MIG manager following ``nvidia.com/mig.config``;
- ``programs``: what the operand containers do when the kubelet starts them (config loading);
- ``context``: what they share (store, GPU state, namespace, running plugin instances);
- ``common``: names, the operand table, ClusterPolicy spec helpers; ``migconfig``: the default
  mig-parted ConfigMap.

The DaemonSets' pods come from the generic DaemonSet controller (``gpulab.cluster.daemonsets``);
all controllers are started and run in order by ``gpulab.cluster.manager``.
"""

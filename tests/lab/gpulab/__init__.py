"""The GPU lab: a test instrument that simulates NVIDIA GPU hosts (not the product).

Simulator modules: ``gpustate`` (state file), ``models`` (GPU fixtures), ``driver`` (simulated
driver/NVML semantics), ``smi`` (nvidia-smi), ``migparted`` (nvidia-mig-parted), ``shims``
(reboot/shutdown/systemctl), ``workload`` (fake compute processes). See tests/lab/README.md.
"""

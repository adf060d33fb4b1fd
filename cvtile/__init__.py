"""cvtile: write, check and understand Ascend NPU attention kernels on a CPU."""

__version__ = "0.1.0"

"""cvtile.kernels"""

"""cvtile.sim"""

"""cvtile.dsl"""

"""Untrusted input's limits (layer 1): the bounds of every value a configuration sets, and reading a file whole
with its size bounded before a byte is read.
"""

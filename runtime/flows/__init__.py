"""Flows (layer 8): graphs of nodes and the scheduler that runs them, and the scheduler's rules (sans I/O) that
the in-process and the Temporal engines share.
"""

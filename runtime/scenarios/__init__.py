"""Running a scenario file (a product): the flow built from a scenario, the tools a scenario may name, and the
default model that answers a node with no script.
"""

"""Running a scenario file (a product): the flow built from a scenario, the tools a scenario may name, and the
registry and simulator that answer a node with no script by the default model (:mod:`runtime.scripted.default_model`).
"""

"""Model facts (layer 2): the pricing table (per-model prices by prompt-length tier, what a call cost) and the
model table (each model's context window and output limit), both data shipped in ``runtime/data``.
"""

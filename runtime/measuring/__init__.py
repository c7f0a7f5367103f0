"""Measuring a request (layer 3): the offline o200k_base tokenizer, the incremental counter with its junction
corrections, prefix and splice measuring, image counting, and the provider's scale (calibration and the
per-model calibration book).
"""

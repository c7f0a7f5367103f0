"""The ceiling decision (layer 4, pure): parsing and resolving ``max_input_tokens``, deciding what a request does
against it (pass, notice, fold, refuse), and the bounds every send meets (the model's window, the notice).
"""

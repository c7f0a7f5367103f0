"""The simulator's second face: ``POST /v1/chat/completions``, OpenAI's chat-completions API.

The same server, the same policies (the default model and scripts answer a
chat request translated to the Messages shape, :mod:`runtime.sim.chat.wire`),
its own prompt cache (automatic prefix caching over simulated machines,
:mod:`runtime.sim.chat.cache`) and OpenAI's error envelope
(:mod:`runtime.sim.chat.face`).
"""

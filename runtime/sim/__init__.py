"""The simulated Anthropic server: the Messages API and its prompt-caching rules on loopback.

Modules: ``server`` (serve_simulator, serve_forever, SimConfig), ``app``
(routes, auth, faults, who answers), ``http`` (h11 over anyio, with limits),
``connections`` (the connection cap, the accept loop), ``streaming`` (the
server-sent event encoder), ``generation`` (max_tokens and stop_sequences),
``conversations`` (scripts that advance per conversation), ``prepare``
(JSON decoding with a depth bound, validation and layout), ``validation``,
``layout`` and ``cache_engine`` (the pure caching rules), ``tokens`` (its own
token count), ``models`` (the models served and their facts), ``faults``,
``clock`` (a manual clock for virtual time), ``admin`` (the clock routes),
``command`` (``foldline sim``), ``errors``.
"""

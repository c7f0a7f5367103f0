"""The simulated Anthropic server: the Messages API and its prompt-caching rules on loopback.

Modules: ``server`` (serve_simulator, serve_forever, SimConfig), ``app``
(routes, auth, faults, the scripted model), ``http`` (h11 over anyio),
``validation``, ``layout`` and ``cache_engine`` (the pure caching rules),
``tokens`` (its own token count), ``models`` (per-model facts), ``faults``,
``clock`` (a manual clock for virtual time), ``errors``.
"""

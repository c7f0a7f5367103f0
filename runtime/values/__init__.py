"""The values a conversation is made of (layer 1, with ``signals``): frozen messages and their ids, canonical JSON
and its digests, a request's labelled pieces, common prefixes, images and the wire's image rule, the thinking
rule, token usage, the JSON Schema subset tools and structured outputs use (checking, validating, an example
value), the scrubbing of secrets from text that leaves the process, and the one ``__getattr__`` the
lazy packages share (:mod:`runtime.values.exports`: a name's module loads when the name is first read).
"""

"""The values a conversation is made of (layer 1, with ``signals``): frozen messages and their ids, canonical JSON
and its digests, a request's labelled pieces, common prefixes, images and the wire's image rule, the thinking
rule, token usage, and the scrubbing of secrets from text that leaves the process.
"""

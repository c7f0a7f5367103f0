"""The provider contract (layer 6): what the actors ask of a provider (the :class:`Provider` protocol, replies,
attempt errors), the retry rules and reply progress. The providers themselves are products.
"""

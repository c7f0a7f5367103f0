"""The rule for giving a reply's thinking back (pure).

The API verifies each ``thinking`` / ``redacted_thinking`` block it is given
back against what came before it in the conversation when the block was
made. So a reply records the digest of the conversation before it in the
request that produced it (:attr:`~runtime.values.messages.AssistantResponse.context`),
and a later request carries the reply's blocks only while the conversation
before the reply still has that digest. A fold or any rewrite of an earlier
message changes the digest: a reply made before the change goes back without
its blocks, and a reply made after it (whose conversation already had the
change) keeps them.

The digest is a chain over the rendered messages (role and each block's
canonical JSON, cache marks excluded), so a compile extends it message by
message and a conversation without thinking never computes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.values.canonical import sha256_hex

CONTEXT_SEED = sha256_hex("foldline thinking context v1")
"""The digest of an empty conversation."""


def extend_context(chain: str, role: str, blocks: Sequence[str]) -> str:
    """The chain digest after one more rendered message (``blocks``: canonical JSON, no marks)."""
    return sha256_hex(chain + "\x00" + role + "\x00" + "\x1e".join(blocks))


def context_digest(messages: Iterable[tuple[str, Sequence[str]]]) -> str:
    """The chain digest of a whole conversation, given as (role, block JSON texts) pairs."""
    chain = CONTEXT_SEED
    for role, blocks in messages:
        chain = extend_context(chain, role, blocks)
    return chain

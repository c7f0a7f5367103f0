"""Automatic prefix caching, as OpenAI documents it for chat completions (pure: ``now`` is an argument).

The documented rules (OpenAI's prompt-caching guide): caching is automatic
for prompts of 1,024 tokens or more; a hit needs an exact prefix match; hits
come in increments of 128 tokens (1,024, 1,152, ...); the tokens read are
reported as ``usage.prompt_tokens_details.cached_tokens``; requests are
routed to a machine by a hash of the prompt's start, and ``prompt_cache_key``
is combined with that hash so that requests sharing a key reach the same
machine; a cache lives for minutes of inactivity.

The simulator's model of it, deterministic so that tests can state exact
figures:

- A prompt is its segments (:mod:`runtime.sim.chat.wire`: the tools, then
  one per message), each counted in the simulator's tokens; a prefix matches
  whole segments (the first differing segment ends the match).
- There are :data:`DEFAULT_MACHINES` machines per (API key, model), each with
  a cache of its own. A request with a cache key (``prompt_cache_key``, or an
  ``X-Session-Id`` header when the body has none) goes to the machine
  ``sha256(key) mod N``. A request without one goes round-robin: the n-th
  unkeyed request of that (API key, model) goes to machine ``n mod N``
  (what a shared prompt start looks like when the load spreads it over
  replicas, seed 003's observation: partial hits of older requests).
- Read: the longest matched prefix on that machine, rounded down to a
  multiple of 128; nothing below 1,024 or when the prompt is under 1,024.
- Write: a prompt of 1,024 tokens or more leaves its segment boundaries on
  its machine, readable once its response begins; an entry lives
  :data:`TTL_SECONDS` from its last write or read.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runtime.values.canonical import sha256_hex

MIN_CACHED_TOKENS = 1_024
INCREMENT = 128
DEFAULT_MACHINES = 4
TTL_SECONDS = 300.0
MAX_ENTRIES_PER_MACHINE = 200_000


@attrs.frozen
class ChatCacheOutcome:
    """What one request read: its machine, the prompt's tokens and the cached ones."""

    machine: int
    keyed: bool
    prompt_tokens: int
    cached_tokens: int
    matched_tokens: int
    """The longest prefix the machine held (before rounding down to 128)."""


@attrs.frozen
class _Entry:
    tokens: int
    readable_at: float
    expires_at: float


def prefix_digests(segments: Sequence[str]) -> tuple[str, ...]:
    """The chain digest after each segment (the key of the prefix that ends there)."""
    chain = sha256_hex("foldline-sim-chat-prefix-v1")
    out = []
    for segment in segments:
        chain = sha256_hex(chain + "\x00" + segment)
        out.append(chain)
    return tuple(out)


@attrs.define(eq=False)
class ChatPrefixCache:
    """The machines' caches and the routing rule (see the module docstring)."""

    machines: int = DEFAULT_MACHINES
    _stores: dict[tuple[str, str, int], dict[str, _Entry]] = attrs.field(factory=dict, init=False)
    _unkeyed: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)

    def route(self, scope: str, model: str, cache_key: str | None) -> int:
        """The machine a request goes to (advances the round-robin for an unkeyed one)."""
        if cache_key is not None:
            return int(sha256_hex(f"route:{scope}:{model}:{cache_key}")[:12], 16) % self.machines
        serial = self._unkeyed.get((scope, model), 0)
        self._unkeyed[(scope, model)] = serial + 1
        return serial % self.machines

    def apply(
        self,
        scope: str,
        model: str,
        cache_key: str | None,
        segments: Sequence[tuple[str, int]],
        *,
        now: float,
        readable_at: float,
        trailing: int = 0,
    ) -> ChatCacheOutcome:
        """Read and write for one request; ``segments`` are (prefix digest, tokens of that segment).

        ``trailing``: tokens the prompt counts after its last segment (the reply's priming), never cached.
        """
        machine = self.route(scope, model, cache_key)
        store = self._stores.setdefault((scope, model, machine), {})
        for key in [key for key, entry in store.items() if entry.expires_at <= now]:
            del store[key]
        total = sum(tokens for _, tokens in segments) + trailing
        matched, running = 0, 0
        for digest, tokens in segments:
            running += tokens
            entry = store.get(digest)
            if entry is None or entry.readable_at > now:
                break
            matched = running
            store[digest] = attrs.evolve(entry, expires_at=now + TTL_SECONDS)
        cached = (matched // INCREMENT) * INCREMENT if total >= MIN_CACHED_TOKENS else 0
        cached = cached if cached >= MIN_CACHED_TOKENS else 0
        if total >= MIN_CACHED_TOKENS:
            running = 0
            for digest, tokens in segments:
                running += tokens
                old = store.get(digest)
                ready = readable_at if old is None else min(old.readable_at, readable_at)
                store[digest] = _Entry(running, ready, now + TTL_SECONDS)
            while len(store) > MAX_ENTRIES_PER_MACHINE:
                del store[next(iter(store))]
        return ChatCacheOutcome(machine, cache_key is not None, total, cached, matched)

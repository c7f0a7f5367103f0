"""Scripts that advance per conversation, not per node.

A scripted node's requests are grouped into conversations by their prefix:
the node id, the first message's role and its first content block (without
``cache_control``): the task instruction, which folds never touch (a fold
may append a note to the first message, so later blocks are not part of
the key). Each
conversation has its own step cursor, starting at the script's ``start``
(a resumed run's cursor). A request whose content (system and messages
without ``cache_control``) was answered before gets the same answer again
without using a step: a retry is answered as the first attempt was.
So retries and parallel conversations of one node get the answers each
would get alone. The cursor is read from the request first
(:mod:`runtime.sim.script_position`: one past the last reply of the script
the request holds), so any simulator answers a request as any other would
(a flow that moves to another worker's simulator); the remembered cursor
counts only for a conversation that holds no reply of its script.

What is remembered is kept small, since a run of thousands of nodes keeps
every conversation's entries: keys are raw 32-byte SHA-256 digests (not hex
text), an answered request keeps the step that answered it (the reply is
rebuilt from the step, as it was made: :func:`reply_for_step` is
deterministic), and the step indexes of scripts are kept for the most
recently used :data:`KEPT_INDEXES` scripts only (rebuilt when asked again).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs

from runtime.scripted.policies import PolicyExhausted, Reply, ScriptPolicy, reply_for_step
from runtime.sim.script_position import StepIndex, script_position
from runtime.sim.tokens import strip_cache_control
from runtime.values.canonical import canonical_bytes

DEFAULT_MEMORY = 65_536
"""How many conversations (and answered requests) are remembered; the least recently used is forgotten."""

KEPT_INDEXES = 4_096
"""How many scripts' step indexes are kept (least recently used dropped: one is rebuilt from its script)."""


def _stripped(blocks: Any) -> list[Any]:
    if isinstance(blocks, str):
        return [{"type": "text", "text": blocks}]
    return [strip_cache_control(block) if isinstance(block, Mapping) else block for block in blocks or []]


def conversation_key(node_id: str, payload: Mapping[str, Any]) -> bytes:
    """The conversation a request belongs to: its node and its first message's first block (a SHA-256 digest)."""
    messages = payload.get("messages") or []
    first = messages[0] if messages else {}
    head = {"role": first.get("role"), "content": _stripped(first.get("content"))[:1]}
    return hashlib.sha256(b"conversation:" + node_id.encode() + b"\n" + canonical_bytes(head)).digest()


def request_key(node_id: str, payload: Mapping[str, Any]) -> bytes:
    """The request's content: its node, system and messages, ``cache_control`` excluded."""
    messages = [
        {"role": message.get("role"), "content": _stripped(message.get("content"))}
        for message in payload.get("messages") or []
    ]
    content = {"system": _stripped(payload.get("system")), "messages": messages}
    return hashlib.sha256(b"request:" + node_id.encode() + b"\n" + canonical_bytes(content)).digest()


@attrs.define(eq=False)
class ConversationScripts:
    """Per-conversation cursors over script policies, and the steps that answered requests already given."""

    memory: int = DEFAULT_MEMORY
    kept_indexes: int = KEPT_INDEXES
    _cursors: OrderedDict[bytes, int] = attrs.field(factory=OrderedDict, init=False)
    _answers: OrderedDict[bytes, int] = attrs.field(factory=OrderedDict, init=False)
    _indexes: OrderedDict[int, tuple[ScriptPolicy, StepIndex]] = attrs.field(factory=OrderedDict, init=False)

    def respond(self, policy: ScriptPolicy, payload: Mapping[str, Any]) -> Reply:
        """The answer of ``policy``'s script to ``payload``, by its conversation's cursor."""
        node = policy.node_id
        answered_key = request_key(node, payload)
        answered = self._answers.get(answered_key)
        if answered is not None:  # the same request again (a retry): the step that answered it, once more
            self._answers.move_to_end(answered_key)
            return reply_for_step(node, answered, policy.steps[answered])
        conversation, cursor = self._cursor(policy, payload)
        if cursor >= len(policy.steps):
            raise PolicyExhausted(
                f"node {node!r}: its script had {len(policy.steps)} step(s) and this conversation used all of them; "
                f"request {cursor + 1} of the conversation has no scripted answer"
            )
        reply = reply_for_step(node, cursor, policy.steps[cursor])
        _remember(self._cursors, conversation, cursor + 1, self.memory)
        _remember(self._answers, answered_key, cursor, self.memory)
        return reply

    def compaction_summary(self, policy: ScriptPolicy, payload: Mapping[str, Any]) -> str | None:
        """The ``compaction`` summary of the step that will answer ``payload`` (None: none given), no step used."""
        _, cursor = self._cursor(policy, payload)
        return policy.steps[cursor].compaction if cursor < len(policy.steps) else None

    def _cursor(self, policy: ScriptPolicy, payload: Mapping[str, Any]) -> tuple[bytes, int]:
        """The request's conversation and the step that answers it: read from the request, else remembered."""
        conversation = conversation_key(policy.node_id, payload)
        remembered = self._cursors.get(conversation, policy.start)
        read = script_position(self._index(policy), policy.start, payload)
        return conversation, remembered if read is None else max(read, remembered)

    def _index(self, policy: ScriptPolicy) -> StepIndex:
        """The policy's step index, kept while recently used (the policy is kept with it, so its id is not reused)."""
        held = self._indexes.get(id(policy))
        if held is None:
            held = (policy, StepIndex.of(policy))
        _remember(self._indexes, id(policy), held, self.kept_indexes)
        return held[1]


def _remember(store: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > limit:
        store.popitem(last=False)

"""A deterministic scripted summarizer for fold summary requests (no model involved).

Scripted runs (the in-process provider and the simulated server) answer a
request by the node it names; a fold's summary request is a ``side`` request
that names no node. :class:`FoldSummaryPolicy` answers such requests with an
extractive summary of the span it carries: the calls made (function and
arguments, with the original's index) and the first line of each result and
message. It satisfies :class:`runtime.scripted.policies.Policy`; register it as a
:class:`~runtime.scripted.policies.PolicyRegistry`'s ``default`` to answer summary
requests in scripted scenarios.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runtime.scripted.policies import Reply

MAX_LINES = 24
LINE_CHARS = 160

_HEADER = re.compile(r"^\[(?P<what>user|assistant|result|earlier fold note)(?P<rest>[^\]]*)\]$")


def _prompt_text(payload: Mapping[str, Any]) -> str:
    texts = []
    for message in payload.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(b.get("text", "") for b in content if b.get("type") == "text")
    return "\n".join(texts)


_NOTE_HEADER = re.compile(r"^\[fold \S+ · (?P<stage>[\w-]+) · (?P<count>\d+) messages? from #(?P<first>\d+)")
_LISTED_CALL = re.compile(r"^- #(?P<index>\d+) (?P<call>.+?)(?: -> .*)?$")


def _note_sentence(body: list[str]) -> str:
    """An earlier fold note's lines (up to the next transcript header) said as one sentence."""
    header = _NOTE_HEADER.match(body[0].strip()) if body else None
    what = (
        f"An earlier fold note ({header['stage']}, {header['count']} messages from #{header['first']})"
        if header
        else "An earlier fold note"
    )
    calls = [match for line in body if (match := _LISTED_CALL.match(line.strip()))]
    if not calls:
        return f"- {what} folded no calls."
    first = calls[0]
    plural = "s" if len(calls) != 1 else ""
    return f"- {what} lists {len(calls)} call{plural}, the first #{first['index']} {first['call']}."


def extractive_summary(text: str) -> str:
    """A short summary of a transcript in :func:`runtime.fold.notes.transcript` form."""
    lines = text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        match = _HEADER.match(line.strip())
        if match is None:
            continue
        what, rest = match["what"], match["rest"].strip()
        if what == "earlier fold note":
            end = next((j for j in range(i + 1, len(lines)) if _HEADER.match(lines[j].strip())), len(lines))
            out.append(_note_sentence(lines[i + 1 : end])[:LINE_CHARS])
            if len(out) >= MAX_LINES:
                break
            continue
        following = next((nxt.strip() for nxt in lines[i + 1 : i + 4] if nxt.strip() and not nxt.startswith("[")), "")
        if what == "assistant" and " calls " in rest:
            out.append(f"- {rest}"[:LINE_CHARS])
        elif following:
            out.append(f"- {what} {rest}: {following}"[:LINE_CHARS])
        if len(out) >= MAX_LINES:
            break
    if not out:
        return "The folded span held no calls or messages worth keeping."
    return "What the folded span did:\n" + "\n".join(out)


class FoldSummaryPolicy:
    """Answers a summary request with :func:`extractive_summary` of its span (stateless)."""

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        return Reply(
            content=({"type": "text", "text": extractive_summary(_prompt_text(payload))},), stop_reason="end_turn"
        )

"""Request validation the way the Messages API does it, and normalization.

:func:`validate_request` checks a decoded request body and returns a
normalized copy (``system`` as a list of text blocks or absent, every
message's ``content`` as a list of blocks). Every refusal is a
:class:`~runtime.sim.errors.SimAPIError` (400 ``invalid_request_error``)
whose message names the field path, as the API's do. The input is never
mutated. Cache marks are checked later, by :mod:`runtime.sim.layout`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.sim.errors import invalid_request
from runtime.sim.models import SYSTEM_MESSAGE_MODELS, supports_system_messages
from runtime.sim.request_rules import (
    SAMPLING_KEYS,
    check_output_limit,
    check_sampling,
    check_system_message_extras,
    check_thinking_budget,
    check_unsimulated,
)
from runtime.sim.sdk_fields import (
    block_type_allowed,
    block_types,
    count_key_allowed,
    create_key_allowed,
    message_key_allowed,
)
from runtime.sim.structured import check_output_config

ASSISTANT_ONLY_TYPES = frozenset({"thinking", "redacted_thinking", "tool_use", "server_tool_use", "mcp_tool_use"})
"""Blocks only the model writes; any other block type the SDK names may sit in either role."""
USER_ONLY_TYPES = frozenset({"tool_result"})
TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")


def validate_request(body: Any, *, count_only: bool = False) -> dict[str, Any]:
    """Validate a ``/v1/messages`` body (or a ``count_tokens`` body) and return it normalized."""
    if not isinstance(body, dict):
        raise invalid_request(f"request body: expected a JSON object, got {type(body).__name__}")
    allowed = count_key_allowed if count_only else create_key_allowed
    for key in body:
        if not (allowed(key) or (not count_only and key in SAMPLING_KEYS)):
            raise invalid_request(f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_request(f"model: expected a non-empty string, got {model!r}")
    normalized = dict(body)
    check_unsimulated(body)
    if not count_only:
        _check_max_tokens(body)
        check_output_limit(body)
        check_sampling(body)
        if "stream" in body and not isinstance(body["stream"], bool):
            raise invalid_request(f"stream: expected true or false, got {body['stream']!r}")
    normalized["messages"] = _normalize_messages(body.get("messages"), model)
    system = _normalize_system(body.get("system"))
    if system:
        normalized["system"] = system
    else:
        normalized.pop("system", None)
    _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), body.get("tools") or [])
    _check_thinking(body.get("thinking"))
    if not count_only:
        check_thinking_budget(body)
    check_output_config(body.get("output_config"), str(body.get("model")))
    if not count_only and body["max_tokens"] == 0:
        _check_prewarm(body)
    return normalized


def _check_max_tokens(body: Mapping[str, Any]) -> None:
    if "max_tokens" not in body:
        raise invalid_request("max_tokens: Field required")
    value = body["max_tokens"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_request(f"max_tokens: expected an integer >= 0, got {value!r}")


def _check_prewarm(body: Mapping[str, Any]) -> None:
    if body.get("stream") is True:
        raise invalid_request("max_tokens: 0 (cache pre-warm) cannot be combined with stream")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        raise invalid_request("max_tokens: 0 (cache pre-warm) cannot be combined with thinking.type 'enabled'")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise invalid_request(
            f"max_tokens: 0 (cache pre-warm) cannot be combined with a forced tool_choice ({choice.get('type')!r})"
        )
    output_config = body.get("output_config")
    if isinstance(output_config, dict) and "format" in output_config:
        raise invalid_request("max_tokens: 0 (cache pre-warm) cannot be combined with output_config.format")


def _normalize_system(system: Any) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    if not isinstance(system, list):
        raise invalid_request(f"system: expected a string or a list of text blocks, got {type(system).__name__}")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise invalid_request(f"system.{i}: expected a text block ({{'type': 'text', 'text': ...}}), got {block!r}")
        if not isinstance(block.get("text"), str):
            raise invalid_request(f"system.{i}.text: expected a string, got {block.get('text')!r}")
    return list(system)


def _normalize_messages(messages: Any, model: str) -> list[dict[str, Any]]:
    """The messages checked, consecutive user (or assistant) turns combined into one as the API combines them.

    A ``system`` message (a mid-conversation system instruction) stays at its
    place; it is checked by :func:`_check_system_message`."""
    if messages is None:
        raise invalid_request("messages: Field required")
    if not isinstance(messages, list) or not messages:
        raise invalid_request("messages: expected a non-empty list of messages")
    normalized: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid_request(f"messages.{i}: expected an object with 'role' and 'content', got {message!r}")
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise invalid_request(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system', got {role!r}")
        for key in message:
            if not message_key_allowed(role, key):
                raise invalid_request(f"messages.{i}.{key}: Extra inputs are not permitted")
        if role == "system":
            normalized.append(_check_system_message(messages, i, model))
            continue
        if i == 0 and role != "user" and not _opens_with_compaction(message):
            raise invalid_request(f"messages.0.role: the first message must use the 'user' role, got {role!r}")
        content = _normalize_content(message.get("content"), i, role)
        if not content and not (role == "assistant" and i == len(messages) - 1):
            raise invalid_request(
                f"messages.{i}: all messages must have non-empty content "
                "except for the optional final assistant message"
            )
        if normalized and normalized[-1]["role"] == role:
            normalized[-1]["content"].extend(content)
        else:
            normalized.append({"role": role, "content": list(content)})
    _check_tool_pairing(normalized)
    return normalized


def _opens_with_compaction(message: Mapping[str, Any]) -> bool:
    """An assistant message that starts with a compaction block may open a request (a client that keeps only
    what follows its latest compaction sends it first)."""
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, Mapping) and first.get("type") == "compaction"


def _check_system_message(messages: list[Any], i: int, model: str) -> dict[str, Any]:
    """A mid-conversation system message, placed as the API requires: after a user turn (or an assistant turn
    ending in a server tool use), last or followed by an assistant turn, on a model that takes it."""
    if not supports_system_messages(model):
        raise invalid_request(
            f"messages.{i}.role: mid-conversation system messages are not supported by {model!r} "
            f"(models that take them: {', '.join(sorted(SYSTEM_MESSAGE_MODELS))} and generation 5 on); "
            "use the top-level system field"
        )
    previous = messages[i - 1] if i > 0 else None
    after_server_tool = (
        isinstance(previous, dict)
        and previous.get("role") == "assistant"
        and isinstance(previous.get("content"), list)
        and bool(previous["content"])
        and isinstance(previous["content"][-1], dict)
        and previous["content"][-1].get("type") == "server_tool_use"
    )
    if previous is None or not (previous.get("role") == "user" or after_server_tool):
        raise invalid_request(
            f"messages.{i}: a system message must immediately follow a user message "
            "(or an assistant message ending in a server tool use); put system instructions before the first "
            "message in the top-level system field"
        )
    following = messages[i + 1] if i + 1 < len(messages) else None
    if following is not None and (not isinstance(following, dict) or following.get("role") != "assistant"):
        raise invalid_request(
            f"messages.{i}: a system message must be the last message or be followed by an assistant message"
        )
    check_system_message_extras(messages[i], i)
    content = message_content = messages[i].get("content")
    if isinstance(message_content, str):
        content = [{"type": "text", "text": message_content}] if message_content else []
    if not isinstance(content, list) or not content:
        raise invalid_request(f"messages.{i}.content: expected a non-empty string or list of text blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise invalid_request(f"messages.{i}.content.{j}: a system message holds text blocks only, got {block!r}")
        _check_block(block, f"messages.{i}.content.{j}")
    return {"role": "system", "content": list(content)}


def _normalize_content(content: Any, i: int, role: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content:
            return []
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid_request(f"messages.{i}.content: expected a string or a list of blocks, got {content!r}")
    refused = ASSISTANT_ONLY_TYPES if role == "user" else USER_ONLY_TYPES
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid_request(f"{where}: expected a content block with a 'type', got {block!r}")
        kind = block["type"]
        if not block_type_allowed(kind) or kind in refused:
            allowed = sorted(block_types() - refused)
            raise invalid_request(
                f"{where}.type: {kind!r} is not a block type allowed in a {role} message "
                f"(expected one of {', '.join(allowed)})"
            )
        _check_block(block, where)
    return list(content)


def _check_block(block: Mapping[str, Any], where: str) -> None:
    kind = block["type"]
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise invalid_request(f"{where}.text: expected a string, got {text!r}")
        if not text:
            raise invalid_request(f"{where}.text: text content blocks must be non-empty")
    elif kind == "tool_use":
        for key in ("id", "name"):
            if not isinstance(block.get(key), str) or not block.get(key):
                raise invalid_request(f"{where}.{key}: expected a non-empty string, got {block.get(key)!r}")
        if not isinstance(block.get("input"), dict):
            raise invalid_request(f"{where}.input: expected an object, got {block.get('input')!r}")
    elif kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str) or not block.get("tool_use_id"):
            raise invalid_request(f"{where}.tool_use_id: expected a non-empty string, got {block.get('tool_use_id')!r}")
        content = block.get("content", "")
        if not isinstance(content, (str, list)):
            raise invalid_request(f"{where}.content: expected a string or a list of blocks, got {content!r}")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise invalid_request(f"{where}.is_error: expected a boolean, got {block['is_error']!r}")
    elif kind == "thinking":
        if not isinstance(block.get("thinking"), str):
            raise invalid_request(f"{where}.thinking: expected a string, got {block.get('thinking')!r}")
    elif kind in ("image", "document"):
        if not isinstance(block.get("source"), dict):
            raise invalid_request(f"{where}.source: expected an object, got {block.get('source')!r}")


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            uses = [block["id"] for block in message["content"] if block["type"] == "tool_use"]
            for use_id in uses:
                if use_id in seen_ids:
                    raise invalid_request(f"messages.{i}: `tool_use` ids must be unique; {use_id} appears twice")
                seen_ids.add(use_id)
            if not uses:
                continue
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {block["tool_use_id"] for block in following if block["type"] == "tool_result"}
            missing = [use_id for use_id in uses if use_id not in answered]
            if missing:
                raise invalid_request(
                    f"messages.{min(i + 1, len(messages) - 1)}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    f"corresponding `tool_result` block in the next message."
                )
        else:
            previous = messages[i - 1]["content"] if i > 0 else []
            offered = {block["id"] for block in previous if block["type"] == "tool_use"}
            for j, block in enumerate(message["content"]):
                if block["type"] == "tool_result" and block["tool_use_id"] not in offered:
                    raise invalid_request(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding `tool_use` "
                        f"block in the previous message."
                    )


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid_request(f"tools: expected a list of tool definitions, got {type(tools).__name__}")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise invalid_request(f"tools.{i}: expected a tool definition object, got {tool!r}")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise invalid_request(f"tools.{i}.name: expected a non-empty string, got {name!r}")
        if name in names:
            raise invalid_request(f"tools: Tool names must be unique; {name!r} appears twice")
        names.add(name)
        if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
            raise invalid_request(f"tools.{i}.input_schema: expected an object, got {tool.get('input_schema')!r}")


def _check_tool_choice(choice: Any, tools: list[Any]) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in TOOL_CHOICE_TYPES:
        raise invalid_request(
            f"tool_choice: expected an object whose type is one of {', '.join(TOOL_CHOICE_TYPES)}, got {choice!r}"
        )
    if choice["type"] == "tool":
        names = {tool.get("name") for tool in tools if isinstance(tool, dict)}
        if not isinstance(choice.get("name"), str) or choice.get("name") not in names:
            raise invalid_request(f"tool_choice.name: {choice.get('name')!r} is not the name of a tool in 'tools'")


def _check_thinking(thinking: Any) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled", "adaptive"):
        raise invalid_request(
            f"thinking: expected an object whose type is 'enabled', 'disabled' or 'adaptive', got {thinking!r}"
        )

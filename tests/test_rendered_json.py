"""A tool result's output is escaped once, when the result is made: its digest and its block splice it in.

:class:`runtime.values.messages.ToolResult` keeps ``output_json`` (the canonical JSON
of its output) and builds its digest around it; :mod:`runtime.request.rendering`
writes a result's block, and a text block, out by hand rather than through a
dict's encoding. The properties hold every one of them byte for byte equal to
the canonical JSON of the value it stands for, over outputs full of what JSON
escapes (quotes, backslashes, control characters, line separators,
non-ASCII; lone surrogates have no UTF-8 form, so no digest) and every field a result's content carries.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.request.rendering import render_blocks
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import ClipInfo, Instruction, Note, ToolCall, ToolResult

_TEXT = st.text(
    st.one_of(
        st.characters(exclude_categories=["Cs"]), st.sampled_from(list('"\\\n\r\t\x00\x1f\x7f\u2028\u2029é漢🙂'))
    ),
    max_size=60,
)
_CLIP = st.none() | st.builds(ClipInfo, st.integers(0, 9), st.integers(0, 999), st.integers(0, 99), st.integers(0, 99))


class _Cut:
    """A result projection that keeps the first ``keep`` characters of every output."""

    def __init__(self, keep: int) -> None:
        self.keep = keep

    def memo_key(self, result: ToolResult) -> object:
        return ("cut", self.keep)

    def output_of(self, result: ToolResult) -> str:
        return result.output[: self.keep]


@settings(max_examples=300, deadline=None)
@given(
    call_id=_TEXT,
    name=_TEXT,
    arguments=st.dictionaries(_TEXT, _TEXT, max_size=3),
    output=_TEXT,
    is_error=st.booleans(),
    output_format=st.sampled_from(["text", "json"]),
    clipped_from=st.none() | _TEXT,
    clip=_CLIP,
)
def test_a_results_digest_and_block_are_the_canonical_json_of_what_they_stand_for(
    call_id: str,
    name: str,
    arguments: dict[str, str],
    output: str,
    is_error: bool,
    output_format: str,
    clipped_from: str | None,
    clip: ClipInfo | None,
) -> None:
    result = ToolResult(
        call_id,
        name,
        canonical_json(arguments),
        output,
        is_error,
        output_format,
        clipped_from,
        clip,  # type: ignore[arg-type]
    )
    assert result.output_json == canonical_json(output)
    assert result.sha256 == sha256_hex(canonical_json(result.content()))
    value: dict[str, object] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if is_error:
        value["is_error"] = True
    (block,) = render_blocks(result)
    assert block.json == canonical_json(value) and json.loads(block.json) == value
    for keep in (0, len(output) // 2):
        (cut,) = render_blocks(result, _Cut(keep))
        assert cut.json == canonical_json(value | {"content": output[:keep]})


@settings(max_examples=200, deadline=None)
@given(text=_TEXT.filter(str.strip), notice=st.none() | _TEXT)
def test_a_text_block_is_the_canonical_json_of_its_value(text: str, notice: str | None) -> None:
    task, note = Instruction(text, notice), Note(text, ("x",), 0, "tool_io")
    assert render_blocks(task)[0].json == canonical_json({"type": "text", "text": task.rendered_text()})
    assert render_blocks(note)[0].json == canonical_json({"type": "text", "text": text})


def test_the_digest_is_unchanged_by_how_it_is_computed() -> None:
    # A stored result's digest is the stored format's: a fixed example pins the bytes it is taken over.
    call = ToolCall.create("toolu_1", "read_file", {"path": "a.txt"})
    result = ToolResult.for_call(call, 'line "one"\nline two')
    stored = (
        '{"arguments":"{\\"path\\":\\"a.txt\\"}","call_id":"toolu_1","clip":null,"clipped_from":null,'
        '"is_error":false,"kind":"tool_result","name":"read_file","output":"line \\"one\\"\\nline two",'
        '"output_format":"text"}'
    )
    assert canonical_json(result.content()) == stored and result.sha256 == sha256_hex(stored)


def test_a_result_keeps_its_output_once_and_gives_its_json_on_demand() -> None:
    """A run keeps every result: no field holds a second, escaped copy of the output (issue 33, peak RSS)."""
    import attrs

    result = ToolResult(call_id="toolu_1", name="read", arguments_json="{}", output='line "one"\nline two')
    stored = attrs.asdict(result, recurse=False)
    assert "output_json" not in stored and list(stored.values()).count(result.output) == 1
    assert result.output_json == canonical_json(result.output) == json.dumps(result.output, ensure_ascii=False)

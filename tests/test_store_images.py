"""Images in the store: each distinct image's bytes once, by SHA-256, and every image back byte for byte (issue 14).

A message carrying images is stored with each image's data left out and the
bytes kept once in the ``images`` table; the same image in two messages, or
twice in one, adds its bytes once. Reading puts the bytes back and checks both
the image's digest and the message's.
"""

from __future__ import annotations

import io
import re
import sqlite3
import struct
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import copy_store

from actors.branch import Branch
from runtime.cli import main
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings, compile_request
from runtime.store.codec import content_with_images, stored_message_content
from runtime.store.errors import StoreCorrupt
from runtime.store.journal import RunStore
from runtime.store.reader import StoreReader
from runtime.values.messages import AssistantResponse, ImagePart, Instruction, Message, Note, ToolCall, ToolResult

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FIGURES = {name: (SCENARIOS / "vision" / name).read_bytes() for name in ("chart.png", "diagram.png", "photo.png")}


def png(width: int, height: int, tail: bytes) -> bytes:
    """A PNG header of ``width`` x ``height`` (all the API's checks read) and ``tail`` as its body."""
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height) + tail


images_st = st.builds(png, st.integers(1, 2000), st.integers(1, 2000), st.binary(min_size=1, max_size=3000)).map(
    lambda data: ImagePart.from_bytes(data, "generated")
)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[ImagePart], list[tuple[str, list[int]]]]:
    """A pool of images and messages (instruction or tool result) naming images of the pool by index.

    Indexes repeat across messages and within one, so the same image appears in
    two messages and twice in one message (checked by the test, not assumed).
    """
    pool = draw(st.lists(images_st, min_size=1, max_size=4, unique_by=lambda image: image.sha256))
    messages = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["instruction", "tool_result"]),
                st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=3),
            ),
            min_size=1,
            max_size=6,
        )
    )
    return pool, messages


async def store_conversation(path: Path, pool: list[ImagePart], plan: list[tuple[str, list[int]]]) -> list[Message]:
    """Append the planned messages to a branch stored at ``path``, folding the first image message at the end."""
    branch = Branch.create(system="look")
    appended: list[Message] = []
    async with await RunStore.create(
        path, run_id="run-i", scenario_text="x", scenario_path="x.toml", provider_kind="scripted"
    ) as store:
        branch.attach_journal(store)
        for n, (kind, picks) in enumerate(plan):
            images = tuple(pool[i] for i in picks)
            async with branch.turn() as turn:
                if kind == "instruction":
                    message: Message = Instruction(f"look {n}", images=images)
                    turn.append(message)
                else:
                    call = ToolCall.create(f"c{n}", "read_image", {"path": f"p{n}.png"})
                    turn.append(AssistantResponse((call,), "tool_use"))
                    message = ToolResult.for_call(call, f"read p{n}.png", images=images)
                    turn.append(message)
            appended.append(message)
        async with branch.turn() as turn:  # a fold: the first image message leaves the view for a note
            first = appended[0]
            note = Note("folded an image message", (first.id,), branch.index_of(first.id) or 0, "tool_io")
            with turn.batch():
                turn.add_to_record(note)
                turn.set_view(tuple(note.id if mid == first.id else mid for mid in branch.view_ids()))
    return appended


def _images_table(path: Path) -> list[tuple[str, int]]:
    connection = sqlite3.connect(path)
    rows = connection.execute("SELECT sha256, LENGTH(data) FROM images ORDER BY sha256").fetchall()
    connection.close()
    return rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversation=conversations(), backend=st.sampled_from(["asyncio", "trio"]))
def test_every_image_comes_back_byte_for_byte_and_each_distinct_image_is_stored_once(
    tmp_path_factory: pytest.TempPathFactory, conversation: tuple[list[ImagePart], list], backend: str
) -> None:
    pool, plan = conversation
    path = tmp_path_factory.mktemp("images") / "s.db"
    appended = anyio.run(store_conversation, path, pool, plan, backend=backend)
    used = {pool[i].sha256: pool[i] for _kind, picks in plan for i in picks}
    # once per distinct image, its raw bytes (not base64), however often it appears
    assert _images_table(path) == sorted((sha, image.size) for sha, image in used.items())
    with StoreReader(path) as reader:
        assert reader.image_count() == (len(used), sum(image.size for image in used.values()))
        (restored,) = reader.restore_branches().values()
        for original in appended:
            back = reader.message(original.id)
            assert back == original and back.sha256 == original.sha256
            assert [image.raw() for image in back.images] == [image.raw() for image in original.images]
        # the folded message is out of the view but in the record, whole
        assert appended[0].id not in restored.view_ids()
        assert restored.message_at(restored.index_of(appended[0].id) or 0) == appended[0]
        contents = [row[0] for row in reader._rows("SELECT content FROM contents")]
    # no content row holds an image's base64 text: the bytes are in the images table only
    assert not any(image.data in content for image in used.values() for content in contents)


def test_the_same_image_in_two_messages_and_twice_in_one_is_stored_once(tmp_path: Path) -> None:
    image = ImagePart.from_bytes(FIGURES["chart.png"], "chart.png")
    other = ImagePart.from_bytes(FIGURES["photo.png"], "photo.png")
    plan = [("instruction", [0, 0]), ("tool_result", [0, 1]), ("tool_result", [1])]
    appended = anyio.run(store_conversation, tmp_path / "s.db", [image, other], plan)
    assert _images_table(tmp_path / "s.db") == sorted(
        [(image.sha256, len(FIGURES["chart.png"])), (other.sha256, len(FIGURES["photo.png"]))]
    )
    with StoreReader(tmp_path / "s.db") as reader:
        twice = reader.message(appended[0].id)
    assert [i.raw() for i in twice.images] == [FIGURES["chart.png"]] * 2


def test_the_stored_content_leaves_the_image_data_out_and_puts_it_back_exactly() -> None:
    image = ImagePart.from_bytes(FIGURES["diagram.png"], "diagram.png")
    message = Instruction("two of the same", images=(image, image))
    stored, images = stored_message_content(message)
    assert image.data not in stored and stored.count('"data":null') == 2
    assert images == [(image.sha256, FIGURES["diagram.png"])]
    full = content_with_images(stored, {image.sha256: FIGURES["diagram.png"]}.get, message.id)
    from runtime.store.codec import message_content_json

    assert full == message_content_json(message)
    with pytest.raises(StoreCorrupt, match=r"image 0 .* is not in the store's images"):
        content_with_images(stored, {}.get, message.id)
    with pytest.raises(StoreCorrupt, match="image 0's stored bytes do not match its SHA-256"):
        content_with_images(stored, lambda sha: FIGURES["chart.png"], message.id)


def test_an_image_changed_in_the_store_is_named(tmp_path: Path) -> None:
    image = ImagePart.from_bytes(FIGURES["chart.png"], "chart.png")
    appended = anyio.run(store_conversation, tmp_path / "s.db", [image], [("tool_result", [0])])
    connection = sqlite3.connect(tmp_path / "s.db")
    with connection:
        connection.execute(
            "UPDATE images SET data = ? WHERE sha256 = ?", (FIGURES["chart.png"][:-1] + b"!", image.sha256)
        )
    connection.close()
    with StoreReader(tmp_path / "s.db") as reader, pytest.raises(StoreCorrupt) as caught:
        reader.message(appended[0].id)
    assert f"stored message {appended[0].id}: image 0's stored bytes do not match its SHA-256 {image.sha256}" in str(
        caught.value
    )


def test_the_same_image_twice_in_a_request_is_counted_per_image() -> None:
    image = ImagePart.from_bytes(FIGURES["photo.png"], "photo.png")
    once = compile_request(
        system=None, tools=(), view=(Instruction("look", images=(image,)),), settings=RequestSettings(model="m")
    )
    twice = compile_request(
        system=None, tools=(), view=(Instruction("look", images=(image, image)),), settings=RequestSettings(model="m")
    )
    counter = TokenCounter()
    grown = measure_request(twice, counter, 1.0).counted - measure_request(once, counter, 1.0).counted
    # one more image block: its estimate plus its block's JSON keys, never its base64 text
    assert image.tokens <= grown <= image.tokens + 40 < len(image.data) // 4


def test_vision_with_a_store_keeps_each_figure_once_and_restores_every_read(tmp_path: Path) -> None:
    """Two nodes read the same three figures (one folds them under its ceiling): three images stored."""
    store = tmp_path / "vision.db"
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(SCENARIOS / "vision.toml"), "--store", str(store), "--quiet"], out=out, err=err) == 0
    by_sha = {ImagePart.from_bytes(data, name).sha256: data for name, data in FIGURES.items()}
    assert _images_table(store) == sorted((sha, len(data)) for sha, data in by_sha.items())
    with StoreReader(store) as reader:
        reads = [
            m
            for branch in reader.restore_branches().values()
            for m in (branch.message_at(i) for i in range(branch.record_length()))
            if isinstance(m, ToolResult) and m.name == "read_image"
        ]
        notes = [m for b in reader.restore_branches().values() for m in b.view() if isinstance(m, Note)]
    assert len(reads) == 6 and all(by_sha[m.images[0].sha256] == m.images[0].raw() for m in reads)
    assert notes and any("restore with context" in n.text for n in notes)  # folded into notes, restorable
    copy = copy_store(store, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(copy), "--all"], out=out, err=err) == 0, err.getvalue()
    out = io.StringIO()
    assert main(["inspect", str(store), "--branch", "look"], out=out, err=err) == 0
    chart = next(line for line in out.getvalue().splitlines() if "vision/chart.png: image" in line)
    tokens = int(re.search(r"([\d,]+) tok", chart).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert 160 <= tokens < 400  # the 400x300 chart counts ~160 by the estimate, not its base64 (~1,500)

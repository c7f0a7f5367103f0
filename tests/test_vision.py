"""Images in conversations (issue 14): read, bounded, counted by the documented estimate, folded, restored."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest

from actors.images import load_workspace_image, scenario_registry
from actors.tools import ToolFailed
from runtime.config.loader import load_scenario
from runtime.fold.recovery import plan_restore
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scenarios.run import run_scenario
from runtime.sim.errors import SimAPIError
from runtime.sim.images import split_images
from runtime.store.codec import StoreCorrupt, message_from_content
from runtime.values.images import (
    MAX_IMAGE_BYTES,
    ImageError,
    api_resized,
    image_tokens,
    inspect_image,
)
from runtime.values.messages import ImagePart, Instruction, Note, ToolResult
from signals.sinks import read_jsonl

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "vision.toml"
FIGURES = SCENARIO.parent / "vision"
ESTIMATES = {"chart.png": 160, "diagram.png": 410, "photo.png": 640}


def gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\x00" * 8


def jpeg(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, h, w) + b"\x03" + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp_vp8x(w: int, h: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4 + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def test_headers_of_the_four_formats_give_type_and_size() -> None:
    assert (inspect_image(gif(31, 17), "g").media_type, inspect_image(gif(31, 17), "g").width) == ("image/gif", 31)
    info = inspect_image(jpeg(640, 480), "j")
    assert (info.media_type, info.width, info.height) == ("image/jpeg", 640, 480)
    info = inspect_image(webp_vp8x(1200, 900), "w")
    assert (info.media_type, info.width, info.height) == ("image/webp", 1200, 900)
    info = inspect_image((FIGURES / "chart.png").read_bytes(), "c")
    assert (info.media_type, info.width, info.height) == ("image/png", 400, 300)


def test_the_resize_rule_and_the_estimate_follow_the_documented_numbers() -> None:
    assert image_tokens(200, 200) == 54  # the docs' table: 200x200 ~ 54 tokens
    assert image_tokens(1000, 1000) == 1334  # 1000x1000 ~ 1334
    assert api_resized(1000, 1000) == (1000, 1000)
    w, h = api_resized(4000, 3000)  # long edge and ~1,600-token bound both apply
    assert max(w, h) <= 1568 and w * h / 750 <= 1600 and abs(w / h - 4 / 3) < 0.01
    assert image_tokens(8000, 8000) <= 1600


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"hello world, not an image", "not a PNG, JPEG, GIF or WebP"),
        (b"\x89PNG\r\n\x1a\n\x00", "IHDR header is missing"),
        (gif(9000, 10), "8000-pixel limit"),
        (gif(0, 10), "expected positive sides"),
        (jpeg(10, 10)[:8], "without a frame header"),
        (b"\x89PNG" + b"\x00" * (MAX_IMAGE_BYTES), "byte limit"),
    ],
)
def test_what_the_api_would_refuse_is_refused_before_sending(data: bytes, says: str) -> None:
    with pytest.raises(ImageError, match=re.escape(says)) as refused:
        ImagePart.from_bytes(data, "task image 'x'")
    assert "task image 'x'" in str(refused.value)


def test_workspace_paths_are_bounded_to_the_root(tmp_path: Path) -> None:
    (tmp_path / "in.png").write_bytes((FIGURES / "chart.png").read_bytes())
    (tmp_path / "bad.png").write_bytes(b"not an image")
    assert load_workspace_image(tmp_path, "in.png").raw() == (FIGURES / "chart.png").read_bytes()
    for path, says in [
        ("../x.png", "climbs out"),
        ("/etc/passwd", "absolute"),
        ("missing.png", "no such file"),
        ("bad.png", "not a PNG"),
    ]:
        with pytest.raises(ToolFailed, match=says):
            load_workspace_image(tmp_path, path)
    (tmp_path / "link.png").symlink_to(FIGURES / "chart.png")
    with pytest.raises(ToolFailed, match="outside the workspace root"):
        load_workspace_image(tmp_path, "link.png")


def test_an_image_counts_by_the_estimate_and_the_digest_covers_it() -> None:
    image = ImagePart.from_bytes((FIGURES / "photo.png").read_bytes(), "photo")
    settings = RequestSettings(model="claude-haiku-5-5")
    with_image = compile_request(system="s", tools=(), view=(Instruction("look", images=(image,)),), settings=settings)
    plain = compile_request(system="s", tools=(), view=(Instruction("look"),), settings=settings)
    counter = TokenCounter()
    grown = measure_request(with_image, counter, 1.0).counted - measure_request(plain, counter, 1.0).counted
    assert 640 <= grown < 640 + 40  # the estimate and the block's JSON frame, not ~6,000 tokens of base64
    assert with_image.payload()["messages"][0]["content"][1]["source"]["data"] == image.data
    other = ImagePart.from_bytes((FIGURES / "chart.png").read_bytes(), "chart")
    changed = compile_request(system="s", tools=(), view=(Instruction("look", images=(other,)),), settings=settings)
    assert changed.digest != with_image.digest
    assert Instruction("look", images=(image,)).sha256 != Instruction("look", images=(other,)).sha256


def test_a_counted_image_message_is_never_reused_for_its_sent_bytes_and_certifies_like_its_payload() -> None:
    from runtime.cache.certificates import certify
    from runtime.measuring.measure import measure

    image = ImagePart.from_bytes((FIGURES / "chart.png").read_bytes(), "chart")
    settings = RequestSettings(model="claude-haiku-5-5")
    request = compile_request(system="s", tools=(), view=(Instruction("look", images=(image,)),), settings=settings)
    fresh = measure_request(request, TokenCounter(), 1.0).counted
    counter = TokenCounter()
    sent = measure(request.pieces(), counter, 1.0).counted  # the base64 counted as text, remembered per message
    assert sent > fresh + 200
    assert measure_request(request, counter, 1.0).counted == fresh  # the counted segments are keyed apart
    assert measure(request.pieces(), counter, 1.0).counted == sent
    assert certify(request.prepared()) == certify(request.payload())


def test_the_simulator_counts_images_by_the_same_estimate_and_refuses_unreadable_ones() -> None:
    data = base64.b64encode((FIGURES / "diagram.png").read_bytes()).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    stripped, tokens = split_images({"type": "tool_result", "tool_use_id": "t", "content": [block]})
    assert tokens == 410 and stripped["content"][0]["source"]["data"] == ""
    with pytest.raises(SimAPIError, match="Could not process image"):
        split_images({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}})
    with pytest.raises(SimAPIError, match="does not match"):
        split_images({"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": data}})


def test_images_survive_the_store_and_a_changed_byte_is_corruption() -> None:
    image = ImagePart.from_bytes((FIGURES / "chart.png").read_bytes(), "chart")
    result = ToolResult("t1", "read_image", "{}", "chart", images=(image,))
    assert message_from_content("tool_result", result.content(), result.id) == result
    content = result.content()
    content["images"][0]["data"] = base64.b64encode(b"\x89PNG" + image.raw()[4:-1] + b"\x00").decode()
    with pytest.raises(StoreCorrupt, match="do not match its SHA-256"):
        message_from_content("tool_result", content, result.id)


@pytest.mark.anyio
async def test_the_vision_scenario_counts_folds_and_restores_images_byte_for_byte(tmp_path: Path) -> None:
    registry = scenario_registry(SCENARIO)
    scenario = load_scenario(SCENARIO, tool_names=registry.names())
    signals = tmp_path / "s.jsonl"
    run = await run_scenario(scenario, registry=registry, signals_path=signals)
    assert run.report["status"] == "ok"
    events = read_jsonl(signals)
    decisions = [e for e in events if e.type == "ContextDecision" and e.data["sent"]]
    look = [d for d in decisions if d.node_id == "look"]
    # the last request carries all three images: their estimates, not their base64 (about 8,000 tokens as text)
    assert sum(ESTIMATES.values()) < look[-1].data["estimate_before"] < sum(ESTIMATES.values()) + 700
    small = [d for d in decisions if d.node_id == "look-small"]
    assert all(d.data["estimate_after"] <= 2000 for d in small)  # decided on the server's count near the ceiling
    assert run.report["folds"] >= 1

    branch = run.result.branches["look-small"]
    view = branch.view()
    notes = [m for m in view if isinstance(m, Note)]
    # an image's restore line (a result's salient line may quote its text, digest included)
    lines = [line for note in notes for line in note.text.splitlines() if "image sha256:" in line and "restore" in line]
    assert lines, [n.text for n in notes]
    files = {p.name: p.read_bytes() for p in FIGURES.glob("*.png")}
    for line in lines:
        index = int(re.search(r'"index":(\d+)', line).group(1))
        assert "PNG" in line and "bytes" in line and '{"action":"restore"' in line
        plan = plan_restore(view, branch, start=index)
        restored = [branch.message_at(branch.index_of(i)) for i in plan.restored]
        images = [img for m in restored if isinstance(m, ToolResult) for img in m.images]
        assert images and all(img.raw() in files.values() for img in images)
        assert any(img.sha256[:16] in line for img in images)

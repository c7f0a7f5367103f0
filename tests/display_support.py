"""Helpers for the display tests: run the CLI in process, parse a report page, check it is self-contained."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from runtime.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.text = tag, attrs, ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Page(HTMLParser):
    """Every element with its attributes and text (its own text plus its children's), and the style text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.styles: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open and self._open[-1].tag == "style":
            self.styles.append(data)
        for element in self._open:
            element.text += data

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str | None) -> list[Element]:
        found = []
        for e in self.elements:
            if tag is not None and e.tag != tag:
                continue
            if cls is not None and cls not in e.classes:
                continue
            if any(e.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            found.append(e)
        return found


REFERENCE_ATTRIBUTES = ("src", "href", "xlink:href", "srcset", "action", "data", "poster", "background")


def outside_references(text: str, *, textual: bool = True) -> list[str]:
    """Everything in a page that would make a browser fetch something: [] for a self-contained page.

    ``textual`` adds a check of the raw text (no ``url(`` but ``data:``, no ``src=``/``href=`` to http anywhere),
    stricter than a browser: a page that quotes such text in escaped prose passes only with ``textual=False``.
    """
    page = Page(text)
    problems = []
    for e in page.elements:
        if e.tag in ("script", "link", "iframe", "object", "embed", "img", "base"):
            problems.append(f"<{e.tag}> element")
        for name in REFERENCE_ATTRIBUTES:
            value = e.attrs.get(name)
            if value is not None and not value.startswith(("data:", "#")):
                problems.append(f"<{e.tag} {name}={value!r}>")
        if "style" in e.attrs and "url(" in e.attrs["style"]:
            problems.append(f"<{e.tag} style={e.attrs['style']!r}>")
    styles = "".join(page.styles)
    if "@import" in styles:
        problems.append("@import in a style")
    if not textual:
        return problems
    problems += [
        f"url({m.group(1)[:40]}"
        for m in re.finditer(r"url\(\s*['\"]?([^)]*)", text)
        if not m.group(1).startswith("data:")
    ]
    problems += [f"an attribute naming {m.group(0)}" for m in re.finditer(r"(?:src|href)\s*=\s*['\"]?\s*https?:", text)]
    return problems


def usage_of(element: Element) -> dict[str, Any]:
    a = element.attrs
    return {
        "cache_read_input_tokens": int(a["data-read"]),
        "cache_write_5m_tokens": int(a["data-write-5m"]),
        "cache_write_1h_tokens": int(a["data-write-1h"]),
        "input_tokens": int(a["data-fresh"]),
        "output_tokens": int(a["data-output"]),
    }

"""``foldline report SOURCE --html FILE`` and ``foldline inspect PATH --html FILE``.

``add_report_arguments(parser)`` / ``run_report(args, out, err)`` are the
report subcommand; :func:`run_inspect_html` is what ``foldline inspect`` runs
when given ``--html``. Exit 0 when the page was written, 1 when the source is
malformed, 2 on bad input (no such source, a file of another kind, an unknown
branch, an output that cannot be written).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from runtime.display.sources import BenchSource, MalformedSource, ReportSourceError, load_source

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _fail(err: TextIO, message: str, code: int) -> int:
    print(f"foldline: {message}", file=err)
    return code


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", help="a run's store (run --store), a signals file (run --signals) or bench --json output"
    )
    parser.add_argument(
        "--html", metavar="FILE.html", required=True, help="write the report as one self-contained HTML file"
    )


def write_page(path: str, page: str, err: TextIO) -> int:
    try:
        Path(path).write_text(page, encoding="utf-8")
    except OSError as exc:
        return _fail(err, f"--html {path}: cannot write ({exc.strerror or exc})", EXIT_BAD_INPUT)
    print(f"foldline: wrote {path} ({len(page.encode('utf-8')):,} bytes)", file=err)
    return EXIT_OK


def run_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Read the source, draw it, write the page."""
    from runtime.display.page import bench_page, run_page

    try:
        source = load_source(args.source)
    except MalformedSource as exc:
        return _fail(err, str(exc), EXIT_FAILED)
    except ReportSourceError as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    page = bench_page(source.document) if isinstance(source, BenchSource) else run_page(source)
    return write_page(args.html, page, err)


def add_inspect_html_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html",
        metavar="FILE.html",
        help="write the branch's view (every branch without --branch) as a self-contained HTML file",
    )


def run_inspect_html(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``foldline inspect PATH [--branch B] --html FILE``: the branch view drawing of the report, on its own."""
    from runtime.display.page import branches_page
    from runtime.display.sources import branch_facts_of
    from runtime.store.errors import NotAStore, StoreCorrupt
    from runtime.store.reader import StoreReader

    label = os.fspath(args.path)
    try:
        reader = StoreReader(label)
    except NotAStore as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    with reader:
        try:
            facts = branch_facts_of(reader)
        except StoreCorrupt as exc:
            return _fail(err, f"{label}: malformed store: {exc}", EXIT_FAILED)
    chosen = facts
    if args.branch is not None:
        chosen = tuple(f for f in facts if f.picture.branch_id == args.branch)
        if not chosen:
            by_node = tuple(f for f in facts if f.picture.node_id == args.branch)
            if len(by_node) != 1:
                known = ", ".join(sorted({f.picture.node_id for f in facts if f.picture.node_id})) or "none"
                what = "several branches" if by_node else "no branch or node"
                return _fail(err, f"{label}: {args.branch!r} names {what}; nodes: {known}", EXIT_BAD_INPUT)
            chosen = by_node
    return write_page(args.html, branches_page(label, chosen), err)

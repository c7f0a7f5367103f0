"""Regenerates the README's screenshots from the shipped scenarios: ``python scripts/screenshots.py``.

For each picture: run the scenario with a store (``foldline run --store``), draw the report
(``foldline report --html``, or ``foldline inspect --branch --html`` for a branch's view), then
screenshot the page with headless Chromium (Debian's ``chromium`` package; ``CHROMIUM`` names
another binary). Prints each picture with the run's figures (requests, folds), so the README's
words can be checked against a fresh run. Nothing is downloaded; a missing Chromium is said
and the script exits 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
WINDOW = "1000,1400"


@attrs.frozen
class Picture:
    """One screenshot: the scenario it is drawn from, the file it goes to, and the branch (None: the report)."""

    scenario: str
    out: str
    branch: str | None = None


PICTURES = (
    Picture("scenarios/fold.toml", "docs/report-fold.png"),
    Picture("scenarios/quickstart.toml", "docs/report-quickstart.png"),
    Picture("scenarios/fold.toml", "docs/inspect-branch.png", branch="reader"),
)


WORK = "build/screenshots"
"""Where the runs are stored while the pictures are drawn (relative, so no machine path shows on a page)."""


def foldline(*args: str) -> None:
    """Run the foldline command line of this checkout (the interpreter running this script)."""
    subprocess.run([sys.executable, "-m", "runtime.cli", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        print("screenshots: no chromium on PATH (Debian: apt-get install chromium); set CHROMIUM", file=sys.stderr)
        raise SystemExit(2)
    return found


def screenshot(browser: str, page: Path, out: Path) -> None:
    """Headless Chromium's picture of ``page`` at the README's window size."""
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # run as root in a container, Chromium refuses its sandbox
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={out}",
            f"--window-size={WINDOW}",
            page.as_uri(),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> int:
    browser = chromium()
    work = Path(WORK)
    shutil.rmtree(ROOT / work, ignore_errors=True)
    (ROOT / work).mkdir(parents=True)
    try:
        stores: dict[str, tuple[Path, dict]] = {}
        for picture in PICTURES:
            if picture.scenario not in stores:
                name = Path(picture.scenario).stem
                store, report = work / f"{name}.sqlite3", work / f"{name}.json"
                foldline("run", picture.scenario, "--store", str(store), "--report", str(report), "--quiet")
                stores[picture.scenario] = (store, json.loads((ROOT / report).read_text(encoding="utf-8")))
            store, report = stores[picture.scenario]
            page = ROOT / work / (Path(picture.out).stem + ".html")
            if picture.branch is None:
                foldline("report", str(store), "--html", str(page))
            else:
                foldline("inspect", str(store), "--branch", picture.branch, "--html", str(page))
            screenshot(browser, page, ROOT / picture.out)
            print(
                f"{picture.out}: {picture.scenario}"
                + (f", branch {picture.branch}" if picture.branch else "")
                + f": {report['requests']} requests, {report['folds']} folds, "
                f"{report['bytes_unrecoverable']} bytes unrecoverable"
            )
    finally:
        shutil.rmtree(ROOT / work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Mutation testing of foldline's pure core, module by module, with mutmut.

Each group below names the source files it mutates and the test files that cover
them. For each group the script builds a scratch copy of the repository under
``build/mutation/<group>/`` whose pyproject.toml carries a ``[tool.mutmut]`` table
for that group only, runs ``mutmut run`` there at low priority, and reads the
verdicts back. mutmut then narrows further: each mutant runs only the tests of
the group that call the mutated function.

Mutants listed in ``scripts/mutation/equivalent.toml`` (with the reason they
are equivalent or harmless) are left out of the score; a listed mutant whose
diff no longer contains the recorded line is reported as stale.

Usage (from the repository root, with the ``mutation`` extra installed):

    python scripts/mutation/run.py                 # every group, niceness 15
    python scripts/mutation/run.py fold ceiling    # some groups
    python scripts/mutation/run.py --report-only   # re-read the last verdicts
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "mutation"
EQUIVALENT = Path(__file__).resolve().parent / "equivalent.toml"
CAUGHT = ("killed", "timeout", "caught by type check")
NOT_RUN = "not checked"  # a run stopped before it reached the mutant
COPIED = ("runtime", "actors", "signals", "tests", "scenarios", "docs", "README.md", "pyproject.toml")


@attrs.frozen
class Group:
    name: str
    mutate: tuple[str, ...]
    tests: tuple[str, ...]


GROUPS: tuple[Group, ...] = (
    Group(
        "calibration",
        ("runtime/calibration.py",),
        ("tests/test_calibration.py", "tests/test_ceiling.py"),
    ),
    Group(
        "ceiling",
        ("runtime/ceiling.py",),
        ("tests/test_ceiling.py", "tests/test_send_ceiling.py"),
    ),
    Group(
        "measure",
        ("runtime/measure.py",),
        ("tests/test_measure.py", "tests/test_measure_compiled.py", "tests/test_ceiling.py"),
    ),
    Group(
        "compiler",
        ("runtime/compiler.py",),
        (
            "tests/test_compiler.py",
            "tests/test_measure_compiled.py",
            "tests/test_store_codec.py",
            "tests/test_store_pairing.py",
        ),
    ),
    Group(
        "sim_cache_engine",
        ("runtime/sim/cache_engine.py",),
        ("tests/test_sim_cache_engine.py",),
    ),
    Group(
        "cache",
        ("runtime/cache/*",),
        (
            "tests/test_cache_apply.py",
            "tests/test_cache_certificates.py",
            "tests/test_cache_ledger.py",
            "tests/test_cache_placement.py",
            "tests/test_cache_properties.py",
            "tests/test_cache_reach.py",
            "tests/test_cache_rewrites.py",
            "tests/test_cache_tail_skip.py",
            "tests/test_cache_verdict.py",
            "tests/test_caching_send.py",
        ),
    ),
    Group(
        "fold",
        ("runtime/fold/*",),
        (
            "tests/test_fold_audit_bench.py",
            "tests/test_fold_clip.py",
            "tests/test_fold_formats.py",
            "tests/test_fold_planner.py",
            "tests/test_fold_properties.py",
            "tests/test_fold_settings.py",
            "tests/test_context_tool.py",
            "tests/test_projection_bound.py",
            "tests/test_reader_policy.py",
            "tests/test_recovery.py",
            "tests/test_fold_compaction.py",
            "tests/test_fold_summary_policy.py",
        ),
    ),
)


def _toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def prepare(group: Group, source_root: Path, fresh: bool) -> Path:
    """Copy the repository into the group's scratch directory and write its mutmut table."""
    work = WORK / group.name
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache")
    for name in COPIED:
        source, target = source_root / name, work / name
        if target.is_dir():
            shutil.rmtree(target)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target)
    pyproject = (source_root / "pyproject.toml").read_text(encoding="utf-8")
    if "[tool.mutmut]" in pyproject:
        raise SystemExit("pyproject.toml already has a [tool.mutmut] table; the groups here own that table")
    table = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["runtime"]',
            f"only_mutate = {_toml_list(group.mutate)}",
            'also_copy = ["actors", "signals", "scenarios", "docs", "README.md"]',
            f"pytest_add_cli_args_test_selection = {_toml_list(group.tests)}",
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "--hypothesis-profile=mutation"]',
            "use_git_change_detection = false",
            "",
        ]
    )
    (work / "pyproject.toml").write_text(pyproject + table, encoding="utf-8")
    return work


def run_mutmut(work: Path, max_children: int, names: list[str] | None = None) -> None:
    """Run mutmut in the group's directory (only the named mutants when given); its progress goes to mutmut.log."""
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *(names or [])]
    shown = " ".join(command[1:6]) + (f" and {len(names)} mutant names" if names else "")
    print(f"[{work.name}] {shown} (log: {work / 'mutmut.log'})", flush=True)
    with (work / "mutmut.log").open("w", encoding="utf-8") as log:
        completed = subprocess.run(command, cwd=work, stdout=log, stderr=subprocess.STDOUT, check=False)
    tail = (work / "mutmut.log").read_text(encoding="utf-8", errors="replace").splitlines()[-3:]
    print("\n".join(line.rsplit("\r", 1)[-1][-200:] for line in tail), flush=True)
    if completed.returncode != 0:
        raise SystemExit(f"[{work.name}] mutmut run exited with {completed.returncode}; see {work / 'mutmut.log'}")


def verdicts(work: Path) -> dict[str, str]:
    """Every mutant's status as mutmut recorded it, read from its .meta files.

    A mutant caught by an earlier run whose verdict mutmut dropped when a later
    ``--survivors`` run changed the group's test list stays caught (the tests
    only grow): those verdicts are kept in ``caught-earlier.json``.
    """
    from mutmut.stats import status_by_exit_code

    found: dict[str, str] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for name, exit_code in data.get("exit_code_by_key", {}).items():
            found[name] = status_by_exit_code[exit_code]
    earlier = work / "caught-earlier.json"
    if earlier.exists():
        for name, status in json.loads(earlier.read_text(encoding="utf-8")).items():
            if found.get(name) == NOT_RUN:
                found[name] = status
    return found


def diffs(work: Path, names: list[str]) -> dict[str, str]:
    """The changed lines of each named mutant, read by one mutmut process in the group's directory."""
    if not names:
        return {}
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant\n"
        "out = {}\n"
        "for name in json.load(sys.stdin):\n"
        "    diff = get_diff_for_mutant(name, path=find_mutant(name).path)\n"
        "    out[name] = '\\n'.join(l for l in diff.splitlines() if l[:1] in '+-' and l[:3] not in ('+++', '---'))\n"
        "print(json.dumps(out))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=work, input=json.dumps(names), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise SystemExit(f"[{work.name}] reading mutant diffs failed: {completed.stderr[-2000:]}")
    found: dict[str, str] = json.loads(completed.stdout.strip().splitlines()[-1])
    return found


def load_equivalent() -> dict[str, dict[str, str]]:
    if not EQUIVALENT.exists():
        return {}
    data = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8"))
    listed: dict[str, dict[str, str]] = {}
    for index, entry in enumerate(data.get("mutant", [])):
        for key in ("name", "line", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise SystemExit(
                    f"{EQUIVALENT.name}: mutant[{index}].{key} must be a non-empty string, got {entry.get(key)!r}"
                )
        listed[entry["name"]] = entry
    return listed


def report(group: Group, work: Path, listed: dict[str, dict[str, str]], show: bool) -> dict[str, object]:
    found = verdicts(work)
    counts = Counter(found.values())
    survivors = sorted(name for name, status in found.items() if status not in (*CAUGHT, NOT_RUN))
    equivalent: list[str] = []
    stale: list[str] = []
    unexplained: list[str] = []
    changed = diffs(work, survivors)
    for name in survivors:
        entry = listed.get(name)
        if entry is None:
            unexplained.append(name)
        elif entry["line"].strip() in changed[name]:
            equivalent.append(name)
        else:
            stale.append(name)
    scored = len(found) - counts[NOT_RUN] - len(equivalent)
    killed = sum(counts[status] for status in CAUGHT)
    score = 100.0 * killed / scored if scored else 100.0
    summary = {
        "group": group.name,
        "mutants": len(found),
        "not_run": counts[NOT_RUN],
        "killed": killed,
        "equivalent": len(equivalent),
        "unexplained": len(unexplained),
        "stale": len(stale),
        "score": round(score, 1),
        "statuses": dict(counts),
    }
    print(json.dumps(summary), flush=True)
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for name in unexplained:
        print(f"  survived: {name} ({found[name]})")
        if show:
            print(changed[name])
    for name in stale:
        print(f"  stale equivalent entry (its line is no longer in the diff): {name}")
    return summary


def main(argv: list[str] | None = None) -> int:
    names = [group.name for group in GROUPS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", choices=[[], *names], metavar="GROUP", help=f"any of {', '.join(names)}")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run in parallel (default 2)")
    parser.add_argument("--nice", type=int, default=15, help="niceness added to this process (default 15)")
    parser.add_argument("--keep", action="store_true", help="reuse the last run's verdicts for unchanged functions")
    parser.add_argument("--report-only", action="store_true", help="only read back the last run's verdicts")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="keep the last run and run again only its survivors, against the current tests (after sharpening them)",
    )
    parser.add_argument("--show", action="store_true", help="print the diff of every unexplained survivor")
    parser.add_argument("--source", type=Path, default=ROOT, help="tree to copy and mutate (default: this checkout)")
    arguments = parser.parse_args(argv)
    chosen = [group for group in GROUPS if not arguments.groups or group.name in arguments.groups]
    if arguments.nice:
        os.nice(arguments.nice)
    listed = load_equivalent()
    summaries = []
    for group in chosen:
        if arguments.report_only:
            work = WORK / group.name
            if not (work / "mutants").exists():
                raise SystemExit(f"[{group.name}] no verdicts under {work}; run without --report-only first")
        elif arguments.survivors:
            work = WORK / group.name
            if not (work / "mutants").exists():
                raise SystemExit(f"[{group.name}] no earlier run under {work} to take the survivors of")
            previous = verdicts(work)
            caught = {name: status for name, status in previous.items() if status in CAUGHT}
            (work / "caught-earlier.json").write_text(json.dumps(caught, indent=1), encoding="utf-8")
            again = [name for name, status in previous.items() if status not in (*CAUGHT, NOT_RUN)]
            prepare(group, arguments.source.resolve(), fresh=False)
            if again:
                run_mutmut(work, arguments.max_children, again)
        else:
            work = prepare(group, arguments.source.resolve(), fresh=not arguments.keep)
            if not arguments.keep:
                (work / "caught-earlier.json").unlink(missing_ok=True)
            run_mutmut(work, arguments.max_children)
        summaries.append(report(group, work, listed, arguments.show))
    return 0 if all(summary["unexplained"] == 0 and summary["stale"] == 0 for summary in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())

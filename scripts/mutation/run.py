"""Mutation testing of foldline's pure core, module by module, with mutmut.

Each group below lists its modules, and each module the test files that cover
it (its unit and property tests, not the end-to-end suite). For each module the
script builds a scratch copy of the repository under
``build/mutation/<group>/<module>/`` whose pyproject.toml carries a
``[tool.mutmut]`` table for that module only, runs ``mutmut run`` there at the
lowest priority, and reads the verdicts back. mutmut then narrows further: each
mutant runs only the module's tests that call the mutated function, ordered by
the plugin ``fastest_first.py`` so that the cheapest killing test runs first.

Mutants listed in ``scripts/mutation/equivalent.toml`` (with the reason they
are equivalent or harmless) are left out of the score and run no test; a
listed entry is stale when its line is no longer in its mutant's diff, its
mutant no longer exists or is now caught, or its module is no longer mutated.

Usage (from the repository root, with the ``mutation`` extra installed):

    python scripts/mutation/run.py                             # every group, niceness 19
    python scripts/mutation/run.py fold cache                  # some groups
    python scripts/mutation/run.py --module runtime/fold/cost.py   # one module (repeatable)
    python scripts/mutation/run.py --report-only --show fold   # re-read the last verdicts
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "mutation"
EQUIVALENT = Path(__file__).resolve().parent / "equivalent.toml"
PLUGIN = Path(__file__).resolve().parent / "fastest_first.py"
SKIPPED = "mutation-equivalents.txt"  # the listed equivalents of a module, which the plugin runs no test for
CAUGHT = ("killed", "timeout", "caught by type check")
NOT_RUN = "not checked"  # a run stopped before it reached the mutant
COPIED = ("runtime", "actors", "signals", "tests", "scenarios", "docs", "README.md", "pyproject.toml")


@attrs.frozen
class Module:
    """One mutated source file and the test files that cover it (unit and property tests, not end-to-end runs)."""

    path: str
    tests: tuple[str, ...]

    @property
    def stem(self) -> str:
        return Path(self.path).stem

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


@attrs.frozen
class Group:
    """Modules mutated together; ``pins`` (the group's tests written against its survivors) run for every module."""

    name: str
    modules: tuple[Module, ...]
    pins: tuple[str, ...] = ()

    def tests(self, module: Module) -> tuple[str, ...]:
        return self.pins + tuple(test for test in module.tests if test not in self.pins)


def _t(*names: str) -> tuple[str, ...]:
    return tuple(f"tests/test_{name}.py" for name in names)


# The cache modules' own tests; the property file runs last for a mutant (fastest_first), so a
# mutant a unit test kills never waits for it.
_CACHE_CORE = _t("cache_certificates", "cache_placement", "cache_ledger", "cache_verdict", "cache_end_to_end")
# The planner's tests: every stage of a fold goes through plan_run, plan_values and target.
_PLANNER = _t(
    "fold_planner",
    "fold_target",
    "fold_compaction",
    "fold_clip",
    "recovery",
    "fold_audit_bench",
    "fold_summary_ceiling",
    "fold_properties",
)

GROUPS: tuple[Group, ...] = (
    Group("calibration", (Module("runtime/measuring/calibration.py", _t("calibration", "ceiling")),)),
    Group("ceiling", (Module("runtime/decision/ceiling.py", _t("ceiling", "send_ceiling")),)),
    Group(
        "measure",
        (
            Module(
                "runtime/measuring/measure.py",
                _t("measure", "measure_compiled", "ceiling", "measure_mutants", "measure_splice", "measure_mutants_2")
                + _t("measure_advance", "local_junctions", "incremental_measure"),
            ),
            Module(
                "runtime/measuring/measure_splice.py",
                _t("measure_mutants_2", "measure_splice", "fold_planner", "fold_target"),
            ),
        ),
    ),
    Group(
        "compiler",
        (
            Module(
                "runtime/request/compiler.py",
                _t("compiler", "measure_compiled", "store_codec", "store_pairing")
                # Request.prepared, image_tokens and context_digest are reached by these:
                + _t("incremental_measure", "thinking_rule", "vision", "chat_image_measure", "mutants_6"),
            ),
        ),
    ),
    Group("sim_cache_engine", (Module("runtime/sim/cache_engine.py", _t("sim_cache_engine")),)),
    Group(
        "cache",
        (
            Module("runtime/cache/apply.py", _t("cache_apply", "cache_end_to_end", "cache_properties")),
            Module(
                "runtime/cache/blocks.py",
                _t("cache_apply", "cache_reach", "cache_rewrites", "thinking_rule")
                + _CACHE_CORE
                + _t("cache_properties"),
            ),
            Module(
                "runtime/cache/certificates.py",
                _t("cache_reach", "thinking_rule", "incremental_measure") + _CACHE_CORE + _t("cache_properties"),
            ),
            Module("runtime/cache/ledger.py", _CACHE_CORE + _t("store_codec", "cache_properties")),
            Module("runtime/cache/marks.py", _t("cache_apply") + _CACHE_CORE + _t("cache_properties")),
            Module("runtime/cache/placement.py", _CACHE_CORE + _t("cache_tail_skip", "cache_properties")),
            Module("runtime/request/prepared.py", _t("thinking_rule", "incremental_measure", "vision", "caching_send")),
            Module("runtime/cache/reach.py", _t("cache_reach", "cache_placement", "cache_properties")),
            Module("runtime/cache/record.py", _CACHE_CORE + _t("cache_properties", "caching_send")),
            Module("runtime/cache/rewrites.py", _t("cache_rewrites", "engine_fold", "caching_send")),
            Module("runtime/cache/rows.py", _CACHE_CORE + _t("store_codec", "cache_properties")),
            Module(
                "runtime/cache/tail_skip.py",
                _t("cache_tail_skip", "cache_placement", "cache_end_to_end", "cache_properties"),
            ),
            Module("runtime/cache/verdict.py", _CACHE_CORE),
        ),
        _t("cache_mutants", "cache_mutants_2", "cache_mutants_3"),
    ),
    Group(
        "fold",
        (
            Module("runtime/fold/audit.py", _t("fold_audit_bench", "fold_summary_ceiling", "engine_fold")),
            Module(
                "runtime/fold/bodies.py",
                _t("fold_clip", "projection_bound", "fold_summary_policy", "recovery", "context_tool"),
            ),
            Module("runtime/fold/clip.py", _PLANNER + _t("mutants_6")),
            Module("runtime/fold/context_tool.py", _t("context_tool")),
            Module(
                "runtime/fold/cost.py",
                _t("fold_cost_mutants", "fold_cost", "fold_cost_recalls", "bench_cost_strategy", "fold_mutants_5"),
            ),
            Module(
                "runtime/fold/formats.py",
                _t(
                    "fold_formats",
                    "reader_policy",
                    "fold_clip",
                    "projection_bound",
                    "fold_planner",
                    "recovery",
                    "fold_properties",
                ),
            ),
            Module("runtime/fold/marks.py", _t("fold_planner", "context_tool", "turn_invariants", "fold_properties")),
            Module("runtime/fold/measurer.py", _PLANNER + _t("measure_splice", "fold_mutants_5")),
            Module("runtime/fold/notes.py", _PLANNER + _t("engine_fold", "fold_determinism")),
            Module("runtime/fold/plan_run.py", _PLANNER),
            Module("runtime/fold/plan_values.py", _PLANNER + _t("engine_fold")),
            Module("runtime/fold/planner.py", _PLANNER),
            Module(
                "runtime/fold/projection.py",
                _t("projection_bound", "fold_summary_policy", "context_tool") + _PLANNER + _t("mutants_6"),
            ),
            Module("runtime/fold/protected.py", _t("fold_summary_policy", "turn_invariants") + _PLANNER),
            Module(
                "runtime/fold/recovery.py", _t("recovery", "context_tool", "projection_bound", "fold_clip", "vision")
            ),
            Module("runtime/fold/settings.py", _t("fold_settings", "fold_planner", "fold_target")),
            Module("runtime/fold/target.py", _PLANNER),
            Module("runtime/fold/units.py", _t("projection_bound") + _PLANNER),
        ),
        _t("fold_mutants", "fold_mutants_2", "fold_mutants_3", "fold_mutants_4"),
    ),
)


def _toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def prepare(group: Group, module: Module, source_root: Path, fresh: bool, skip: list[str]) -> Path:
    """Copy the repository into the module's scratch directory and write its mutmut table."""
    work = WORK / group.name / module.stem
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
    shutil.copy2(PLUGIN, work / PLUGIN.name)
    (work / SKIPPED).write_text("".join(f"{name}\n" for name in skip), encoding="utf-8")
    pyproject = (source_root / "pyproject.toml").read_text(encoding="utf-8")
    if "[tool.mutmut]" in pyproject:
        raise SystemExit("pyproject.toml already has a [tool.mutmut] table; the groups here own that table")
    pytest_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", PLUGIN.stem, "--hypothesis-profile=mutation"]
    table = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["runtime"]',
            f"only_mutate = {_toml_list([module.path])}",
            f"also_copy = {_toml_list(['actors', 'signals', 'scenarios', 'docs', 'README.md', PLUGIN.name, SKIPPED])}",
            f"pytest_add_cli_args_test_selection = {_toml_list(group.tests(module))}",
            f"pytest_add_cli_args = {_toml_list(pytest_args)}",
            "use_git_change_detection = false",
            "",
        ]
    )
    (work / "pyproject.toml").write_text(pyproject + table, encoding="utf-8")
    return work


def run_mutmut(work: Path, max_children: int, names: list[str] | None = None) -> None:
    """Run mutmut in the module's directory (only the named mutants when given); its progress goes to mutmut.log."""
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *(names or [])]
    shown = " ".join(command[1:6]) + (f" and {len(names)} mutant names" if names else "")
    print(f"[{work.parent.name}/{work.name}] {shown} (log: {work / 'mutmut.log'})", flush=True)
    (work / "mutants" / "mutation-killers.txt").unlink(missing_ok=True)
    with (work / "mutmut.log").open("w", encoding="utf-8") as log:
        completed = subprocess.run(command, cwd=work, stdout=log, stderr=subprocess.STDOUT, check=False)
    if completed.returncode != 0:
        tail = (work / "mutmut.log").read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
        print("\n".join(line.rsplit("\r", 1)[-1][-200:] for line in tail), flush=True)
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
        data = _read_meta(meta)
        for name, exit_code in data.get("exit_code_by_key", {}).items():
            found[name] = status_by_exit_code[exit_code]
    earlier = work / "caught-earlier.json"
    if earlier.exists():
        for name, status in json.loads(earlier.read_text(encoding="utf-8")).items():
            if found.get(name) == NOT_RUN:
                found[name] = status
    return found


def _read_meta(meta: Path) -> dict[str, Any]:
    """A .meta file of mutmut's, read again while a running mutmut has it half written."""
    for _attempt in range(5):
        try:
            found: dict[str, Any] = json.loads(meta.read_text(encoding="utf-8"))
            return found
        except json.JSONDecodeError:
            time.sleep(1.0)
    raise SystemExit(f"{meta}: not readable JSON after five tries")


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
    for _attempt in range(5):  # a running mutmut rewrites its .meta files: a read may meet one half written
        completed = subprocess.run(
            [sys.executable, "-c", script],
            cwd=work,
            input=json.dumps(names),
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode == 0 or "JSONDecodeError" not in completed.stderr:
            break
        time.sleep(1.0)
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


def report(module: Module, work: Path, listed: dict[str, dict[str, str]], show: bool) -> dict[str, object]:
    """One module's verdicts against the equivalents list; printed as one JSON line and kept in summary.json."""
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
    # An entry of this module whose mutant no longer exists, or is now caught, is stale too (unless the run
    # stopped before reaching it).
    gone = sorted(
        name for name in listed if _module_of(name) == module.dotted and (name not in found or found[name] in CAUGHT)
    )
    stale.extend(gone)
    killed = sum(counts[status] for status in CAUGHT)
    scored = len(found) - counts[NOT_RUN] - len(equivalent)
    timing = json.loads((work / "timing.json").read_text(encoding="utf-8")) if (work / "timing.json").exists() else {}
    summary: dict[str, object] = {
        "module": module.path,
        "mutants": len(found),
        "not_run": counts[NOT_RUN],
        "killed": killed,
        "equivalent": len(equivalent),
        "unexplained": len(unexplained),
        "stale": len(stale),
        "score": round(100.0 * killed / scored, 1) if scored else 100.0,
        "wall_seconds": timing.get("wall_seconds"),
        "cpu_seconds": timing.get("cpu_seconds"),
        **{key: value for key, value in timing.items() if key.startswith("survivors_")},
        "statuses": dict(counts),
        "survivors": unexplained,
    }
    print(json.dumps({key: value for key, value in summary.items() if key != "survivors"}), flush=True)
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for name in unexplained:
        print(f"  survived: {name} ({found[name]})")
        if show:
            print(changed[name])
    for name in stale:
        why = "no such mutant" if name not in found else "now caught" if found[name] in CAUGHT else "line changed"
        print(f"  stale equivalent entry ({why}): {name}")
    return summary


def _module_of(mutant: str) -> str:
    """The dotted module of a mutant name such as ``runtime.fold.cost.x_choose__mutmut_3``."""
    return mutant.split(".x_", 1)[0].split(".x\N{LATIN LETTER LATERAL CLICK}", 1)[0]


def group_total(group: Group, summaries: list[dict[str, object]], seconds: float) -> dict[str, object]:
    """The group's line: the modules' counts added up; the score over every scored mutant of the group."""
    keys = ("mutants", "not_run", "killed", "equivalent", "unexplained", "stale")
    total: dict[str, object] = {"group": group.name, "modules": len(summaries)}
    for key in keys:
        total[key] = sum(int(str(summary[key])) for summary in summaries)
    scored = int(str(total["mutants"])) - int(str(total["not_run"])) - int(str(total["equivalent"]))
    total["score"] = round(100.0 * int(str(total["killed"])) / scored, 1) if scored else 100.0
    total["wall_seconds"] = round(seconds, 1)
    total["cpu_seconds"] = round(sum(float(str(summary["cpu_seconds"] or 0.0)) for summary in summaries), 1)
    print(json.dumps(total), flush=True)
    (WORK / group.name).mkdir(parents=True, exist_ok=True)
    (WORK / group.name / "summary.json").write_text(json.dumps(total, indent=2) + "\n", encoding="utf-8")
    return total


def run_module(group: Group, module: Module, arguments: argparse.Namespace) -> Path:
    """Run (or re-read) one module's mutants as the options say; returns its scratch directory."""
    work = WORK / group.name / module.stem
    if arguments.report_only:
        if not (work / "mutants").exists():
            raise SystemExit(f"[{module.path}] no verdicts under {work}; run without --report-only first")
        return work
    started, cpu = time.monotonic(), _children_cpu()
    listed = sorted(name for name in load_equivalent() if _module_of(name) == module.dotted)
    skip = [] if arguments.recheck_equivalents else listed
    if arguments.survivors:
        if not (work / "mutants").exists():
            raise SystemExit(f"[{module.path}] no earlier run under {work} to take the survivors of")
        previous = verdicts(work)
        caught = {name: status for name, status in previous.items() if status in CAUGHT}
        (work / "caught-earlier.json").write_text(json.dumps(caught, indent=1), encoding="utf-8")
        again = [name for name, status in previous.items() if status not in (*CAUGHT, NOT_RUN)]
        prepare(group, module, arguments.source.resolve(), fresh=False, skip=skip)
        if again:
            run_mutmut(work, arguments.max_children, again)
    else:
        prepare(group, module, arguments.source.resolve(), fresh=not arguments.keep, skip=skip)
        if not arguments.keep:
            (work / "caught-earlier.json").unlink(missing_ok=True)
        run_mutmut(work, arguments.max_children)
    wall, cpu = round(time.monotonic() - started, 1), round(_children_cpu() - cpu, 1)
    path = work / "timing.json"
    timing = (
        json.loads(path.read_text(encoding="utf-8"))
        if path.exists() and (arguments.keep or arguments.survivors)
        else {}
    )
    if arguments.survivors:  # the full run's times stay; a survivors run is timed beside them
        timing.update(survivors_wall_seconds=wall, survivors_cpu_seconds=cpu)
    else:  # a fresh run, or one continued with --keep (its times add up)
        timing.update(
            wall_seconds=round(timing.get("wall_seconds", 0.0) + wall, 1),
            cpu_seconds=round(timing.get("cpu_seconds", 0.0) + cpu, 1),
        )
    path.write_text(json.dumps(timing) + "\n", encoding="utf-8")
    return work


def _children_cpu() -> float:
    """CPU seconds (user and system) of every finished child process: mutmut and the workers it waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _chosen(arguments: argparse.Namespace) -> list[tuple[Group, list[Module]]]:
    wanted = {Path(path).as_posix() for path in arguments.module}
    known = {module.path for group in GROUPS for module in group.modules}
    unknown = sorted(wanted - known)
    if unknown:
        raise SystemExit(
            f"--module {unknown[0]!r} is not a mutated module; expected one of: {', '.join(sorted(known))}"
        )
    chosen = []
    for group in GROUPS:
        if arguments.groups and group.name not in arguments.groups:
            continue
        modules = [module for module in group.modules if not wanted or module.path in wanted]
        if modules:
            chosen.append((group, modules))
    return chosen


def main(argv: list[str] | None = None) -> int:
    names = [group.name for group in GROUPS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", choices=[[], *names], metavar="GROUP", help=f"any of {', '.join(names)}")
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="PATH",
        help="only this module (repeatable), e.g. runtime/fold/cost.py",
    )
    parser.add_argument("--max-children", type=int, default=2, help="mutants run in parallel (default 2)")
    parser.add_argument("--nice", type=int, default=19, help="niceness added to this process (default 19)")
    parser.add_argument("--keep", action="store_true", help="reuse the last run's verdicts for unchanged functions")
    parser.add_argument("--report-only", action="store_true", help="only read back the last run's verdicts")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="keep the last run and run again only its survivors, against the current tests (after sharpening them)",
    )
    parser.add_argument("--show", action="store_true", help="print the diff of every unexplained survivor")
    parser.add_argument(
        "--recheck-equivalents",
        action="store_true",
        help="run the tests for the mutants listed in equivalent.toml too (by default none is run for them)",
    )
    parser.add_argument("--source", type=Path, default=ROOT, help="tree to copy and mutate (default: this checkout)")
    arguments = parser.parse_args(argv)
    chosen = _chosen(arguments)
    if arguments.nice:
        os.nice(arguments.nice)
    listed = load_equivalent()
    known = {module.dotted for group in GROUPS for module in group.modules}
    orphans = sorted(name for name in listed if _module_of(name) not in known)
    for name in orphans:
        print(f"  stale equivalent entry (its module is not mutated here): {name}")
    clean = not orphans
    for group, modules in chosen:
        started = time.monotonic()
        summaries = []
        for module in modules:
            if arguments.report_only and not (WORK / group.name / module.stem / "mutants").exists():
                print(json.dumps({"module": module.path, "mutants": None, "note": "never run"}), flush=True)
                clean = False
                continue
            work = run_module(group, module, arguments)
            summaries.append(report(module, work, listed, arguments.show))
        if len(summaries) == len(group.modules):
            seconds = sum(float(str(summary["wall_seconds"] or 0.0)) for summary in summaries)
            total = group_total(group, summaries, seconds if arguments.report_only else time.monotonic() - started)
            clean = clean and total["unexplained"] == 0 and total["stale"] == 0
        clean = clean and all(summary["unexplained"] == 0 and summary["stale"] == 0 for summary in summaries)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())

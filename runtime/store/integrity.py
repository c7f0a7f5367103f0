"""What a store must still hold for a resume, a replay or a report to be believed (issue 28, items 6, 15, 16).

Pure functions over what a reader gives; no I/O.

- **Every stored input has a digest.** The run's meta (its scenario text and
  path, the provider kind, the ``--tools`` registry, the workspace root) is
  what a resume runs again and a replay rebuilds from; a flipped bit in it
  would change what runs (a ceiling of 20,000 read back as 60,000) with
  nothing to say so. :func:`inputs_digest` is written with the meta when the
  store is made; :func:`check_inputs` recomputes it on resume and replay and
  names the store and each input that no longer matches.
- **The workspace root is pinned.** :func:`root_meta` keeps the resolved
  ``[run] workspace`` directory; :func:`check_root` refuses a resume whose
  root is gone or resolves elsewhere (resumed from another directory), naming
  both.
- **Damage is the store's, not the user's file's.** :func:`stored_scenario_label`
  is the label a stored scenario is parsed under, so an error in it names the
  store.
- **A report agrees with the request rows.** :func:`check_events_cover_rows`
  refuses a report rebuilt from events that miss completed requests the store
  holds rows for (events deleted), rather than reporting fewer requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.store.errors import StoreCorrupt
from runtime.values.canonical import sha256_hex

INPUTS_DIGEST_KEY = "inputs_sha256"
"""The meta key holding the SHA-256 of every other stored input (a JSON object: key -> hex digest)."""
WORKSPACE_ROOT_KEY = "workspace_root"
"""The meta key holding the run's resolved workspace root (absent: the run has no workspace)."""
_NOT_INPUTS = frozenset(("schema_version", INPUTS_DIGEST_KEY))
_SHOWN = 5


def inputs_digest(meta: Mapping[str, str]) -> str:
    """The digest record of ``meta``'s inputs: each key's SHA-256, as canonical JSON."""
    digests = {key: sha256_hex(value.encode("utf-8")) for key, value in meta.items() if key not in _NOT_INPUTS}
    return json.dumps(digests, sort_keys=True, separators=(",", ":"))


def with_inputs_digest(meta: Mapping[str, str]) -> dict[str, str]:
    """``meta`` with its digest record added (what a new store writes)."""
    return {**meta, INPUTS_DIGEST_KEY: inputs_digest(meta)}


def check_inputs(meta: Mapping[str, str], label: str) -> None:
    """Refuse a store whose stored inputs do not match their digests, naming the store and each input."""
    if "scenario_text" not in meta:
        return  # no run's inputs in it (a store being made, or one holding no run): nothing to check
    recorded = meta.get(INPUTS_DIGEST_KEY)
    if recorded is None:
        raise StoreCorrupt(
            f"{label}: holds no digest of its stored inputs (meta {INPUTS_DIGEST_KEY!r}); its scenario and "
            "settings cannot be checked, so it is not resumed or replayed"
        )
    try:
        expected = json.loads(recorded)
    except ValueError:
        expected = None
    if not isinstance(expected, dict) or not all(isinstance(v, str) for v in expected.values()):
        raise StoreCorrupt(f"{label}: meta {INPUTS_DIGEST_KEY!r} is damaged: {recorded[:120]!r}")
    actual = json.loads(inputs_digest(meta))
    changed = sorted(k for k in set(expected) | set(actual) if expected.get(k) != actual.get(k))
    if changed:
        shown = ", ".join(repr(k) for k in changed[:_SHOWN]) + (" ..." if len(changed) > _SHOWN else "")
        raise StoreCorrupt(
            f"{label}: stored input {shown} does not match the digest kept when the run started "
            "(the store is damaged); it is not resumed or replayed"
        )


def stored_scenario_label(label: str, meta: Mapping[str, str]) -> str:
    """The label a stored scenario is parsed under: the store first, the file it was run from after."""
    return f"{label}: stored scenario (run from {meta.get('scenario_path', 'an unnamed file')})"


def root_meta(root: Path | None) -> dict[str, str]:
    """What a store keeps of a run's workspace root: its resolved path (nothing without a workspace)."""
    return {} if root is None else {WORKSPACE_ROOT_KEY: str(root.resolve())}


def check_root(meta: Mapping[str, str], resolved: Path | None, why_not: str | None, label: str) -> None:
    """Refuse a resume whose workspace root is gone or not the run's, naming both.

    ``resolved`` is the root the resume would read (None: none, with
    ``why_not`` saying why when the scenario names one).
    """
    stored = meta.get(WORKSPACE_ROOT_KEY)
    if stored is None:
        if resolved is not None:
            raise StoreCorrupt(f"{label}: the run had no workspace, but resuming it would read {resolved.resolve()}")
        return
    if not Path(stored).is_dir():
        raise StoreCorrupt(f"{label}: the run's workspace {stored} is gone; it cannot be resumed")
    here = None if resolved is None else str(resolved.resolve())
    if here != stored:
        now = here if here is not None else f"none ({why_not})"
        raise StoreCorrupt(
            f"{label}: the run's workspace is {stored}, but resuming from here it would be {now}; "
            "resume from the directory the run was started in"
        )


def check_events_cover_rows(rows: Sequence[Any], events: Sequence[Any], label: str) -> None:
    """Refuse to rebuild a report from events that miss completed requests the store holds rows for."""
    answered = {row.request_id for row in rows if row.usage}
    received = {event.request_id for event in events if event.type == "ResponseReceived"}
    missing = sorted(answered - received)
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (" ..." if len(missing) > _SHOWN else "")
        raise StoreCorrupt(
            f"{label}: its events record {len(received & answered)} of the {len(answered)} completed requests "
            f"its request rows hold (no ResponseReceived for {shown}); a report from the events would count "
            "fewer requests than were sent"
        )

"""A child's setup on a view it inherits: keep the emitter's stable segment, or replace it.

A spawned child (a dependent that inherits a view, a forked conversation)
starts from a clone of its emitter's view. Anthropic caches by prefix in the
order tools, system, messages: a child that brings its own system text or tool
list rewrites the stable segment, and everything its emitter cached after it is
lost. The profile's ``inherited_setup`` decides:

- ``"instruction"`` (default): the request keeps the emitter's tools and
  system text byte for byte (the tools its requests listed, the context tool
  included when its profile folds), and the clone takes the emitter's cache
  ledger, so its first request marks and reads what the emitter cached. The
  child's own system text, and the tools it may call when they differ from
  those listed, arrive as an instruction at the end of the inherited view
  (:func:`setup_text`), before its first instruction. A tool the child may not
  call stays listed (removing it would rewrite the segment) and a call to it
  gets an error result naming the tools it may call (:func:`not_permitted`).
  ``tool_choice`` is not used to restrict it: the API can only force one tool
  or none, and a changed ``tool_choice`` invalidates the cached messages. A
  tool the child has and its emitter lacks is listed after the emitter's: the
  tools segment changes then, and nothing is read from the emitter's cache.
- ``"own"``: the child's system text and tools replace the emitter's (the
  layout before this setting; its first request reads nothing its emitter cached).
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.branch import Branch
from runtime.config.profile import Profile
from runtime.fold.context_tool import CONTEXT_TOOL_NAME
from runtime.request.compiler import ToolSpec
from runtime.values.messages import Instruction

SETUP_HEADING = "Your setup from here on (it takes the place of the system text and tools above where they differ):"


def folds_with_tool(profile: Profile) -> bool:
    """Whether ``profile`` offers the context tool (it folds with the fold strategy)."""
    return profile.context_management and profile.context_strategy == "fold"


def profile_tool_names(profile: Profile) -> frozenset[str]:
    """The tools a profile may call by name (a tool object counts by its ``name``), the context tool included."""
    names = {t if isinstance(t, str) else str(getattr(t, "name", t)) for t in profile.tools}
    if folds_with_tool(profile):
        names.add(CONTEXT_TOOL_NAME)
    return frozenset(names)


def not_permitted(branch: Branch, profile: Profile) -> frozenset[str]:
    """Tools ``branch`` lists that ``profile`` may not call (an inherited setup's emitter-only tools)."""
    return frozenset(t.name for t in branch.tools) - profile_tool_names(profile)


def setup_text(
    system: str | None, emitter_system: str | None, permitted: Sequence[str], listed: Sequence[str]
) -> str | None:
    """The child's setup as an instruction: its system text and the tools it may call (None: nothing to say).

    The system text is said when it differs from the emitter's; the tools when
    some listed tool is not among ``permitted`` (in the order listed).
    """
    lines: list[str] = []
    if system is not None and system != emitter_system:
        lines.append(system)
    if set(listed) - set(permitted):
        callable_here = [name for name in listed if name in permitted]
        shown = ", ".join(callable_here) if callable_here else "none"
        lines.append(f"Tools you may call here: {shown}; the other tools listed are not available to you.")
    return f"{SETUP_HEADING}\n" + "\n".join(lines) if lines else None


def set_up_inherited(
    branch: Branch, profile: Profile, *, listed: Sequence[ToolSpec], system: str | None, tools: Sequence[ToolSpec]
) -> None:
    """Set up a clone of an emitter's view for ``profile`` (see the module doc).

    ``listed``: the tools the emitter's requests listed (:func:`actors.shape.offered_tools`
    of its branch and profile); ``system`` and ``tools``: the child's own setup.
    """
    if profile.inherited_setup == "own":
        branch.configure(system=system, tools=tools)
        return
    listed_names = [t.name for t in listed]
    extra = tuple(t for t in tools if t.name not in listed_names)
    permitted = profile_tool_names(profile) | {t.name for t in tools}
    emitter_system = branch.system.text if branch.system is not None else None
    text = setup_text(system, emitter_system, sorted(permitted), [*listed_names, *(t.name for t in extra)])
    branch.configure(tools=(*listed, *extra), setup=text)


def inherit_view(
    source: Branch,
    profile: Profile,
    *,
    listed: Sequence[ToolSpec],
    system: str | None,
    tools: Sequence[ToolSpec],
    upto: int | None = None,
) -> Branch:
    """A clone of ``source``'s view (its first ``upto`` messages) set up for ``profile`` (:func:`set_up_inherited`).

    Keeping the emitter's stable segment, the clone takes its cache ledger (the
    prefix it cached is the clone's too); with ``"own"`` it starts with none.
    """
    branch = source.clone(upto=upto, cache=profile.inherited_setup == "instruction")
    set_up_inherited(branch, profile, listed=listed, system=system, tools=tools)
    return branch


def inherited_cached_ids(branch: Branch) -> frozenset[str]:
    """The view ids ``branch`` inherited with its emitter's cache, while it has completed no request of its own.

    The fold keeps them as the emitter sent them where it can (the newest of
    them fold first: :mod:`runtime.fold.planner`), so the child's first request
    reads the emitter's cached prefix. Empty for a branch that did not take its
    emitter's ledger, or once it has sent (from then on its own notes anchor the prefix).
    """
    if branch.parent_id is None or branch.ledger is None:
        return frozenset()
    inherited = frozenset(mid for mid in branch.view_ids() if (branch.index_of(mid) or 0) < branch.fork_length)
    return inherited if branch.state.delivered <= inherited else frozenset()


def setup_ids(branch: Branch) -> frozenset[str]:
    """The id of ``branch``'s setup instruction (:func:`set_up_inherited`) while it is in the view: no fold takes it,
    as none takes a system text."""
    at = branch.fork_length
    if branch.parent_id is None or branch.record_length() <= at:
        return frozenset()
    message = branch.message_at(at)
    if not isinstance(message, Instruction) or not message.text.startswith(SETUP_HEADING + "\n"):
        return frozenset()
    return frozenset({message.id}) & frozenset(branch.view_ids())

"""Scale-out on Temporal: a flow as a workflow; provider attempts, tool calls and sink writes as activities.

Needs the ``temporal`` extra (``pip install -e '.[temporal]'``); nothing else
in foldline imports this package's submodules, and only they import
``temporalio``. See the README section "Running on Temporal".
"""

DEFAULT_TASK_QUEUE = "foldline"
DEFAULT_HISTORY_LIMIT = 2000
"""A branch workflow continues as new at its next fold commit once its history holds this many events."""
MAX_HISTORY_LIMIT = 50_000
"""Temporal refuses a history past 51,200 events; a limit must leave room to reach the next fold commit."""

DEFAULT_RECONNECT_S = 600.0
"""How long a client keeps trying to reach a server it lost before it gives up (``--reconnect-for``)."""
DEFAULT_WORKER_WAIT_S = 60.0
"""How long ``foldline worker`` waits for its server at the start before it exits 2 (``--wait-for-server``)."""
MAX_RECONNECT_S = 86_400.0
DEFAULT_HEARTBEAT_S = 5.0
"""A worker that stops heartbeating a provider attempt or tool call this long is taken as lost; the attempt moves
to another worker (``--heartbeat-timeout``)."""
MIN_HEARTBEAT_S = 2.0
"""Twice the interval the activities heartbeat at (``runtime.temporal.activities.HEARTBEAT_EVERY_S``): a shorter
timeout would take a live worker on a loaded machine for lost."""
MAX_HEARTBEAT_S = 600.0
"""The bound of one provider attempt (``runtime.temporal.flow_host.ATTEMPT_TIMEOUT``): a longer timeout never fires."""


def require_temporal() -> None:
    """Raise a clear error when the ``temporal`` extra is not installed."""
    import importlib.util

    from runtime.errors import ConfigError

    if importlib.util.find_spec("temporalio") is None:
        raise ConfigError("the Temporal engine needs the temporal extra: pip install -e '.[temporal]'")

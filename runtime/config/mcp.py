"""MCP servers a scenario names: the ``[mcp.NAME]`` tables, checked like every other key (pure).

A server is either a command foldline starts and talks to over stdio
(``command = ["mcp-server-time", "--local-timezone", "UTC"]`` with optional
``env`` and ``cwd``) or a streamable-HTTP endpoint (``url``). ``timeout_s``
bounds one tool call and ``startup_timeout_s`` the start (spawn, handshake and
tool listing). The command runs only what the user wrote in the file, with the
user's rights: a scenario with an ``[mcp]`` table is code the user chose to
run, as a ``--tools`` module is. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import attrs

from runtime.config.checks import (
    _ENV_NAME_EXPECTED,
    _ENV_NAME_RE,
    _NAME_EXPECTED,
    _defaults_of,
    _float_if_int,
    _table_fields,
    _tuple_if_array,
    _values_of,
    bad_value,
    check_array,
    check_name,
    check_number,
    check_text,
    join_index,
    join_key,
    require_table,
    wrong_type,
)
from runtime.errors import ConfigError

MAX_MCP_SERVERS = 32
"""``[mcp]``: servers one scenario may start."""
MAX_COMMAND_ARGS = 256
MAX_ENV_VARS = 256
MAX_ARG_CHARS = 4_096
MAX_MCP_TIMEOUT_S = 3_600.0
DEFAULT_MCP_TIMEOUT_S = 60.0
DEFAULT_STARTUP_TIMEOUT_S = 60.0


def _env_map(value: Any) -> Any:
    return MappingProxyType(dict(value)) if isinstance(value, Mapping) else value


@attrs.frozen(kw_only=True)
class McpServerSpec:
    """One MCP server: ``command`` (argv, run over stdio) or ``url`` (streamable HTTP), never both.

    ``cwd`` is relative to the scenario file (absolute paths are kept as given);
    ``env`` is added to the small default environment the MCP SDK gives a server
    (the user's API keys are not passed on unless named here).
    """

    command: tuple[str, ...] | None = attrs.field(default=None, converter=_tuple_if_array)
    env: Mapping[str, str] = attrs.field(default=MappingProxyType({}), converter=_env_map)
    cwd: str | None = None
    url: str | None = None
    timeout_s: float = attrs.field(default=DEFAULT_MCP_TIMEOUT_S, converter=_float_if_int)
    startup_timeout_s: float = attrs.field(default=DEFAULT_STARTUP_TIMEOUT_S, converter=_float_if_int)

    def __attrs_post_init__(self) -> None:
        _check_server(_values_of(self), "McpServerSpec")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> McpServerSpec:
        """Build from a plain dict (an ``[mcp.NAME]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls)
        _check_server({**_defaults_of(cls), **fields}, where)
        return cls(**fields)


def _within_timeout(value: float) -> bool:
    return 0 < value <= MAX_MCP_TIMEOUT_S


def _check_server(v: Mapping[str, Any], where: str) -> None:
    """Every rule of one server; a refusal names ``where`` and the key."""
    if (v["command"] is None) == (v["url"] is None):
        raise ConfigError(f"{where}: give exactly one of command (a stdio server) or url (a streamable HTTP server)")
    if v["command"] is not None:
        _check_command(v["command"], join_key(where, "command"))
    elif v["env"] or v["cwd"] is not None:
        raise ConfigError(f"{where}: env and cwd apply to a command; a url server takes neither")
    if v["url"] is not None:
        _check_url(v["url"], join_key(where, "url"))
    _check_env(v["env"], join_key(where, "env"))
    if v["cwd"] is not None:
        cwd = check_text(v["cwd"], join_key(where, "cwd"), expected="a directory path")
        if "\x00" in cwd or len(cwd) > MAX_ARG_CHARS:
            raise bad_value(join_key(where, "cwd"), cwd, "a directory path")
    for key in ("timeout_s", "startup_timeout_s"):
        expected = f"a number of seconds > 0 and <= {MAX_MCP_TIMEOUT_S:g}"
        check_number(v[key], join_key(where, key), within=_within_timeout, expected=expected)


def _check_command(command: Any, where: str) -> None:
    if isinstance(command, str):
        raise wrong_type(where, command, 'an array: the program and its arguments, e.g. ["mcp-server-time"]')
    items = check_array(command, where, expected="an array: the program and its arguments")
    if not items or len(items) > MAX_COMMAND_ARGS:
        raise bad_value(where, command, f"a program and at most {MAX_COMMAND_ARGS - 1} arguments")
    for i, arg in enumerate(items):
        at = join_index(where, i)
        if not isinstance(arg, str):
            raise wrong_type(at, arg, "a string")
        if "\x00" in arg or len(arg) > MAX_ARG_CHARS or (i == 0 and not arg):
            raise bad_value(at, arg, f"a non-empty string of at most {MAX_ARG_CHARS} characters without NUL")


def _check_url(url: Any, where: str) -> None:
    text = check_text(url, where, expected="an http:// or https:// URL")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(text) > MAX_ARG_CHARS:
        raise bad_value(where, text, "an http:// or https:// URL")


def _check_env(env: Any, where: str) -> None:
    if not isinstance(env, Mapping):
        raise wrong_type(where, env, "a table of environment variables")
    if len(env) > MAX_ENV_VARS:
        raise ConfigError(f"{where}: {len(env)} variables is above the bound of {MAX_ENV_VARS}")
    for name, value in env.items():
        at = join_key(where, str(name))
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            raise bad_value(at, name, _ENV_NAME_EXPECTED)
        if not isinstance(value, str) or "\x00" in value or len(value) > MAX_ARG_CHARS:
            raise wrong_type(at, value, f"a string of at most {MAX_ARG_CHARS} characters")


def mcp_servers_from_obj(raw: Any, where: str = "mcp") -> Mapping[str, McpServerSpec]:
    """The ``[mcp]`` table: server names to specs, every refusal with its key path."""
    table = require_table(raw, where)
    if len(table) > MAX_MCP_SERVERS:
        raise ConfigError(f"{where}: {len(table)} servers is above the bound of {MAX_MCP_SERVERS}")
    servers: dict[str, McpServerSpec] = {}
    for name, obj in table.items():
        at = join_key(where, name)
        check_name(name, at, expected=f"a server name: {_NAME_EXPECTED}")
        servers[name] = McpServerSpec.from_obj(obj, at)
    return MappingProxyType(servers)

"""Where a scenario may send the user's API key.

A scenario file names the provider's ``base_url`` and the environment
variable holding the key (``api_key_env``), and the provider sends that key
with every request. A scenario is untrusted input: one fetched from elsewhere
must not be able to send a key to a host of its choosing. So a key goes, with
no further word from the user, only to this machine (loopback: ``localhost``,
``127.0.0.0/8``, ``::1``) or to the provider's own API host
(:data:`OFFICIAL_HOSTS`). Any other host must be named by the user, in the
environment variable :data:`ALLOW_VARIABLE` (comma-separated host names, as
``NO_PROXY`` lists them), which a scenario cannot set; and a key crosses the
network only over https.

Which variable the key is read from is the user's choice too: a scenario's
``api_key_env`` could otherwise name any secret of the environment
(``AWS_SECRET_ACCESS_KEY``) and have it sent as the bearer key. The kind's own
variable (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) needs no word; any other
must be listed by the user in :data:`ALLOW_KEY_VARIABLE` (comma-separated
names), which a scenario cannot set. Both checks run before anything is sent.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from runtime.errors import ConfigError

ALLOW_VARIABLE = "FOLDLINE_ALLOW_HOSTS"
ALLOW_KEY_VARIABLE = "FOLDLINE_ALLOW_KEY_ENV"
OFFICIAL_HOSTS: Mapping[str, str] = {"anthropic": "api.anthropic.com", "openai": "api.openai.com"}


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(environ: Mapping[str, str]) -> frozenset[str]:
    """The hosts the user allows in :data:`ALLOW_VARIABLE` (lower case, blanks dropped)."""
    return frozenset(h.strip().lower() for h in environ.get(ALLOW_VARIABLE, "").split(",") if h.strip())


def check_key_destination(kind: str, base_url: str | None, key_env: str, environ: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` unless the key in ``key_env`` may go to ``base_url`` (see the module docstring)."""
    if base_url is None:
        return
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if is_loopback(host):
        return
    where = f"provider.base_url: {base_url!r} would send the key in ${key_env} to {host}"
    if parts.scheme != "https":
        raise ConfigError(f"{where} unencrypted; a key leaves this machine only over https://")
    if host == OFFICIAL_HOSTS.get(kind) or host in allowed_hosts(environ):
        return
    raise ConfigError(
        f"{where}, which is neither this machine nor {OFFICIAL_HOSTS.get(kind, 'the provider')}'s API; "
        f"a scenario cannot choose where your key goes: to allow it, set {ALLOW_VARIABLE}={host} "
        "in the environment (comma-separated hosts)"
    )


def allowed_key_variables(environ: Mapping[str, str]) -> frozenset[str]:
    """The variable names the user allows in :data:`ALLOW_KEY_VARIABLE` (exact case, blanks dropped)."""
    return frozenset(n.strip() for n in environ.get(ALLOW_KEY_VARIABLE, "").split(",") if n.strip())


def check_key_variable(api_key_env: str | None, own: str, environ: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` unless the key may be read from ``api_key_env`` (see the module docstring).

    ``own`` is the kind's own variable; None (no ``api_key_env``) reads that one.
    """
    if api_key_env is None or api_key_env == own or api_key_env in allowed_key_variables(environ):
        return
    raise ConfigError(
        f"provider.api_key_env: {api_key_env!r} is not {own}, the provider's own variable; a scenario cannot "
        f"choose which of your secrets is sent as the key: to allow it, set {ALLOW_KEY_VARIABLE}={api_key_env} "
        "in the environment (comma-separated names)"
    )


def node_header_for(base_url: str | None) -> bool:
    """Whether requests to ``base_url`` carry the ``x-foldline-node`` header (the flow's node ids).

    Only a simulator reads it (it picks the node's script by it): the built-in one
    (its opener sets the header itself) and a ``foldline sim`` the user runs, which
    is on this machine. So: a loopback ``base_url`` only; the provider's own API
    (no ``base_url``) and every other host never learn the flow's node names.
    """
    return base_url is not None and is_loopback((urlsplit(base_url).hostname or "").lower())

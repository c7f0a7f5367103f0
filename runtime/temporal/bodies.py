"""Bodies out of history: payloads stored once, content-addressed; Temporal's history carries digests.

Every payload foldline hands Temporal (a workflow's input and result, an
activity's input and result: request bodies, responses, tool results, event
batches) passes through :class:`ClaimCheckCodec`. A payload larger than
``threshold`` bytes is stored in a :class:`BodyStore` under the SHA-256 of
its serialized form and replaced by a small payload that names the digest;
decoding fetches it back and checks the digest. The server and its history
therefore hold digests, never conversation bodies, and a body sent twice is
stored once.

Every worker and client of one deployment must reach the same store:

- one host: :class:`DirectoryBodyStore` (a directory, ``file:PATH`` or a plain path);
- across hosts: :class:`PostgresBodyStore` (``postgresql://...``, through
  psycopg 3, in the ``temporal`` extra): one table, ``foldline_bodies``.
  Another backend is any object with the two methods of :class:`BodyStore`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from runtime.errors import ConfigError, FoldlineError
from runtime.measuring.atomic_write import write_atomically

CLAIM_ENCODING = b"binary/foldline-claim"
DEFAULT_THRESHOLD = 512
"""Payloads up to this many bytes stay inline (ids, small settings); larger ones are stored."""


class BodyMissing(FoldlineError):
    """A digest named in history has no body in the store (or the body does not match it)."""


class BodyStore(Protocol):
    """Where bodies live: put once by digest, get by digest."""

    def put(self, digest: str, body: bytes) -> None:
        """Store ``body`` under ``digest`` (its SHA-256); storing it again is a no-op."""
        ...

    def get(self, digest: str) -> bytes:
        """The body stored under ``digest``; raise :class:`BodyMissing` when there is none."""
        ...


def _check_digest(digest: str) -> str:
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise BodyMissing(f"not a SHA-256 hex digest: {digest[:80]!r}")
    return digest


@attrs.define(eq=False)
class DirectoryBodyStore:
    """Bodies as files ``ROOT/ab/abcdef...`` (one host; written atomically by rename)."""

    root: Path = attrs.field(converter=Path)

    def _path(self, digest: str) -> Path:
        digest = _check_digest(digest)
        return self.root / digest[:2] / digest

    def put(self, digest: str, body: bytes) -> None:
        path = self._path(digest)
        if path.exists():
            return
        write_atomically(path, body)

    def get(self, digest: str) -> bytes:
        path = self._path(digest)
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            raise BodyMissing(f"body {digest} is not in the store at {self.root}") from None
        if hashlib.sha256(body).hexdigest() != digest:
            raise BodyMissing(f"body {digest} in the store at {self.root} does not match its digest")
        return body

    def count(self) -> int:
        """How many bodies the store holds."""
        return sum(1 for p in self.root.glob("??/*") if not p.name.startswith("."))


def redacted(dsn: str) -> str:
    """A connection URL with its password replaced by ``***`` (for messages)."""
    scheme, sep, rest = dsn.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return dsn
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


CREATE_BODIES = "CREATE TABLE IF NOT EXISTS foldline_bodies (digest text PRIMARY KEY, body bytea NOT NULL)"


def postgres_connect(dsn: str, create: str, option: str, needs: str, noun: str) -> Any:
    """One autocommit psycopg 3 connection to ``dsn`` with ``create`` run; every failure a ConfigError naming
    ``option`` (the password never shown): what the Postgres body store and events sink share."""
    try:
        import psycopg
    except ImportError:
        raise ConfigError(f"{option}: the {needs} needs psycopg 3: pip install -e '.[temporal]'") from None
    try:
        connection = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        connection.execute(create)
    except psycopg.Error as exc:
        raise ConfigError(f"{option}: cannot use the Postgres {noun} {redacted(dsn)}: {exc}") from None
    return connection


@attrs.define(eq=False)
class PostgresBodyStore:
    """Bodies in a Postgres table every host reaches: ``foldline_bodies(digest text primary key, body bytea)``.

    One connection per process, opened on first use (autocommit: a put is one
    ``INSERT ... ON CONFLICT DO NOTHING``, so concurrent workers storing the
    same body agree); the table is created if missing.
    """

    dsn: str
    _connection: Any = attrs.field(default=None, init=False)

    def _connect(self) -> Any:
        if self._connection is None or self._connection.closed:
            self._connection = postgres_connect(self.dsn, CREATE_BODIES, "--bodies", "Postgres body store", "store")
        return self._connection

    def put(self, digest: str, body: bytes) -> None:
        self._connect().execute(
            "INSERT INTO foldline_bodies (digest, body) VALUES (%s, %s) ON CONFLICT (digest) DO NOTHING",
            (_check_digest(digest), body),
        )

    def get(self, digest: str) -> bytes:
        row = (
            self._connect()
            .execute("SELECT body FROM foldline_bodies WHERE digest = %s", (_check_digest(digest),))
            .fetchone()
        )
        if row is None:
            raise BodyMissing(f"body {digest} is not in the Postgres store {redacted(self.dsn)}")
        body = bytes(row[0])
        if hashlib.sha256(body).hexdigest() != digest:
            raise BodyMissing(f"body {digest} in the Postgres store {redacted(self.dsn)} does not match its digest")
        return body

    def count(self) -> int:
        """How many bodies the store holds."""
        return int(self._connect().execute("SELECT count(*) FROM foldline_bodies").fetchone()[0])

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


def open_body_store(location: str) -> BodyStore:
    """The store a location names: a directory path (or ``file:PATH``), or ``postgresql://...`` (``postgres://``)."""
    if not location:
        raise ConfigError("--bodies: empty location (expected a directory, file:PATH or postgresql://...)")
    if location.startswith(("postgres://", "postgresql://")):
        return PostgresBodyStore(location)
    if "://" in location:
        raise ConfigError(
            f"--bodies: {redacted(location)!r}: unknown store scheme (expected a directory, file:PATH or postgresql://...)"
        )
    return DirectoryBodyStore(Path(location.removeprefix("file:")))


@attrs.define(eq=False)
class ClaimCheckCodec(PayloadCodec):
    """Stores payloads over ``threshold`` bytes in ``store`` and passes their digests instead."""

    store: BodyStore
    threshold: int = DEFAULT_THRESHOLD

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for payload in payloads:
            raw = payload.SerializeToString()
            if len(raw) <= self.threshold:
                out.append(payload)
                continue
            digest = hashlib.sha256(raw).hexdigest()
            self.store.put(digest, raw)
            out.append(Payload(metadata={"encoding": CLAIM_ENCODING}, data=digest.encode("ascii")))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for payload in payloads:
            if payload.metadata.get("encoding") != CLAIM_ENCODING:
                out.append(payload)
                continue
            restored = Payload()
            restored.ParseFromString(self.store.get(payload.data.decode("ascii")))
            out.append(restored)
        return out

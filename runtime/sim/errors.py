"""The simulator's API errors: an HTTP status, an Anthropic error type and a message.

Validation and the cache rules raise :class:`SimAPIError`; the server turns
it into the API's error envelope
``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runtime.errors import FoldlineError


class SimAPIError(FoldlineError):
    """An error the simulated API answers with (status, ``error.type``, ``error.message``)."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        *,
        details: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers or {}))
        self.details: Mapping[str, object] | None = MappingProxyType(dict(details)) if details else None
        """The error's ``details`` object (a machine-readable ``error_code``), when the API gives one."""

    def envelope(self, request_id: str) -> dict[str, object]:
        error: dict[str, object] = {"type": self.error_type, "message": self.message}
        if self.details is not None:
            error["details"] = dict(self.details)
        return {"type": "error", "error": error, "request_id": request_id}


def invalid_request(message: str) -> SimAPIError:
    """A 400 ``invalid_request_error``."""
    return SimAPIError(400, "invalid_request_error", message)

"""Issue 11, case 9: a masked or partial key echoed back never leaves the process."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.contract.provider import ProviderError
from runtime.providers.anthropic import AnthropicProvider
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import Instruction
from runtime.values.scrub import REDACTED, scrub_secret

SECRET = "sk-ant-api03-Zq7Xw2Lk9Pm4Rt6Yb1Nc8Vd3Hf5Jg0Ks-123456789"


def test_exact_masked_and_partial_forms_are_removed() -> None:
    assert scrub_secret(f"key {SECRET} end", SECRET) == f"key {REDACTED} end"
    masked = "invalid x-api-key sk-ant-...23456789 (proxy)"
    scrubbed = scrub_secret(masked, SECRET)
    assert "23456789" not in scrubbed and scrubbed == f"invalid x-api-key sk-ant-...{REDACTED} (proxy)"
    head = "sk-ant-api03-Zq7X..."
    assert "api03-Zq7X" not in scrub_secret(head, SECRET)
    # Seven characters (the shared "sk-ant-" prefix) say nothing and stay.
    assert scrub_secret("use an sk-ant- key", SECRET) == "use an sk-ant- key"
    assert scrub_secret("nothing here", SECRET) == "nothing here"
    assert scrub_secret("text", None) == "text"
    assert scrub_secret("a tiny key abc", "abc") == f"a tiny key {REDACTED}"


@given(start=st.integers(0, len(SECRET) - 8), length=st.integers(8, len(SECRET)), pad=st.text(max_size=30))
def test_no_run_of_eight_secret_characters_survives(start: int, length: int, pad: str) -> None:
    piece = SECRET[start : start + length]
    out = scrub_secret(pad + piece + pad, SECRET)
    for i in range(len(SECRET) - 7):
        assert SECRET[i : i + 8] not in out


class _EchoingProxy(BaseHTTPRequestHandler):
    """A proxy that answers 500 with the caller's key masked to its last eight characters."""

    def do_POST(self) -> None:
        key = SECRET  # what a proxy holding the caller's key would mask and echo
        body = json.dumps(
            {"type": "error", "error": {"type": "api_error", "message": f"upstream refused key sk-ant-...{key[-8:]}"}}
        ).encode()
        self.send_response(500)
        self.send_header("content-type", "application/json")
        self.send_header("x-should-retry", "false")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.anyio
async def test_a_proxy_echoing_the_masked_key_does_not_leak_its_tail() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingProxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        provider = AnthropicProvider.create(
            api_key=SECRET, base_url=f"http://127.0.0.1:{server.server_address[1]}", max_retries=0
        )
        request = compile_request(
            system=None, tools=(), view=[Instruction("hi")], settings=RequestSettings(model="claude-haiku-5-5")
        )

        with pytest.raises(ProviderError) as info:  # a 500 is retryable: AttemptFailed, a ProviderError
            await provider.send(request, node_id=None)
    finally:
        server.shutdown()
        server.server_close()
    message = str(info.value)
    assert "HTTP 500" in message and REDACTED in message
    assert "23456789" not in message

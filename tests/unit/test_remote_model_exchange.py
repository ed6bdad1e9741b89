"""The remote model client against a hostile server (REQ-SEARCH-OUTBOUND-001): one deadline
for the whole exchange, a given-up request abandoning its exchange, strict JSON both ways.
The server is a real loopback peer (tests/backend_servers.py); the client is the real one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from adapters.models.http_json import HttpStatusError, JsonHttpClient
from adapters.models.remote import parse_expansion_answer
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.ports import WorkCancelledError
from tests.backend_servers import Behaviour, Canned, drip_forever, redirect, scripted_peer


def _unavailable(reason: str) -> QmdError:
    return QmdError(MODEL_UNAVAILABLE, reason)


def _client(url: str, timeout: float = 5, **options: Any) -> JsonHttpClient:
    return JsonHttpClient(url + "/v1", _unavailable, timeout=timeout, max_attempts=1, **options)


def _in_time(work: Callable[[], Any], seconds: float) -> Any:
    """`work`'s result or error, failing the test (instead of hanging it) if it takes longer."""
    done: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # raised on the test's thread below
            failed.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if failed:
        raise failed[0]
    assert done, f"no answer within {seconds} s"
    return done[0]


def test_a_dripping_server_fails_the_call_at_its_timeout() -> None:
    """A byte every 0.3 s never trips a 1 s socket timeout; the exchange's deadline does."""
    with scripted_peer(lambda _path: drip_forever(every_s=0.3)) as peer:
        client = _client(peer.url, timeout=1)
        started = time.monotonic()
        with pytest.raises(QmdError) as failed:
            _in_time(lambda: client.post("/embeddings", {"input": ["x"]}), 6)
        assert time.monotonic() - started < 1.8
        assert failed.value.code == MODEL_UNAVAILABLE
        assert "within 1 s (timeout)" in failed.value.message
        assert peer.wait_dripping(0, 3), "the client kept the dripping connection open"


def test_a_given_up_request_abandons_its_exchange() -> None:
    """REQ-SEARCH-CANCEL-MODEL-001 with REQ-SEARCH-OUTBOUND-001: the request given up while
    the server drips ends the exchange at once, not at the timeout."""
    given_up = threading.Event()

    def stop_check() -> None:
        if given_up.is_set():
            raise WorkCancelledError("given up")

    with scripted_peer(lambda _path: drip_forever(every_s=0.3)) as peer:
        client = _client(peer.url, timeout=30, stop_check=stop_check)
        threading.Timer(0.3, given_up.set).start()
        started = time.monotonic()
        with pytest.raises(WorkCancelledError):
            _in_time(lambda: client.post("/embeddings", {"input": ["x"]}), 6)
        assert time.monotonic() - started < 1.0
        assert peer.wait_dripping(0, 3)


DEEP = b"[" * 100_000 + b"]" * 100_000
NOT_STRICT: dict[str, Behaviour] = {
    "nan": Canned(200, b'{"data": [{"embedding": [NaN, 1.0]}]}'),
    "infinity": Canned(200, b'{"data": [{"embedding": [Infinity]}]}'),
    "overflow": Canned(200, b'{"data": [{"embedding": [1e999]}]}'),
    "deep": Canned(200, DEEP),
}


@pytest.mark.parametrize("name", sorted(NOT_STRICT))
def test_an_answer_that_is_not_strict_json_is_model_unavailable(name: str) -> None:
    with scripted_peer(lambda _path: NOT_STRICT[name]) as peer:
        with pytest.raises(QmdError) as failed:
            _in_time(lambda: _client(peer.url).post("/embeddings", {"input": ["x"]}), 10)
        assert failed.value.code == MODEL_UNAVAILABLE
        assert "not strict JSON" in failed.value.message


def test_an_error_answer_nested_too_deep_is_still_an_http_error() -> None:
    with scripted_peer(lambda _path: Canned(400, DEEP)) as peer:
        client = _client(peer.url)
        with pytest.raises(HttpStatusError) as refused:
            _in_time(lambda: client.post("/embeddings", {"input": ["x"]}), 10)
        message = client.fail("POST", "/embeddings", refused.value).message
        assert "HTTP 400" in message


def test_a_non_finite_number_is_never_sent() -> None:
    with scripted_peer(lambda _path: Canned(200, b"{}")) as peer:
        with pytest.raises(QmdError) as refused:
            _client(peer.url).post("/embeddings", {"input": ["x"], "dimensions": float("nan")})
        assert "non-finite" in refused.value.message
        assert peer.requests == []


def test_a_redirect_is_not_followed() -> None:
    with scripted_peer(lambda _path: Canned(200, b"{}")) as elsewhere:
        target = f"{elsewhere.url}/v1/embeddings"
        with scripted_peer(lambda _path: redirect(302, target)) as peer:
            with pytest.raises(HttpStatusError) as answered:
                _client(peer.url).post("/embeddings", {"input": ["x"]})
            assert answered.value.status == 302
            assert elsewhere.requests == []


def test_a_generated_expansion_nested_too_deep_is_read_as_text() -> None:
    """A model's text is parsed as JSON when it looks like it: 100,000 levels deep it is not
    a crash but plain lines, of which none is an expansion."""
    assert parse_expansion_answer("[" * 100_000 + "]" * 100_000) == []

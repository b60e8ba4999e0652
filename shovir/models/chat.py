"""The one OpenAI-compatible chat-completions client: connections, concurrency, retries, accounting.

:class:`ChatClient` sends JSON bodies to ``POST {base_url}/chat/completions`` of any server that
speaks the OpenAI chat API (``vllm serve``, SGLang, TGI's Messages API, the llama.cpp server,
Ollama, a hosted endpoint) with the standard library only (``http.client``, ``json``, a thread
pool). Two users share it: the image model adapter
:class:`~shovir.models.openai_compat.OpenAICompatible` and the text-only LLM backend of ICARE and
GREEN (:class:`shovir.icare.backends.OpenAIBackend`). What a request *holds* is theirs; how it
travels is here, once.

Concurrency
-----------
:meth:`ChatClient.post_many` sends a batch through one thread pool of ``max_concurrency`` workers,
created on first use and reused by every later call (each worker keeps one keep-alive
connection), and returns one :class:`ChatResult` per body, in input order. A body may be given as
a zero-argument callable, so that building it (e.g. encoding images) also runs in the workers.

Retries
-------
A request is retried up to ``max_retries`` times (``max_retries + 1`` attempts) after a connection
error, a timeout (``timeout`` seconds per connect and per read), HTTP 408, 429 or 5xx, or a reply
that is not JSON or has no ``choices[0].message``. The wait before retry ``k`` is
``backoff * 2**(k-1)`` times a jitter in ``[0.5, 1.5)`` (:func:`retry_delay`), drawn from a random
generator seeded by the request body itself, so runs and tests are deterministic; a
``Retry-After`` header on a 429 or 503 is honoured instead (up to :data:`MAX_RETRY_AFTER`). A
request that still fails gives ``ChatResult(error="HTTP 500 after 4 attempts: ...")``; other 4xx
replies fail it at once. Only a misconfiguration that makes every request fail raises, as a
``ValueError`` saying what to fix: 401/403 (``api_key_env``) and 404 (``base_url`` and ``model``);
the other requests of the batch then stop at their next attempt.

Accounting
----------
:meth:`ChatClient.usage` counts requests, attempts, retries, failures and the ``usage`` token
counts servers return (``prompt_tokens``, ``completion_tokens``), so a run can say what it cost.

The API key
-----------
``api_key_env`` names an environment variable; its value is read when each request is sent and
goes only into ``Authorization: Bearer <key>``. It is never stored: not in ``repr``, the pickled
state, usage, logs or exception messages (server text quoted in an error has the key masked).
Proxy variables are not used.

>>> client = ChatClient(base_url="http://127.0.0.1:8000/v1", model="m", max_concurrency=4)
>>> client.usage()["requests"], client.max_concurrency
(0, 4)
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import math
import numbers
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from shovir.models.decoding import split_reasoning

__all__ = ["MAX_RETRY_AFTER", "ChatClient", "ChatResult", "check_base_url", "reply_text", "retry_delay"]

MAX_RETRY_AFTER = 300.0
"""The longest ``Retry-After`` honoured, in seconds (a server asking for more is waited on this long)."""

_MAX_BACKOFF = 60.0
_RETRYABLE = {408, 429, 500, 502, 503, 504}


# --------------------------------------------------------------------------- pure helpers


def retry_delay(attempt: int, backoff: float, rng: random.Random) -> float:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...): exponential with jitter.

    >>> rng = random.Random(0)
    >>> [round(retry_delay(k, 0.5, rng), 3) for k in (1, 2, 3)]
    [0.672, 1.258, 1.841]
    """
    return min(_MAX_BACKOFF, backoff * 2 ** (attempt - 1) * (0.5 + rng.random()))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), capped.

    >>> _retry_after("2"), _retry_after("0.25"), _retry_after(None), _retry_after("soon")
    (2.0, 0.25, None, None)
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def reply_text(reply: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(text, reasoning)`` of a chat-completions reply's first choice.

    Content parts are joined; a ``reasoning_content`` (or ``reasoning``) field and ``<think>``
    blocks left in the content go to ``reasoning``, so a trace is never read as the answer.

    >>> reply_text({"choices": [{"message": {"content": "<think>sharp angles</think> No effusion."}}]})
    ('No effusion.', 'sharp angles')
    >>> reply_text({"choices": [{"message": {"content": [{"type": "text", "text": "B"}]}}]})
    ('B', None)
    """
    turn = reply["choices"][0]["message"]
    content = turn.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    text = content if isinstance(content, str) else ""
    traces = [r for r in (turn.get("reasoning_content"), turn.get("reasoning")) if isinstance(r, str) and r.strip()]
    if "think>" in text:
        text, inline = split_reasoning(text)
        if inline:
            traces.append(inline)
    reasoning = "\n\n".join(dict.fromkeys(t.strip() for t in traces)) or None
    return text.strip(), reasoning


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one request: the parsed reply of a 200, or an error that says why not.

    >>> ChatResult(error="HTTP 500 after 2 attempts").ok
    False
    """

    reply: Mapping[str, Any] | None = None
    error: str | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


class _Failed(Exception):
    """One attempt failed; ``reason`` is short and never holds the key."""

    def __init__(self, reason: str, detail: str = "", retry: bool = True, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.detail, self.retry, self.wait = reason, detail, retry, wait


class _Aborted(Exception):
    """Another request of the batch hit a misconfiguration; stop this one."""


Body = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class ChatClient:
    """Connections to one OpenAI-compatible ``/chat/completions`` endpoint (see the module docstring).

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; requests go to
            ``{base_url}/chat/completions``.
        model: the served model name (what the server lists under ``GET /v1/models``).
        api_key_env: the name of the environment variable holding the API key, or ``None``.
        max_concurrency: requests in flight at once.
        timeout: seconds allowed for connecting and for each read of one request.
        max_retries: retries after the first attempt (0: none).
        backoff: base seconds of the exponential backoff between attempts.
    """

    name = "openai-compatible"
    """Names the client in error messages."""
    thread_prefix = "shovir-openai"
    """Names the worker threads."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key_env: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        self.base_url = check_base_url(base_url)
        parts = urlsplit(self.base_url)
        self._scheme, self._host, self._port = parts.scheme, parts.hostname or "", parts.port
        self._target = parts.path + "/chat/completions" + (f"?{parts.query}" if parts.query else "")
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model is required: pass model=<the served model name> (what the server lists under "
                             f"GET {self.base_url}/models), got {model!r}")
        self.model = model
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env.strip()):
            raise ValueError(f"api_key_env must be the name of an environment variable (e.g. 'OPENAI_API_KEY') or "
                             f"None, got {api_key_env!r}; never put the key itself in a config")
        self.api_key_env = api_key_env
        self.max_concurrency = integer_option("max_concurrency", max_concurrency, 1)
        self.timeout = number_option("timeout", timeout, positive=True)
        self.max_retries = integer_option("max_retries", max_retries, 0)
        self.backoff = number_option("backoff", backoff, positive=False)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._usage = {"requests": 0, "attempts": 0, "retries": 0, "failed": 0, "prompt_tokens": 0,
                       "completion_tokens": 0}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key_env={self.api_key_env!r}, max_concurrency={self.max_concurrency})")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)  # pools, locks and sockets do not cross processes
        state.update(_pool=None, _pool_lock=None, _local=None, _connections=[])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool_lock, self._local = threading.Lock(), threading.local()

    # ----- accounting
    def usage(self) -> dict[str, int]:
        """Requests sent, attempts, retries, requests that failed for good, and the token counts
        the server reported (0 when it reports none)."""
        with self._pool_lock:
            return dict(self._usage)

    def _count(self, **increments: int) -> None:
        with self._pool_lock:
            for key, value in increments.items():
                self._usage[key] += value

    # ----- sending
    def post_many(self, bodies: Sequence[Body], on_result: Callable[[ChatResult], None] | None = None) -> list[ChatResult]:
        """One :class:`ChatResult` per body, in order; at most ``max_concurrency`` requests in flight.

        ``on_result`` is called (from a worker thread) as each request finishes, e.g. to move a
        progress bar. A misconfiguration (401/403/404, a missing key variable) raises ``ValueError``.
        """
        if not bodies:
            return []
        self._api_key()  # a missing variable fails the batch before anything is sent
        pool = self._executor()
        abort = threading.Event()
        futures: list[Future[ChatResult]] = [pool.submit(self._one, body, abort, on_result) for body in bodies]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f in done and f.exception() is not None), None)
        if failed is not None:
            abort.set()  # the others stop at their next attempt instead of retrying a hopeless request
            for future in futures:
                future.cancel()
            error = failed.exception()
            assert error is not None
            raise error
        return [future.result() for future in futures]

    def close(self) -> None:
        """Stop the worker threads and close their connections (a later call starts new ones)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
            connections, self._connections = self._connections, []
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        for connection in connections:
            connection.close()

    def __enter__(self) -> "ChatClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix=self.thread_prefix)
            return self._pool

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ValueError(f"api_key_env: the environment variable {self.api_key_env!r} is not set; export it "
                             "with the server's API key, or drop api_key_env for a server without one")
        return key

    def _one(self, body: Body, abort: threading.Event, on_result: Callable[[ChatResult], None] | None) -> ChatResult:
        result = self._send(body, abort)
        if on_result is not None:
            on_result(result)
        return result

    def _send(self, body: Body, abort: threading.Event) -> ChatResult:
        payload = json.dumps(body() if callable(body) else body).encode("utf-8")
        self._count(requests=1)
        attempts = self.max_retries + 1
        rng: random.Random | None = None
        failure: _Failed | None = None
        for attempt in range(1, attempts + 1):
            if abort.is_set():
                raise _Aborted
            self._count(attempts=1, retries=int(attempt > 1))
            try:
                reply = self._attempt(payload)
            except _Failed as error:
                failure = error
            else:
                self._count_tokens(reply.get("usage"))
                return ChatResult(reply=reply, attempts=attempt)
            if not failure.retry:
                return self._failure(failure, attempt)
            if attempt < attempts:
                if failure.wait is not None:
                    delay = failure.wait
                else:
                    if rng is None:  # seeded by the request: the same waits whatever the threads do
                        rng = random.Random(hashlib.sha256(payload).digest())
                    delay = retry_delay(attempt, self.backoff, rng)
                if abort.wait(delay):
                    raise _Aborted
        assert failure is not None
        return self._failure(failure, attempts)

    def _count_tokens(self, usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return
        counts = {}
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0:
                counts[key] = int(value)
        self._count(**counts)

    def _failure(self, failure: _Failed, attempts: int) -> ChatResult:
        self._count(failed=1)
        text = f"{failure.reason} after {attempts} attempt{'s' if attempts != 1 else ''}"
        return ChatResult(error=f"{text}: {failure.detail}" if failure.detail else text, attempts=attempts)

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's keep-alive connection, and whether it already served a request."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        if self._scheme == "https":
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        self._local.connection = connection
        with self._pool_lock:
            self._connections.append(connection)
        return connection, False

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None
            with self._pool_lock:
                if connection in self._connections:
                    self._connections.remove(connection)

    def _attempt(self, payload: bytes) -> dict[str, Any]:
        """One POST; the parsed reply of a 200, or :class:`_Failed` (or ``ValueError`` for a misconfiguration)."""
        key = self._api_key()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        for fresh_try in range(2):
            connection, reused = self._connection()
            try:
                connection.request("POST", self._target, body=payload, headers=headers)
                response = connection.getresponse()
                data = response.read()
                break
            except TimeoutError:
                self._drop_connection()
                raise _Failed(f"timeout ({self.timeout:g} s)") from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as error:
                self._drop_connection()
                if reused and fresh_try == 0:  # the server closed an idle keep-alive connection: not a failure
                    continue
                raise _Failed(f"connection error ({type(error).__name__})") from None
            except (OSError, http.client.HTTPException) as error:
                self._drop_connection()
                raise _Failed(f"connection error ({type(error).__name__}: {self._redact(str(error))[:200]})") from None
        status = response.status
        if response.will_close:
            self._drop_connection()
        if status == 200:
            try:
                reply = json.loads(data)
                choice = reply["choices"][0]
                if not isinstance(choice["message"], Mapping):
                    raise TypeError("message is not an object")
            except (ValueError, KeyError, IndexError, TypeError) as error:
                detail = self._server_message(data)
                raise _Failed("malformed reply (no choices[0].message)" if not isinstance(error, json.JSONDecodeError)
                              else "malformed reply (not JSON)", detail) from None
            return reply
        detail = self._server_message(data)
        if status in (401, 403):
            raise ValueError(f"{self.name}: HTTP {status} from {self.base_url}: the server refused the request's "
                             f"credentials ({detail or 'no detail'}); check api_key_env (currently "
                             f"{self.api_key_env!r}) and the variable it names")
        if status == 404:
            raise ValueError(f"{self.name}: HTTP 404 from {self._scheme}://{self._host}{':' if self._port else ''}"
                             f"{self._port or ''}{self._target} ({detail or 'no detail'}); check base_url and model "
                             f"(base_url is the API root, usually ending in /v1; model {self.model!r} must be a name "
                             "the server lists under GET /v1/models)")
        if status in _RETRYABLE:
            wait_for = _retry_after(response.getheader("Retry-After")) if status in (429, 503) else None
            raise _Failed(f"HTTP {status}", detail, wait=wait_for)
        raise _Failed(f"HTTP {status}", detail, retry=False)

    def _server_message(self, data: bytes) -> str:
        """A short, key-free summary of an error body."""
        try:
            body = json.loads(data)
        except ValueError:
            text = data.decode("utf-8", "replace")
        else:
            error = body.get("error", body) if isinstance(body, Mapping) else body
            if isinstance(error, Mapping):
                error = error.get("message", error.get("detail", error))
            text = error if isinstance(error, str) else json.dumps(error)[:200]
        return " ".join(self._redact(text).split())[:200]

    def _redact(self, text: str) -> str:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return text.replace(key, "***") if key else text


# --------------------------------------------------------------------------- option checks


def check_base_url(base_url: Any) -> str:
    """The API root without a trailing slash; refuses what cannot be one, saying why.

    >>> check_base_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000/v1'
    >>> check_base_url("http://h:8000/v1/chat/completions")
    Traceback (most recent call last):
    ...
    ValueError: base_url is the API root ('http://h:8000/v1'), without /chat/completions, got 'http://h:8000/v1/chat/completions'
    """
    example = "http://127.0.0.1:8000/v1"
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError(f"base_url is required: pass the server's API root, e.g. base_url={example!r}, "
                         f"got {base_url!r}")
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http:// or https:// URL such as {example!r}, got {base_url!r}")
    if parts.username or parts.password:
        raise ValueError("base_url must not hold credentials; put the key in an environment variable and pass its "
                         "name as api_key_env")
    if parts.path.endswith("/chat/completions"):
        raise ValueError(f"base_url is the API root ({url[: -len('/chat/completions')]!r}), without "
                         f"/chat/completions, got {base_url!r}")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"base_url has an invalid port: {base_url!r}") from None
    return url


def integer_option(field: str, value: Any, minimum: int) -> int:
    """``value`` as an int ``>= minimum``, or a ``ValueError`` naming ``field``.

    >>> integer_option("max_retries", 0, 0)
    0
    >>> integer_option("max_concurrency", True, 1)
    Traceback (most recent call last):
    ...
    ValueError: max_concurrency must be an integer >= 1, got True
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def number_option(field: str, value: Any, *, positive: bool) -> float:
    """``value`` as a finite float (``> 0`` when ``positive``, else ``>= 0``), or a ``ValueError``.

    >>> number_option("timeout", 2, positive=True)
    2.0
    >>> number_option("timeout", 0, positive=True)
    Traceback (most recent call last):
    ...
    ValueError: timeout must be a positive number, got 0
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ValueError(f"{field} must be a {'positive' if positive else 'non-negative'} number, got {value!r}")
    return float(value)

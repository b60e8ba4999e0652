"""A scriptable fake OpenAI-compatible chat-completions server, on loopback, for tests and benchmarks.

:class:`FakeOpenAIServer` answers ``POST /v1/chat/completions`` from a
``http.server.ThreadingHTTPServer`` bound to ``127.0.0.1`` on a free port, with HTTP/1.1
keep-alive like the real servers. What it answers is scripted:

* ``answer(request) -> str``: the reply text, derived from the request body (default
  :func:`brightness_answer`: the mean pixel value of the decoded PNG and the question;
  :func:`sentence_judge` plays an ICARE / GREEN judge that reads reports sentence by sentence);
* ``delay``: seconds before each answer;
* ``logprobs(request) -> [(token, logprob), ...]``: the first token's top log-probabilities,
  returned when the request asks for them (default: no logprobs);
* ``script(index, request) -> Reply | None``: per request (numbered from 0 in arrival order), an
  error status (with ``Retry-After``), a malformed body, a hang or a dropped connection instead
  of the answer (:class:`Reply`; helpers :func:`fail_first` and :func:`fail_when`);
* ``api_key``: refuse (401) a request without ``Authorization: Bearer <api_key>``;
* ``served_model``: refuse (404) a request for another model name;
* ``stop_after``: die after answering that many requests (the rest are dropped and the port closes).

It counts requests (:attr:`~FakeOpenAIServer.requests`), the most requests it held at once
(:attr:`~FakeOpenAIServer.max_overlap`), and keeps each request's body, ``Authorization`` header
and arrival time. :meth:`~FakeOpenAIServer.stop` kills it, mid-request too.

>>> with FakeOpenAIServer(answer=lambda request: "ok") as server:
...     server.base_url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from PIL import Image

__all__ = ["FakeOpenAIServer", "Reply", "brightness_answer", "fail_first", "fail_when", "request_images",
           "request_text", "sentence_judge"]


@dataclass
class Reply:
    """What the server does with one request instead of answering it normally.

    ``status`` and ``body`` (raw bytes, or an object sent as JSON) form the response, after
    ``delay`` seconds; ``drop`` closes the connection without any response.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False

    @classmethod
    def error(cls, status: int, retry_after: float | None = None, message: str = "scripted failure") -> "Reply":
        """An HTTP error with an OpenAI-style error body (and ``Retry-After`` when given)."""
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls(status=status, body={"error": {"message": message, "type": "server_error", "code": status}},
                   headers=headers)

    @classmethod
    def malformed(cls) -> "Reply":
        """A 200 whose body is not JSON."""
        return cls(status=200, body=b'{"choices": [{"message": ')

    @classmethod
    def hang(cls, seconds: float) -> "Reply":
        """Say nothing for ``seconds``, then drop the connection (a client timeout fires first)."""
        return cls(delay=seconds, drop=True)

    @classmethod
    def dropped(cls) -> "Reply":
        """Close the connection without a response."""
        return cls(drop=True)


Script = Callable[[int, dict], "Reply | None"]


def fail_first(k: int, reply: Reply) -> Script:
    """A script that answers the first ``k`` requests with ``reply``, then normally."""
    return lambda index, request: reply if index < k else None


def fail_when(predicate: Callable[[dict], bool], reply: Reply) -> Script:
    """A script that answers every request matching ``predicate`` with ``reply``."""
    return lambda index, request: reply if predicate(request) else None


def request_images(request: dict) -> list[np.ndarray]:
    """The pixels of every image data URL in the request's last user turn."""
    out = []
    for part in request["messages"][-1]["content"]:
        if isinstance(part, dict) and part.get("type") == "image_url":
            header, _, data = part["image_url"]["url"].partition(",")
            assert header == "data:image/png;base64", header
            out.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(data)))))
    return out


def request_text(request: dict) -> str:
    """The text part of the request's last user turn."""
    content = request["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text")


def brightness_answer(request: dict) -> str:
    """``"brightness <mean of the first image>: <last line of the text>"``."""
    images = request_images(request)
    mean = float(images[0].mean()) if images else float("nan")
    return f"brightness {mean:.1f}: {request_text(request).splitlines()[-1] if request_text(request) else ''}"


def _sentences(report: str) -> list[str]:
    return [s.strip().rstrip(".").lower() for s in re.split(r"(?<=[.!?])\s+", report.strip()) if s.strip()]


def _quoted_report(text: str) -> str | None:
    match = re.search(r'Radiology report:\n"""\n(.*?)\n"""', text, re.S)
    return match.group(1) if match else None


def sentence_judge(request: dict) -> str:
    """A deterministic judge for shovir's ICARE and GREEN prompts, one finding per report sentence.

    * writing questions: one per sentence of the report, "Does the report say that <sentence>?"
      with the options Yes / No / Partly / Not stated and the key Yes (as many as asked for);
    * answering: "Yes" when the quoted sentence is in the report it is given, else "Not stated"
      (so without a report every question is answered wrongly and kept by the filter);
    * GREEN: the reference's sentences found in the candidate are matched findings, the others
      (b) missing findings, the candidate's extra sentences (a) false reports.
    """
    text = request_text(request)
    if "multiple-choice questions" in text:
        wanted = int(re.search(r"Write (\d+) different", text).group(1))
        done = set(re.findall(r"^- (.*)$", text, re.M))
        items = []
        for sentence in _sentences(_quoted_report(text) or ""):
            question = f"Does the report say that {sentence}?"
            if question not in done and len(items) < wanted:
                items.append(f"**{len(items) + 1}: {question}**\nA) Yes\nB) No\nC) Partly\nD) Not stated\nAnswer: A")
        return "\n\n".join(items)
    if text.rstrip().endswith("nothing else."):
        question = re.search(r"^Question: Does the report say that (.*)\?$", text, re.M)
        options = dict(re.findall(r"^([A-D])\) (.*)$", text, re.M))
        report = _quoted_report(text)
        said = question is not None and report is not None and question.group(1) in _sentences(report)
        wanted = "Yes" if said else "Not stated"
        return next((letter for letter, option in options.items() if option == wanted), "?")
    if "[Matched Findings]" in text:
        reference = re.search(r"2\. Reference Report:\n\s*(.*?)\n\n", text, re.S).group(1)
        candidate = re.search(r"3\. Candidate Report:\n\s*(.*?)\n\n", text, re.S).group(1)
        ref, cand = _sentences(reference), _sentences(candidate)
        matched = [s for s in ref if s in cand]
        missing = [s for s in ref if s not in cand]
        false = [s for s in cand if s not in ref]
        lines = [f"(a) False report of a finding in the candidate: {len(false)}. {'; '.join(false)}",
                 f"(b) Missing a finding present in the reference: {len(missing)}. {'; '.join(missing)}"]
        lines += [f"({letter}) Other: 0." for letter in "cdef"]
        return ("[Explanation]:\nCompared sentence by sentence.\n\n[Clinically Significant Errors]:\n" + "\n".join(lines)
                + "\n\n[Clinically Insignificant Errors]:\nNo Clinically Insignificant Errors\n\n[Matched Findings]:\n"
                + f"{len(matched)}. {'; '.join(matched)}")
    return "I do not understand the request."


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as vLLM/uvicorn; every response carries a Content-Length
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # keep test output clean

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle and delayed ACKs add 40 ms
        # per response (uvicorn, which vLLM uses, sets it too)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.fake._track(self.connection, add=False)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        fake._enter(request, self.headers.get("Authorization"))
        try:
            self._respond(fake, request)
        finally:
            fake._leave()

    def _respond(self, fake: "FakeOpenAIServer", request: dict) -> None:
        index = fake._number()
        if fake.stop_after is not None and index >= fake.stop_after:
            fake._die()
            self._drop()
            return
        try:
            self._answer(fake, index, request)
        finally:
            if fake.stop_after is not None:
                fake._settle()

    def _answer(self, fake: "FakeOpenAIServer", index: int, request: dict) -> None:
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            return
        if fake.served_model is not None and request.get("model") != fake.served_model:
            self._send(404, {"error": {"message": f"The model `{request.get('model')}` does not exist."}})
            return
        reply = fake.script(index, request) if fake.script is not None else None
        delay = fake.delay if reply is None else reply.delay
        if delay and fake._stopping.wait(delay):
            self._drop()
            return
        if reply is not None:
            if reply.drop:
                self._drop()
            else:
                self._send(reply.status, reply.body, reply.headers)
            return
        self._send(200, fake._completion(index, request))

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up (timeout): nothing to tell it

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: "FakeOpenAIServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-response is part of the tests


class FakeOpenAIServer:
    """A scriptable OpenAI-compatible server on ``127.0.0.1`` (see the module docstring).

    Use it as a context manager (``with FakeOpenAIServer(...) as server:``), or call
    :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        answer: Callable[[dict], str] = brightness_answer,
        *,
        delay: float = 0.0,
        logprobs: Callable[[dict], list[tuple[str, float]] | None] | None = None,
        script: Script | None = None,
        api_key: str | None = None,
        served_model: str | None = None,
        stop_after: int | None = None,
    ) -> None:
        self.answer, self.delay, self.logprobs, self.script = answer, delay, logprobs, script
        self.api_key, self.served_model, self.stop_after = api_key, served_model, stop_after
        self.requests = 0
        self.in_flight = 0
        self.max_overlap = 0
        self.bodies: list[dict] = []
        self.authorizations: list[str | None] = []
        self.arrivals: list[float] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._dying = False
        self._stopped = False
        self._settled = threading.Condition(self._lock)
        self._answered_before_death = 0

    # ----- life cycle
    @property
    def base_url(self) -> str:
        """The API root to give the adapter, e.g. ``http://127.0.0.1:40123/v1``."""
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> "FakeOpenAIServer":
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection, mid-request too."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        server = self._server
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ----- bookkeeping (called from the handler threads)
    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            (self._sockets.add if add else self._sockets.discard)(sock)

    def _enter(self, request: dict, authorization: str | None) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_overlap = max(self.max_overlap, self.in_flight)
            self.bodies.append(request)
            self.authorizations.append(authorization)
            self.arrivals.append(time.monotonic())

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _number(self) -> int:
        with self._lock:
            index = self.requests
            self.requests += 1
            return index

    def _settle(self) -> None:
        with self._settled:
            self._answered_before_death += 1
            self._settled.notify_all()

    def _die(self) -> None:
        with self._lock:
            if self._dying:
                return
            self._dying = True
        # shutdown() waits for serve_forever, which must not be this handler's own thread
        threading.Thread(target=self._die_when_settled, daemon=True).start()

    def _die_when_settled(self) -> None:
        # the requests numbered below stop_after get their answer first, so exactly that many succeed
        with self._settled:
            self._settled.wait_for(lambda: self._answered_before_death >= (self.stop_after or 0), timeout=5)
        self.stop()

    def _completion(self, index: int, request: dict) -> dict:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": self.answer(request)},
                                  "finish_reason": "stop", "logprobs": None}
        if request.get("logprobs") and self.logprobs is not None:
            top = self.logprobs(request)
            if top:
                limit = int(request.get("top_logprobs") or 0)
                choice["logprobs"] = {"content": [{
                    "token": top[0][0], "logprob": top[0][1], "bytes": list(top[0][0].encode()),
                    "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top[:limit]],
                }]}
        return {"id": f"chatcmpl-{index}", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model"), "choices": [choice],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

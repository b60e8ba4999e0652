"""Any OpenAI-compatible chat-completions server that takes images, as a shovir model.

:class:`OpenAICompatible` (registry name ``openai-compatible``) sends each message to
``POST {base_url}/chat/completions`` of a server that speaks the OpenAI chat API with image
inputs: ``vllm serve``, SGLang, TGI (Messages API), the llama.cpp server, Ollama, or a hosted
endpoint. The model runs wherever the server runs; shovir only needs the standard library to
talk to it (``http.client``, ``json``, ``base64``, a thread pool).

Request layout
--------------
One user turn per message (after an optional ``system_prompt`` turn). It holds every image, in
order, inlined **losslessly** as a base64 PNG data URL, then one text part::

    {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}},
        {"type": "text", "text": "Radiology report:\\n<report>\\n\\n<question>"}]}

Images go through :func:`~shovir.models.images.to_8bit` first (grayscale stays one channel;
16-bit and float grayscale are min–max scaled to 8 bits), so the server sees exactly the pixels
every in-process adapter sees; :func:`encode_png` writes the PNG. The text is the question (``Message.prompt``, else ``prompt``),
preceded by the message's context report through
:data:`~shovir.models.pretrained.REPORT_TEMPLATE` (:func:`~shovir.models.pretrained.compose_text`).
The body also carries ``model``, ``temperature``, ``max_tokens`` and, when ``seed`` is set, a
per-message ``seed`` (:func:`request_seed`: from ``seed`` and ``Message.seed``, so the batch a
message is sent in never changes what it is asked).

Answer scores (ModaLens margins)
--------------------------------
For a message with ``options`` (closed questions), ``logprobs="auto"`` adds ``"logprobs": true,
"top_logprobs": 20`` and maps the top log-probabilities of the *first generated token* to the
options (:func:`option_scores`): a token matches an option when both are equal once stripped and
case-folded, and the tokens that spell the same option (``"Yes"``, ``" yes"``) are summed in
probability. An option that is not among the top tokens has no score, and the message then gets
``scores=None`` — never a made-up number. The text is always the server's own answer.
``logprobs=False`` never asks (for servers that refuse the field).

Reasoning models: a ``reasoning_content`` (or ``reasoning``) field of the reply, and
``<think>…</think>`` blocks left in the content, go to ``Generation.reasoning``
(:func:`~shovir.models.decoding.split_reasoning`), so a trace is never scored as an answer.

Concurrency and retries
-----------------------
The connections, retries and call accounting are :class:`shovir.models.chat.ChatClient`'s, the
one chat-completions client of shovir (the ICARE and GREEN backends use it too).
:meth:`OpenAICompatible.generate` sends a batch concurrently through one thread pool of
``max_concurrency`` workers, created on first use and reused by every later call (each worker
keeps one keep-alive connection), and returns the generations in input order. A request is
retried up to ``max_retries`` times (``max_retries + 1`` attempts) after a connection error, a
timeout (``timeout`` seconds per connect and per read), HTTP 408, 429 or 5xx, or a reply that is
not JSON or has no ``choices``. The wait before retry ``k`` is ``backoff * 2**(k-1)`` times a
jitter in ``[0.5, 1.5)`` (:func:`retry_delay`), drawn from a random generator seeded by the
request itself so that runs and tests are deterministic; a ``Retry-After`` header on a 429 or
503 is honoured instead (up to five minutes). A request that still fails becomes
``Generation.failure("HTTP 500 after 4 attempts: ...")``: the runner records it as a failure,
never scores it and makes it again on the next run. Other 4xx replies fail the message at once
(retrying cannot help). Only a misconfiguration that makes every request fail raises, as a
``ValueError`` that says what to fix: 401/403 (check ``api_key_env``) and 404 (check
``base_url`` and ``model``).

What keys the cache
-------------------
:meth:`OpenAICompatible.config` holds the served ``model`` name, the decoding settings
(``temperature``, ``max_tokens``, ``seed``), ``prompt``, ``system_prompt``, ``report_template``,
the ``logprobs`` mode and the image encoding. ``base_url`` is left out on purpose (the same model
served elsewhere gives the same outputs, so moving the server reuses every generation), and so
are the connection settings (concurrency, timeout, retries, backoff).

The API key
-----------
``api_key_env`` names an environment variable; its value is read when each request is built
and sent only as ``Authorization: Bearer <key>``. The adapter never stores the key: it is not in
:meth:`~OpenAICompatible.config`, ``repr``, run records, logs or exception messages (server text
quoted in an error has the key masked). Use ``https://`` for a server beyond the local machine.
Proxy variables (``HTTP_PROXY``) are not used.

Example (nothing is sent until :meth:`~OpenAICompatible.generate`)::

    >>> adapter = OpenAICompatible(base_url="http://127.0.0.1:8000/v1", model="google/medgemma-4b-it")
    >>> adapter.config()["model"], "base_url" in adapter.config()
    ('google/medgemma-4b-it', False)
"""

from __future__ import annotations

import base64
import math
import numbers
import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image  # noqa: F401  (the doctests draw images with it)

from shovir.models.base import Generation, Message, ModelAdapter, validate_messages
from shovir.models.chat import MAX_RETRY_AFTER, ChatClient, ChatResult, reply_text, retry_delay
from shovir.models.chat import integer_option as _integer
from shovir.models.chat import number_option as _number
from shovir.models.decoding import row_seed
from shovir.models.images import to_8bit
from shovir.models.pretrained import REPORT_TEMPLATE, check_template, compose_text

__all__ = ["MAX_RETRY_AFTER", "OpenAICompatible", "encode_png", "option_scores", "png_data_url", "request_seed",
           "retry_delay"]

TOP_LOGPROBS = 20
"""How many alternatives of the first token are asked for (vLLM's default ceiling)."""

_SEED_MASK = 2**31 - 1  # llama.cpp reads the seed as uint32, others as int32/int64: 31 bits fit them all


# --------------------------------------------------------------------------- pure helpers


def encode_png(image: Any, *, field: str = "images") -> bytes:
    """``image`` as PNG bytes, losslessly: 8-bit grayscale (``L``) or 8-bit RGB, after :func:`to_8bit`.

    Written directly rather than through Pillow's PNG writer, which tries every filter on every
    row: here each row takes the *Up* filter (the difference with the row above, which suits
    radiographs) and deflate runs with its run-length strategy. For a 320×320 X-ray that is about
    three times faster than Pillow at its fastest level, and no larger; any PNG decoder reads it.

    >>> import io
    >>> image = Image.frombytes("L", (3, 2), bytes([0, 7, 255, 1, 7, 250]))
    >>> decoded = Image.open(io.BytesIO(encode_png(image)))
    >>> decoded.mode, decoded.size, decoded.tobytes() == image.tobytes()
    ('L', (3, 2), True)
    """
    converted = to_8bit(image, field=field)
    rows = np.asarray(converted, dtype=np.uint8).reshape(converted.height, -1)
    filtered = np.empty((rows.shape[0], rows.shape[1] + 1), dtype=np.uint8)
    filtered[:, 0] = 2  # filter type Up
    filtered[:1, 1:] = rows[:1]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # uint8 arithmetic wraps modulo 256, as PNG wants
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    data = deflate.compress(filtered.tobytes()) + deflate.flush()
    colour_type = 0 if converted.mode == "L" else 2
    header = struct.pack(">IIBBBBB", converted.width, converted.height, 8, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_data_url(image: Any, *, field: str = "images") -> str:
    """``image`` as a lossless base64 PNG data URL (:func:`encode_png`).

    >>> import io
    >>> url = png_data_url(Image.new("L", (2, 1), 7))
    >>> url.startswith("data:image/png;base64,")
    True
    >>> decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    >>> decoded.mode, decoded.size, decoded.getpixel((1, 0))
    ('L', (2, 1), 7)
    """
    return "data:image/png;base64," + base64.b64encode(encode_png(image, field=field)).decode("ascii")


def _normalise(text: str) -> str:
    # SentencePiece / byte-level BPE markers can leak into token strings from some servers
    return text.replace("\u2581", " ").replace("\u0120", " ").strip().casefold()


def option_scores(options: Sequence[str], logprobs: Any) -> dict[str, float] | None:
    """Each option's log-probability as the first generated token, from a chat ``logprobs`` payload.

    A token counts for an option when both are equal once stripped and case-folded; the tokens of
    one option are summed in probability. ``None`` when the payload has no first token or some
    option is not among its top tokens (no score is made up).

    >>> payload = {"content": [{"token": "Yes", "logprob": -0.2, "top_logprobs": [
    ...     {"token": "Yes", "logprob": -0.2}, {"token": " yes", "logprob": -2.0},
    ...     {"token": "No", "logprob": -1.9}]}]}
    >>> {k: round(v, 3) for k, v in option_scores(["yes", "no"], payload).items()}
    {'yes': -0.047, 'no': -1.9}
    >>> option_scores(["yes", "maybe"], payload) is None
    True
    >>> option_scores(["yes", "no"], None) is None
    True
    """
    if not isinstance(logprobs, Mapping):
        return None
    content = logprobs.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        return None
    first = content[0]
    seen: dict[str, float] = {}
    for entry in [first, *(first.get("top_logprobs") or [])]:
        if not isinstance(entry, Mapping):
            continue
        token, value = entry.get("token"), entry.get("logprob")
        if isinstance(token, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
            seen.setdefault(token, float(value))  # the sampled token is listed twice: count it once
    wanted = {_normalise(option): option for option in options}
    collected: dict[str, list[float]] = {}
    for token, value in seen.items():
        option = wanted.get(_normalise(token))
        if option is not None:
            collected.setdefault(option, []).append(value)
    if len(collected) != len(wanted):
        return None
    return {option: _logsumexp(collected[option]) for option in options}


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if math.isinf(top):
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def request_seed(seed: int, message: Message) -> int:
    """The 31-bit seed sent with ``message``: from the adapter's ``seed`` and ``Message.seed``
    (or the message content when it has none), whatever batch the message is in.

    >>> m = Message(images=[], prompt="Describe.", seed=11)
    >>> request_seed(3, m) == request_seed(3, Message(images=[], prompt="Other.", seed=11)) != request_seed(4, m)
    True
    >>> 0 <= request_seed(3, m) < 2**31
    True
    """
    return row_seed(seed, message) & _SEED_MASK


# --------------------------------------------------------------------------- the adapter


class OpenAICompatible(ChatClient, ModelAdapter):
    """A model served behind an OpenAI-compatible ``/chat/completions`` endpoint with image inputs.

    See the module docstring for the request layout, the retry policy, what keys the cache and how
    the key is kept out of every record. The connections, retries and accounting are
    :class:`~shovir.models.chat.ChatClient`'s, shared with the ICARE and GREEN backends.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``vllm serve``); requests go to
            ``{base_url}/chat/completions``.
        model: the served model name (``vllm serve --served-model-name``, ``GET /v1/models``);
            it keys the generation cache.
        api_key_env: the name of the environment variable holding the API key (sent as
            ``Authorization: Bearer``), or ``None`` for servers without one.
        max_concurrency: requests in flight at once.
        timeout: seconds allowed for connecting and for each read of one request.
        max_retries: retries after the first attempt (0: none).
        backoff: base seconds of the exponential backoff between attempts.
        temperature: sampling temperature (0: greedy).
        max_tokens: the most tokens generated per message.
        seed: sent with every request, per message (:func:`request_seed`); ``None`` sends none.
        prompt: the question when a message has none.
        system_prompt: an optional system turn.
        report_template: how a context report precedes the question (:data:`REPORT_TEMPLATE`).
        logprobs: ``"auto"`` asks for first-token log-probabilities for messages with options
            (answer scores); ``False`` never asks.
    """

    name = "openai-compatible"
    default_prompt: str | None = "Describe the findings in this chest X-ray."

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
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        prompt: str | None = None,
        system_prompt: str | None = None,
        report_template: str = REPORT_TEMPLATE,
        logprobs: str | bool = "auto",
    ) -> None:
        ChatClient.__init__(self, base_url, model, api_key_env=api_key_env, max_concurrency=max_concurrency,
                            timeout=timeout, max_retries=max_retries, backoff=backoff)
        self.temperature = _number("temperature", temperature, positive=False)
        self.max_tokens = _integer("max_tokens", max_tokens, 1)
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        for field, value in (("prompt", prompt), ("system_prompt", system_prompt)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{field} must be a string or None, got {type(value).__name__}")
        if prompt is not None:
            self.default_prompt = prompt
        self.system_prompt = system_prompt
        self.report_template = check_template(report_template)
        if logprobs is True:  # YAML's `logprobs: true` means the same as "auto"
            logprobs = "auto"
        if not (logprobs is False or logprobs == "auto"):
            raise ValueError(f"logprobs must be 'auto' (ask for answer scores on messages with options) or False "
                             f"(never ask), got {logprobs!r}")
        self.logprobs: str | bool = logprobs
        self.batch_size = self.max_concurrency

    # ----- identity
    def config(self) -> dict[str, Any]:
        """The served model, decoding, prompts and logprobs mode (not ``base_url``, not the key,
        not the connection settings)."""
        return {
            "name": self.name,
            "model": self.model,
            "decoding": {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed},
            "prompt": self.default_prompt,
            "system_prompt": self.system_prompt,
            "report_template": self.report_template,
            "logprobs": self.logprobs,
            "top_logprobs": TOP_LOGPROBS if self.logprobs else None,
            "image_encoding": "png-8bit",
        }

    # ----- requests
    def question(self, message: Message, index: int = 0) -> str:
        """The message's prompt, else the adapter's ``prompt``."""
        question = message.prompt if message.prompt is not None else self.default_prompt
        if not isinstance(question, str):
            raise ValueError(f"messages[{index}].prompt must be a string or None, got {type(question).__name__}")
        return question

    def user_text(self, message: Message, index: int = 0) -> str:
        """The text part of the user turn (the report, then the question)."""
        return compose_text(self.question(message, index), message.report, self.report_template)

    def wants_logprobs(self, message: Message) -> bool:
        """Whether the request for ``message`` asks for first-token log-probabilities."""
        return self.logprobs == "auto" and bool(message.options)

    def request_body(self, message: Message, index: int = 0) -> dict[str, Any]:
        """The JSON body sent for ``message`` (see the module docstring for the layout)."""
        content: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": png_data_url(image, field=f"messages[{index}].images[{i}]")}}
            for i, image in enumerate(message.images)
        ]
        content.append({"type": "text", "text": self.user_text(message, index)})
        turns: list[dict[str, Any]] = []
        if self.system_prompt is not None:
            turns.append({"role": "system", "content": self.system_prompt})
        turns.append({"role": "user", "content": content})
        body: dict[str, Any] = {"model": self.model, "messages": turns, "temperature": self.temperature,
                                "max_tokens": self.max_tokens}
        if self.seed is not None:
            body["seed"] = request_seed(self.seed, message)
        if self.wants_logprobs(message):
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        return body

    def _validate(self, messages: Sequence[Message]) -> list[Message]:
        return validate_messages(messages, question=self.question, fold_case=True)

    # ----- generation
    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One :class:`Generation` per message, in order; at most ``max_concurrency`` requests in flight.

        Each body is built in the worker that sends it, so image encoding runs concurrently too.
        """
        checked = self._validate(messages)
        if not checked:
            return []
        results = self.post_many([_body_builder(self, message, index) for index, message in enumerate(checked)])
        return self._check_batch(checked, [self._parse(message, result) for message, result in zip(checked, results)])

    def __enter__(self) -> "OpenAICompatible":
        return self

    def _parse(self, message: Message, result: ChatResult) -> Generation:
        if result.error is not None or result.reply is None:
            return Generation.failure(result.error or "no reply")
        text, reasoning = reply_text(result.reply)
        choice = result.reply["choices"][0]
        scores = option_scores(message.options, choice.get("logprobs")) if self.wants_logprobs(message) else None
        return Generation(text=text, reasoning=reasoning, scores=scores)


def _body_builder(adapter: OpenAICompatible, message: Message, index: int) -> Any:
    return lambda: adapter.request_body(message, index)


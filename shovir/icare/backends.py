"""The LLM backends of ICARE and GREEN, and the cached, counted way every call goes through them.

A backend answers :class:`Call` objects with :class:`Reply` objects, in order. Three are built in
(:data:`BACKENDS`; third-party packages add more through the ``shovir.llm_backends`` entry-point
group):

* ``openai`` — :class:`OpenAIBackend`: any OpenAI-compatible chat-completions server (vLLM,
  SGLang, TGI, llama.cpp server, Ollama, a hosted endpoint) through the one shovir HTTP client,
  :class:`shovir.models.chat.ChatClient` (timeouts, retries with backoff, a concurrency limit, the
  key read from the environment variable named by ``api_key_env`` and never written anywhere).
  Defaults follow the ICARE authors: temperature 0, top_p 1, n 1, seed 123 per call.
* ``transformers`` — :class:`TransformersBackend`: a local causal LM by path (the ``models``
  extra; imported on first use), greedy, batched with left padding, prompt + output within
  ``max_length`` tokens (GREEN: 2048, batch 8, pad = eos). Nothing is downloaded:
  files are loaded locally only, and a checkpoint's own code runs only when the caller opts in
  (``trust_remote_code`` defaults to ``False``).
* ``offline`` — :class:`OfflineBackend`: deterministic and model-free, for offline use and the
  demo. It is an **approximation**, not ICARE or GREEN: it writes one question per CheXpert
  finding ("According to the report, what is the status of pleural effusion?" with the options
  Present / Absent / Uncertain / Not mentioned, the key from the rule-based labeler), answers a
  question by labelling the report it is given (no report: "Not mentioned"), and judges a GREEN
  pair by comparing the two reports' labels finding by finding.

:class:`Caller` puts a :class:`~shovir.icare.cache.CallCache` in front of a backend: every call
is keyed by the backend's :meth:`Backend.identity` (kind, model, decoding), the prompt and the
call's parameters; cached replies are reused, identical calls of one batch are made once, only
successful replies are stored, and :attr:`Caller.stats` counts the calls made, saved and failed.
"""

from __future__ import annotations

import hashlib
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shovir.icare.cache import CallCache, call_key
from shovir.models.chat import (
    ChatClient,
    ChatResult,
    integer_option,
    number_option,
    reply_text,
)
from shovir.registry import Registry, check_options

__all__ = [
    "BACKENDS",
    "Backend",
    "Call",
    "Caller",
    "OfflineBackend",
    "OpenAIBackend",
    "Reply",
    "TransformersBackend",
    "get_backend",
]


@dataclass(frozen=True)
class Call:
    """One request to a judge.

    Attributes:
        kind: ``"mcq"`` (write questions), ``"answer"`` (answer one question) or ``"green"``.
        prompt: the user turn.
        max_tokens: the most tokens the reply may have.
        seed: the per-call seed (``None``: none sent).
        task: the same request as structured fields (report, question, options, ...), for
            backends that do not read prompts (:class:`OfflineBackend`); not part of the key.

    >>> Call("answer", "Question: ...", 10, 123).parameters()
    {'kind': 'answer', 'max_tokens': 10, 'seed': 123}
    """

    kind: str
    prompt: str
    max_tokens: int
    seed: int | None = None
    task: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def parameters(self) -> dict[str, Any]:
        """What keys the cache beside the prompt and the backend identity."""
        return {"kind": self.kind, "max_tokens": self.max_tokens, "seed": self.seed}


@dataclass(frozen=True)
class Reply:
    """A judge's reply: its text, or why there is none (the call failed for good).

    >>> Reply(error="HTTP 500 after 4 attempts").ok, Reply("B").ok
    (False, True)
    """

    text: str = ""
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class Backend(ABC):
    """A judge that answers calls (see the module docstring)."""

    name: str = ""

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What determines the replies (kind, model, decoding): part of every cache key."""

    @abstractmethod
    def complete(self, calls: Sequence[Call], on_reply: Callable[[], None] | None = None) -> list[Reply]:
        """One :class:`Reply` per call, in order; ``on_reply`` is called as each finishes."""

    def usage(self) -> dict[str, int]:
        """Backend-level accounting (requests, retries, tokens), when the backend keeps any."""
        return {}

    def close(self) -> None:
        """Release connections, threads or weights."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------- OpenAI-compatible


class _JudgeClient(ChatClient):
    name = "LLM backend openai"
    thread_prefix = "shovir-judge"


class OpenAIBackend(Backend):
    """A judge behind an OpenAI-compatible ``/chat/completions`` endpoint (text only).

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model name (it keys the cache; ``base_url`` does not).
        api_key_env: the environment variable holding the API key, or ``None``.
        max_concurrency: requests in flight at once.
        timeout, max_retries, backoff: per-request limits (:class:`~shovir.models.chat.ChatClient`).
        temperature, top_p: decoding (the ICARE authors: 0 and 1).
        system_prompt: an optional system turn.

    >>> backend = OpenAIBackend(base_url="http://127.0.0.1:8000/v1", model="llama-3.3-70b")
    >>> backend.identity()
    {'backend': 'openai', 'model': 'llama-3.3-70b', 'temperature': 0.0, 'top_p': 1.0, 'system_prompt': None}
    """

    name = "openai"

    def __init__(self, base_url: str | None = None, model: str | None = None, *, api_key_env: str | None = None,
                 max_concurrency: int = 16, timeout: float = 120.0, max_retries: int = 3, backoff: float = 0.5,
                 temperature: float = 0.0, top_p: float = 1.0, system_prompt: str | None = None) -> None:
        self.client = _JudgeClient(base_url, model, api_key_env=api_key_env, max_concurrency=max_concurrency,
                                   timeout=timeout, max_retries=max_retries, backoff=backoff)
        self.temperature = number_option("temperature", temperature, positive=False)
        self.top_p = number_option("top_p", top_p, positive=True)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be a string or None, got {type(system_prompt).__name__}")
        self.system_prompt = system_prompt

    @property
    def max_concurrency(self) -> int:
        return self.client.max_concurrency

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.client.model, "temperature": self.temperature, "top_p": self.top_p,
                "system_prompt": self.system_prompt}

    def body(self, call: Call) -> dict[str, Any]:
        """The JSON body sent for ``call``."""
        turns: list[dict[str, Any]] = []
        if self.system_prompt is not None:
            turns.append({"role": "system", "content": self.system_prompt})
        turns.append({"role": "user", "content": call.prompt})
        body: dict[str, Any] = {"model": self.client.model, "messages": turns, "temperature": self.temperature,
                                "top_p": self.top_p, "n": 1, "max_tokens": call.max_tokens}
        if call.seed is not None:
            body["seed"] = int(call.seed)
        return body

    def complete(self, calls: Sequence[Call], on_reply: Callable[[], None] | None = None) -> list[Reply]:
        results = self.client.post_many([self.body(call) for call in calls],
                                        on_result=(lambda result: on_reply()) if on_reply else None)
        return [_reply(result) for result in results]

    def usage(self) -> dict[str, int]:
        return self.client.usage()

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.client!r})"


def _reply(result: ChatResult) -> Reply:
    if result.error is not None or result.reply is None:
        return Reply(error=result.error or "no reply")
    text, _ = reply_text(result.reply)  # a reasoning trace is never read as the answer
    return Reply(text=text)


# --------------------------------------------------------------------------- local transformers


class TransformersBackend(Backend):
    """A local causal LM as the judge (``transformers``; ``pip install "shovir[models]"``).

    Args:
        model: a local checkpoint folder, or a Hub id already in the local Hugging Face cache
            (nothing is downloaded while ``local_files_only`` is ``True``, the default).
        revision, dtype, device, device_map, trust_remote_code, local_files_only: loading
            (:class:`shovir.models.loading.LoadOptions`; remote code only when asked).
        batch_size: prompts per ``generate`` call (GREEN's authors: 8).
        max_length: the most tokens of prompt plus reply (GREEN: 2048); a longer prompt fails its
            call, with the reason, instead of being cut.
        chat_template: a Jinja chat template replacing the tokenizer's (GREEN's judge:
            :data:`shovir.icare.prompts.GREEN_CHAT_TEMPLATE`); without either, the prompt is sent
            as plain text.
        system_prompt: an optional system turn (with a chat template).

    Decoding is greedy (the ICARE and GREEN settings); the weights load on the first call.

    >>> TransformersBackend("/no/such/judge")
    Traceback (most recent call last):
    ...
    FileNotFoundError: checkpoint: no such folder '/no/such/judge' (nothing was downloaded). ...
    """

    name = "transformers"

    def __init__(self, model: str | None = None, *, revision: str | None = None, dtype: str | None = None,
                 device: str | None = None, device_map: str | dict | None = None, trust_remote_code: bool = False,
                 local_files_only: bool = True, batch_size: int = 8, max_length: int = 2048,
                 chat_template: str | None = None, system_prompt: str | None = None) -> None:
        from shovir.models.loading import LoadOptions

        if model is None:
            raise ValueError("model is required: pass model=<a local checkpoint folder> (e.g. the GREEN judge "
                             "StanfordAIMI/GREEN-RadLlama2-7b downloaded once with `hf download`)")
        self.load = LoadOptions(model, revision=revision, dtype=dtype, device=device, device_map=device_map,
                                trust_remote_code=trust_remote_code, local_files_only=local_files_only)
        self.model_name = str(model)
        self.batch_size = integer_option("batch_size", batch_size, 1)
        self.max_length = integer_option("max_length", max_length, 2)
        for name, value in (("chat_template", chat_template), ("system_prompt", system_prompt)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string or None, got {type(value).__name__}")
        self.chat_template, self.system_prompt = chat_template, system_prompt
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._usage = {"requests": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def identity(self) -> dict[str, Any]:
        template = hashlib.sha256(self.chat_template.encode()).hexdigest()[:12] if self.chat_template else None
        return {"backend": self.name, "model": self.model_name, "revision": self.load.revision, "dtype": self.load.dtype,
                "decoding": "greedy", "max_length": self.max_length, "chat_template": template,
                "system_prompt": self.system_prompt}

    def _ensure_loaded(self) -> None:
        if self._model is not None:
            return
        from shovir.models.base import require

        require("torch", 'pip install "shovir[models]" (the transformers backend runs a local causal LM)')
        transformers = require("transformers", 'pip install "shovir[models]"')
        from shovir.models.loading import hub_hint

        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.load.path, **self.load.hub_kwargs())
        except OSError as error:  # a Hub id not in the local cache: say how to get it, download nothing
            if self.load.is_local:
                raise
            raise OSError(hub_hint(self.load.path, self.load.local_files_only, field="model")) from error
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token  # GREEN's authors: pad = eos
        if self.chat_template is not None:
            tokenizer.chat_template = self.chat_template
        model = transformers.AutoModelForCausalLM.from_pretrained(self.load.path, **self.load.model_kwargs())
        if self.load.device_map is None:
            model = model.to(self.load.target_device())
        self._tokenizer, self._model = tokenizer, model.eval()

    def render(self, call: Call) -> str:
        """The text the model sees for ``call`` (chat template when there is one, else the prompt)."""
        self._ensure_loaded()
        tokenizer = self._tokenizer
        if getattr(tokenizer, "chat_template", None):
            turns = ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + \
                    [{"role": "user", "content": call.prompt}]
            return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return (f"{self.system_prompt}\n\n" if self.system_prompt else "") + call.prompt + "\n"

    def complete(self, calls: Sequence[Call], on_reply: Callable[[], None] | None = None) -> list[Reply]:
        if not calls:
            return []
        import torch

        with self._lock:
            self._ensure_loaded()
            tokenizer, model = self._tokenizer, self._model
            templated = bool(getattr(tokenizer, "chat_template", None))
            replies: list[Reply | None] = [None] * len(calls)
            encoded = [tokenizer(self.render(call), add_special_tokens=not templated)["input_ids"] for call in calls]
            runnable = []
            for index, ids in enumerate(encoded):
                if len(ids) >= self.max_length:
                    replies[index] = Reply(error=f"prompt of {len(ids)} tokens leaves no room for a reply within "
                                                 f"max_length={self.max_length}; raise max_length or shorten the reports")
                    self._usage["failed"] += 1
                    if on_reply:
                        on_reply()
                else:
                    runnable.append(index)
            # batches of similar length waste less padding; the order of the replies is kept
            runnable.sort(key=lambda i: (calls[i].max_tokens, len(encoded[i])))
            device = next(model.parameters()).device
            for start in range(0, len(runnable), self.batch_size):
                chunk = runnable[start:start + self.batch_size]
                longest = max(len(encoded[i]) for i in chunk)
                input_ids = torch.full((len(chunk), longest), tokenizer.pad_token_id, dtype=torch.long)
                attention = torch.zeros((len(chunk), longest), dtype=torch.long)
                for row, index in enumerate(chunk):  # left padding: every prompt ends where the reply starts
                    ids = encoded[index]
                    input_ids[row, longest - len(ids):] = torch.tensor(ids, dtype=torch.long)
                    attention[row, longest - len(ids):] = 1
                new_tokens = max(1, min(max(calls[i].max_tokens for i in chunk), self.max_length - longest))
                with torch.inference_mode():
                    output = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                            do_sample=False, max_new_tokens=new_tokens,
                                            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                generated = output[:, longest:]
                for row, index in enumerate(chunk):
                    tokens = generated[row][: calls[index].max_tokens]
                    text = tokenizer.decode(tokens, skip_special_tokens=True)
                    replies[index] = Reply(text=text.strip())
                    self._usage["prompt_tokens"] += len(encoded[index])
                    self._usage["completion_tokens"] += int((tokens != tokenizer.pad_token_id).sum())
                    if on_reply:
                        on_reply()
            self._usage["requests"] += len(calls)
        return [reply if reply is not None else Reply(error="no reply") for reply in replies]

    def usage(self) -> dict[str, int]:
        return dict(self._usage)

    def close(self) -> None:
        self._model = self._tokenizer = None


# --------------------------------------------------------------------------- offline approximation

OFFLINE_OPTIONS = ("Present", "Absent", "Uncertain", "Not mentioned")
"""The four options of every offline question, in A–D order before shuffling."""

_STATUS = {1: "Present", 2: "Absent", 3: "Uncertain", 0: "Not mentioned"}
_OFFLINE_QUESTION = "According to the report, what is the status of {finding}?"
_OFFLINE_PATTERN = re.compile(r"what is the status of (?P<finding>.+?)\?\s*$", re.I)


class OfflineBackend(Backend):
    """The deterministic, model-free approximation of a judge (see the module docstring).

    Args:
        labeler: the labeler that reads reports (``"rule"``, the offline default).

    >>> backend = OfflineBackend()
    >>> print(backend.complete([Call("mcq", "", 100, task={"report": "Mild cardiomegaly.", "n": 2})])[0].text)
    **1: According to the report, what is the status of enlarged cardiomediastinum?**
    A) Present
    B) Absent
    C) Uncertain
    D) Not mentioned
    Answer: D
    <BLANKLINE>
    **2: According to the report, what is the status of cardiomegaly?**
    A) Present
    B) Absent
    C) Uncertain
    D) Not mentioned
    Answer: A
    """

    name = "offline"
    VERSION = 1

    def __init__(self, labeler: str = "rule") -> None:
        from shovir.labelers import get_labeler

        self.labeler_name = labeler
        self.labeler = get_labeler(labeler)
        self._codes: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._usage = {"requests": 0, "failed": 0}

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "labeler": self.labeler_name, "version": self.VERSION}

    def _labels(self, texts: Sequence[str]) -> list[list[int]]:
        with self._lock:
            new = sorted({t for t in texts if t not in self._codes})
            if new:
                for text, codes in zip(new, self.labeler(new)):
                    self._codes[text] = [int(c) for c in codes]
            return [self._codes[t] for t in texts]

    def complete(self, calls: Sequence[Call], on_reply: Callable[[], None] | None = None) -> list[Reply]:
        texts = []
        for call in calls:
            task = call.task
            texts += [t for t in (task.get("report"), task.get("reference"), task.get("candidate")) if isinstance(t, str)]
        self._labels(texts)  # one labeler pass for the whole batch
        replies = []
        for call in calls:
            try:
                text = getattr(self, f"_{call.kind}")(call.task)
            except (KeyError, TypeError, AttributeError) as error:
                raise ValueError(f"offline backend: cannot handle a {call.kind!r} call ({error}); it answers the "
                                 "ICARE and GREEN calls of shovir.icare only") from None
            replies.append(Reply(text=text))
            if on_reply:
                on_reply()
        self._usage["requests"] += len(calls)
        return replies

    def usage(self) -> dict[str, int]:
        return dict(self._usage)

    def _mcq(self, task: Mapping[str, Any]) -> str:
        from shovir.labels import LOCALIZABLE, class_index

        codes = self._labels([task["report"]])[0]
        avoid = {str(q).strip().casefold() for q in task.get("avoid") or ()}
        options = "\n".join(f"{letter}) {option}" for letter, option in zip("ABCD", OFFLINE_OPTIONS))
        items = []
        for finding in LOCALIZABLE:  # one question per finding: the set is exhausted after one reply
            question = _OFFLINE_QUESTION.format(finding=finding.lower())
            if question.casefold() in avoid or len(items) >= int(task["n"]):
                continue
            key = "ABCD"[OFFLINE_OPTIONS.index(_STATUS[codes[class_index(finding)]])]
            items.append(f"**{len(items) + 1}: {question}**\n{options}\nAnswer: {key}")
        return "\n\n".join(items)

    def _answer(self, task: Mapping[str, Any]) -> str:
        from shovir.labels import canonical_class, class_index

        match = _OFFLINE_PATTERN.search(task["question"])
        try:
            finding = canonical_class(match.group("finding")) if match else None
        except ValueError:
            finding = None
        if finding is None:
            return "I can only answer questions about the status of a CheXpert finding."
        report = task.get("report")
        status = "Not mentioned" if report is None else _STATUS[self._labels([report])[0][class_index(finding)]]
        options = [str(o).strip().casefold() for o in task["options"]]
        if status.casefold() not in options:
            return f"The report says {status.lower()}, which is not among the options."
        return "ABCD"[options.index(status.casefold())]

    def _green(self, task: Mapping[str, Any]) -> str:
        from shovir.labels import LOCALIZABLE, class_index
        from shovir.metrics.green import GREEN_CATEGORIES

        reference, candidate = self._labels([task["reference"], task["candidate"]])
        significant: list[list[str]] = [[] for _ in GREEN_CATEGORIES]
        insignificant: list[list[str]] = [[] for _ in GREEN_CATEGORIES]
        matched = []
        normal = class_index("No Finding")
        if reference[normal] == 1 and candidate[normal] == 1:
            matched.append("no acute findings")  # two normal studies agree on their one finding
        for finding in LOCALIZABLE:
            r, c = reference[class_index(finding)], candidate[class_index(finding)]
            name = finding.lower()
            if r == c and r != 0:
                matched.append(f"{name} ({_STATUS[r].lower()})")
            elif c in (1, 3) and r in (0, 2):
                significant[0].append(f"{name} reported but {_STATUS[r].lower()} in the reference")
            elif r in (1, 3) and c in (0, 2):
                significant[1].append(f"{name} {_STATUS[r].lower()} in the reference but {_STATUS[c].lower()}")
            elif {r, c} == {1, 3}:
                significant[3].append(f"{name} {_STATUS[c].lower()} instead of {_STATUS[r].lower()}")
            elif r == 2 and c == 0:
                insignificant[1].append(f"the absence of {name} is not stated")
            elif r == 0 and c == 2:
                insignificant[0].append(f"the absence of {name} is stated but not in the reference")

        def block(errors: list[list[str]]) -> str:
            lines = []
            for category, found in zip(GREEN_CATEGORIES, errors):
                lines.append(f"{category}: {len(found)}." + (" " + "; ".join(found) if found else ""))
            return "\n".join(lines)

        return ("[Explanation]:\nThe offline approximation compares the CheXpert findings of the two reports as read "
                f"by the {self.labeler_name} labeler.\n\n"
                f"[Clinically Significant Errors]:\n{block(significant)}\n\n"
                f"[Clinically Insignificant Errors]:\n{block(insignificant)}\n\n"
                f"[Matched Findings]:\n{len(matched)}." + (" " + "; ".join(matched) if matched else ""))


# --------------------------------------------------------------------------- registry and the caller


BACKENDS = Registry("LLM backend", "shovir.llm_backends", {
    "offline": "shovir.icare.backends:OfflineBackend",
    "openai": "shovir.icare.backends:OpenAIBackend",
    "transformers": "shovir.icare.backends:TransformersBackend",
})
"""Backend name → ``module:Class`` (entry-point group ``shovir.llm_backends``)."""


def get_backend(name: str | Backend = "offline", **options: Any) -> Backend:
    """Build the backend registered as ``name`` with its options (a :class:`Backend` is returned as is).

    >>> get_backend("offline").identity()["backend"]
    'offline'
    >>> get_backend("openai", base_url="http://127.0.0.1:8000/v1", model="m", concurrency=4)
    Traceback (most recent call last):
    ...
    ValueError: LLM backend openai: unknown option 'concurrency' ...
    """
    if isinstance(name, Backend):
        if options:
            raise ValueError("backend_options: give options with a backend name, not with a built backend")
        return name
    target = BACKENDS.load(name, field="backend")
    check_options(target, options, field=f"LLM backend {name}")
    backend = target(**options)
    if not isinstance(backend, Backend):
        raise TypeError(f"{BACKENDS[name]} is not a shovir.icare Backend")
    return backend


class Caller:
    """A backend behind the call cache, with accounting (see the module docstring).

    Args:
        backend: the judge.
        cache: a :class:`~shovir.icare.cache.CallCache`, a path to its JSONL file, or ``None``
            (an in-memory cache for this caller).
        progress: draw a progress bar per batch of new calls.

    >>> caller = Caller(OfflineBackend())
    >>> call = Call("answer", "status of edema?", 10, task={"question": "What is the status of edema?",
    ...             "options": ["Present", "Absent", "Uncertain", "Not mentioned"], "report": "No edema."})
    >>> [r.text for r in caller.run([call, call])], caller.stats
    (['B', 'B'], {'made': 1, 'saved': 1, 'failed': 0})
    >>> caller.run([call])[0].cached, caller.stats["saved"]
    (True, 2)
    """

    def __init__(self, backend: Backend, cache: CallCache | str | Any = None, progress: bool = False) -> None:
        self.backend = backend
        self.cache = cache if isinstance(cache, CallCache) else CallCache(cache)
        self.progress = progress
        self.stats = {"made": 0, "saved": 0, "failed": 0}
        self._identity = backend.identity()

    def key(self, call: Call) -> str:
        """The cache key of ``call`` on this backend."""
        return call_key(self._identity, call.prompt, call.parameters())

    def run(self, calls: Sequence[Call], desc: str = "") -> list[Reply]:
        """One reply per call, in order: cached ones reused, the rest made (each distinct call once)."""
        keys = [self.key(call) for call in calls]
        out: list[Reply | None] = [None] * len(calls)
        pending: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            text = self.cache.get(key)
            if text is not None:
                out[index] = Reply(text=text, cached=True)
            else:
                pending.setdefault(key, []).append(index)
        todo = [calls[indices[0]] for indices in pending.values()]
        self.stats["saved"] += len(calls) - len(todo)
        if todo:
            bar = None
            if self.progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(todo), desc=desc or "LLM calls", unit="call", leave=False)
            lock = threading.Lock()

            def tick() -> None:
                if bar is not None:
                    with lock:
                        bar.update(1)

            try:
                replies = self.backend.complete(todo, on_reply=tick)
            finally:
                if bar is not None:
                    bar.close()
            if len(replies) != len(todo):
                raise RuntimeError(f"LLM backend {self.backend.name}: {len(replies)} replies for {len(todo)} calls")
            self.stats["made"] += len(todo)
            for (key, indices), call, reply in zip(pending.items(), todo, replies):
                if reply.ok:
                    self.cache.put(key, reply.text, backend=self.backend.name,
                                   model=str(self._identity.get("model", self._identity.get("labeler", ""))), kind=call.kind)
                else:
                    self.stats["failed"] += 1
                for index in indices:
                    out[index] = reply
        return [reply if reply is not None else Reply(error="no reply") for reply in out]

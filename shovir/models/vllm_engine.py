"""The offline vLLM engine adapter: a checkpoint served in-process by ``vllm.LLM``.

:class:`VLLMEngine` runs the same conversation as the generic in-process adapter
(:class:`~shovir.models.hf.ImageTextToTextAdapter`) through vLLM's offline engine, which schedules
a whole call's requests itself (continuous batching, paged KV cache, prefix caching). vLLM is
imported on first use (:meth:`VLLMEngine.load` or the first :meth:`~VLLMEngine.generate`):
building the adapter and reading its :meth:`~VLLMEngine.config` work without it.

Requires vLLM >= 0.9.2 (``pip install "shovir[vllm]"`` on a CUDA machine): it passes PIL images in
``LLM.chat`` content parts (``{"type": "image_pil", ...}``, vLLM PR #19635, first released in
0.9.2) and relies on the V1 engine returning *raw* log-probabilities (below).

How a message becomes a request
-------------------------------
The layout is the generic adapter's: an optional system turn (``system_prompt``), then one user
turn holding the message's images, then one text block, the question (``Message.prompt``, else
``prompt``) preceded by the context report when the message has one
(:func:`~shovir.models.pretrained.compose_text` with ``report_template``). Images are converted
by :func:`~shovir.models.images.to_rgb` (8-bit, lossless). ``LLM.chat`` renders the conversation
with the checkpoint's own chat template (or ``chat_template``) and tokenises it without adding
special tokens, so a template's BOS is not doubled.

Each call to :meth:`~VLLMEngine.generate` sends all of its requests to the engine in one
``LLM.chat`` call, with one ``SamplingParams`` per request, and gets one ``RequestOutput`` per
request back, in order.

Decoding
--------
Greedy by default (``temperature=0``). Sampling (``temperature > 0``) needs an integer ``seed``;
each request then carries its own seed, :func:`~shovir.models.decoding.row_seed` of that seed and
the message (``Message.seed``, else the message content), and vLLM draws every request from its
own generator, so a message's text does not depend on the batch it is in. The sampling scheme is
vLLM's, not the in-process adapter's Gumbel-max sampler: sampled texts differ between the two
adapters (greedy texts agree up to float rounding). Settings not exposed here take vLLM's
``SamplingParams`` defaults, not the checkpoint's ``generation_config`` (no top-k, no repetition
penalty), except the end-of-sequence tokens, which vLLM reads from the checkpoint.

Answer scores (closed questions)
--------------------------------
For a message with ``options`` one extra one-token request per option is sent with the generation
request, greedy, forced to that option's first token (``allowed_token_ids=[token]``) with
``logprobs=1``. vLLM's V1 engine computes log-probabilities from the raw logits, before the
allowed-token mask, so the log-probability it reports for the forced token is the log-softmax
over the whole vocabulary at the first generated position: the in-process adapter's score. The
first token of an option is ``tokenizer(option, add_special_tokens=False)["input_ids"][0]``
(``"yes"`` and ``" yes"`` are different options); options sharing a first token are refused. An
engine whose log-probabilities come after the mask (vLLM's old V0 engine, or
``logprobs_mode="processed_logprobs"``) would report 0 for every forced token; with two or more
options that is detected (the options' probabilities would sum to more than one) and refused.

Failures
--------
A request the engine finishes with ``"abort"`` or ``"error"``, or answers without a completion,
makes its message a :meth:`Generation.failure <shovir.models.base.Generation.failure>`: the runner
records it and generates it again on the next run. When the engine refuses a call with a
``ValueError`` (e.g. one prompt longer than ``max_model_len``), each message is sent again on its
own and the ones refused again become failures; an error that every message of the call hits is
not particular to one request and is raised.

GPUs, ranks and tensor parallelism
----------------------------------
One engine per adapter, created on first use and reused. ``tensor_parallel_size=k`` shards the
model over ``k`` GPUs. ``device`` says which: ``None`` or ``"cuda"`` takes the first ``k``
visible GPUs; ``"cuda:N"`` takes the ``N``-th group of ``k``, visible GPUs ``N*k .. N*k+k-1``
(for ``k = 1``, simply GPU ``N``). The sweep runner passes ``device="cuda:<rank>"`` to each rank
of an ``accelerate launch`` sweep, so ``R`` ranks with ``tensor_parallel_size=k`` need ``R*k``
GPUs: launch ``accelerate launch --num_processes <GPUs // k>``. The group is selected by setting
``CUDA_VISIBLE_DEVICES`` while the engine starts (and restoring it afterwards): vLLM's V1 engine
runs in a process of its own, which reads it. A combination that cannot work is refused before
the engine starts: a group beyond the visible GPUs, several launched ranks sharing the default
GPUs (``device`` unset while ``WORLD_SIZE > 1``), or moving the engine off the first GPUs of a
process that has already initialised CUDA while vLLM is told to run its engine in that process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``). ``tensor_parallel_size``, ``gpu_memory_utilization``
and ``device`` do not change outputs and are not part of :meth:`~VLLMEngine.config`.

Example (nothing is imported from vLLM until the first ``generate``)::

    >>> engine = VLLMEngine("org/some-vlm", prompt="Describe the findings.")
    >>> engine.config()["engine"], engine.config()["decoding"]["temperature"]
    ('vllm', 0.0)
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


from shovir.models.base import Generation, Message, ModelAdapter, require, validate_messages
from shovir.models.decoding import first_token_ids, row_seed
from shovir.models.images import to_rgb
from shovir.models.loading import LoadOptions
from shovir.models.pretrained import REPORT_TEMPLATE, check_template, compose_text

__all__ = ["MIN_VLLM", "SAMPLING_SCHEME", "VLLMEngine", "gpu_group"]

MIN_VLLM = (0, 9, 2)
"""The oldest vLLM this adapter supports (PIL images in ``LLM.chat``; V1 raw log-probabilities)."""

SAMPLING_SCHEME = "vllm per-request seed"
"""Recorded in the config when sampling: texts sampled by another scheme are never reused."""

INSTALL = 'pip install "shovir[vllm]" (vLLM >= 0.9.2, on a machine with a CUDA GPU)'

_FAILED_FINISH = ("abort", "error")
"""``CompletionOutput.finish_reason`` values of a request that did not complete."""

_DEVICE = re.compile(r"cuda(?::(\d+))?")


def gpu_group(device: str | None, tensor_parallel_size: int, visible: Sequence[str]) -> list[str]:
    """The visible GPUs (entries of ``CUDA_VISIBLE_DEVICES``) an engine on ``device`` uses.

    ``None`` and ``"cuda"`` take the first ``tensor_parallel_size``; ``"cuda:N"`` takes the
    ``N``-th group of ``tensor_parallel_size`` (see the module docstring).

    >>> gpu_group("cuda:1", 2, ["0", "1", "2", "3"])
    ['2', '3']
    >>> gpu_group(None, 1, ["4", "5"])
    ['4']
    >>> gpu_group("cuda:2", 2, ["0", "1", "2", "3"])
    Traceback (most recent call last):
    ...
    ValueError: device='cuda:2' with tensor_parallel_size=2 needs visible GPUs 4..5, but 4 are visible ...
    """
    index = _device_index(device)
    start = (index or 0) * tensor_parallel_size
    group = list(visible[start:start + tensor_parallel_size])
    if len(group) < tensor_parallel_size:
        where = "no GPU is visible" if not visible else f"{len(visible)} are visible"
        raise ValueError(
            f"device={device!r} with tensor_parallel_size={tensor_parallel_size} needs visible GPUs "
            f"{start}..{start + tensor_parallel_size - 1}, but {where} (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). R launched ranks with tensor_parallel_size=k need R*k GPUs: "
            f"launch fewer processes (GPUs // k), lower tensor_parallel_size, or leave device unset in one process"
        )
    return group


def _device_index(device: str | None) -> int | None:
    if device is None:
        return None
    match = _DEVICE.fullmatch(device)
    if match is None:
        raise ValueError(
            f"device must be None, 'cuda' or 'cuda:N', got {device!r}: vLLM's engine runs on CUDA GPUs (use "
            "hf-image-text-to-text to run on the CPU)"
        )
    return None if match.group(1) is None else int(match.group(1))


def _visible_gpus() -> list[str]:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (ids or UUIDs), else ``0 .. device_count-1``."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    import torch  # vLLM depends on torch; device_count() reads NVML and leaves CUDA uninitialised

    return [str(i) for i in range(torch.cuda.device_count())]


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _version_tuple(version: str) -> tuple[int, ...] | None:
    """``(0, 10, 1)`` for ``"0.10.1.dev12+g1234"``; ``None`` when it does not start with a number.

    >>> _version_tuple("0.10.1rc1+cu126"), _version_tuple("dev")
    ((0, 10, 1), None)
    """
    parts = []
    for piece in version.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:
            break
    return tuple(parts) or None


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class _Request:
    """One request of a call: the generation of message ``owner``, or the score of one of its options."""

    owner: int
    conversation: list[dict[str, Any]]
    params: Any
    option: str | None = None
    token: int | None = None


def _positive_int(value: Any, name: str, fix: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}; {fix}")
    return int(value)


def _optional_str(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or None, got {type(value).__name__}")
    return value


class VLLMEngine(ModelAdapter):
    """A checkpoint served by vLLM's offline engine (``vllm.LLM``) in this process.

    Args:
        checkpoint: a local folder or a Hub id. With ``local_files_only=True`` (the default) a Hub
            id is read from the local Hugging Face cache and the engine gets that folder; nothing
            is downloaded unless ``local_files_only=False``.
        revision: a Hub revision (commit hash recommended).
        dtype: ``float32``, ``float16``, ``bfloat16`` or ``None`` / ``"auto"`` (vLLM's choice from
            the checkpoint's dtype).
        trust_remote_code: run code shipped with the checkpoint; only passed when ``True``.
        local_files_only: read only local files and the local Hub cache (default ``True``).
        tensor_parallel_size: GPUs the model is sharded over (default 1).
        gpu_memory_utilization: share of each GPU's memory the engine may take, in (0, 1]
            (default 0.9).
        max_model_len: the longest prompt plus generation the engine accepts (default: the
            checkpoint's).
        prompt: the question used when a message has none.
        system_prompt: an optional system turn.
        report_template: how a context report precedes the question
            (:data:`~shovir.models.pretrained.REPORT_TEMPLATE`).
        max_new_tokens: the most tokens generated per message (default 512).
        temperature: 0 (the default) decodes greedily; above 0 samples and needs ``seed``.
        top_p: nucleus sampling, in (0, 1]; only when sampling.
        seed: required when sampling; with each message's seed it fixes the sampled text.
        chat_template: a Jinja chat template, or the path of a file holding one; default: the
            checkpoint's own.
        limit_mm_per_prompt: the most items per modality per prompt, e.g. ``{"image": 2}``
            (default: vLLM's for the model); messages with more images are refused.
        device: ``None``, ``"cuda"`` or ``"cuda:N"``: which group of ``tensor_parallel_size``
            visible GPUs the engine uses (module docstring, *GPUs, ranks and tensor parallelism*).
    """

    name = "vllm"
    supports_scores = True
    batch_size = 64

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        revision: str | None = None,
        dtype: str | None = None,
        trust_remote_code: bool = False,
        local_files_only: bool = True,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        prompt: str | None = None,
        system_prompt: str | None = None,
        report_template: str = REPORT_TEMPLATE,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int | None = None,
        chat_template: str | os.PathLike | None = None,
        limit_mm_per_prompt: Mapping[str, int] | None = None,
        device: str | None = None,
    ) -> None:
        if checkpoint is None:
            raise ValueError("checkpoint: pass checkpoint=<local folder or Hugging Face Hub id> for the vllm adapter")
        self.loading = LoadOptions(checkpoint, revision=revision, dtype=dtype, trust_remote_code=trust_remote_code,
                                   local_files_only=local_files_only)
        self.tensor_parallel_size = _positive_int(
            tensor_parallel_size, "tensor_parallel_size", "pass the number of GPUs to shard the model over (1: no sharding)")
        if (not isinstance(gpu_memory_utilization, numbers.Real) or isinstance(gpu_memory_utilization, bool)
                or not 0 < gpu_memory_utilization <= 1):
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {gpu_memory_utilization!r}; "
                             "pass e.g. 0.9 (the share of each GPU's memory the engine may take)")
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.max_model_len = None if max_model_len is None else _positive_int(
            max_model_len, "max_model_len", "pass the longest prompt plus generation in tokens, or None for the checkpoint's")
        self.default_prompt = _optional_str(prompt, "prompt")
        self.system_prompt = _optional_str(system_prompt, "system_prompt")
        self.report_template = check_template(report_template)
        self.max_new_tokens = _positive_int(max_new_tokens, "max_new_tokens", "pass e.g. max_new_tokens=512")
        self.temperature, self.top_p, self.seed = self._check_decoding(temperature, top_p, seed)
        self.chat_template = self._read_template(chat_template)
        self.limit_mm_per_prompt = self._check_limits(limit_mm_per_prompt)
        if device is not None and not isinstance(device, str):
            device = str(device)  # a torch.device, as some launchers give it
        _device_index(device)
        self.device = device
        self._engine: Any = None
        self._vllm: Any = None
        self._tokenizer: Any = None

    # ----- validation of the options
    @staticmethod
    def _check_decoding(temperature: Any, top_p: Any, seed: Any) -> tuple[float, float | None, int | None]:
        if not isinstance(temperature, numbers.Real) or isinstance(temperature, bool) or not temperature >= 0 \
                or math.isinf(temperature):
            raise ValueError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        sampling = temperature > 0
        if sampling and seed is None:
            raise ValueError(
                f"seed: sampling (temperature={temperature!r}) needs an explicit integer seed so that outputs are "
                "reproducible; pass seed=<int>, or temperature=0 to decode greedily"
            )
        if top_p is not None:
            if not isinstance(top_p, numbers.Real) or isinstance(top_p, bool) or not 0 < top_p <= 1:
                raise ValueError(f"top_p must be a number in (0, 1] or None, got {top_p!r}")
            if not sampling and top_p != 1:
                raise ValueError(f"top_p={top_p!r} only matters when sampling; pass temperature > 0 and a seed, "
                                 "or leave top_p unset")
        return float(temperature), None if top_p is None else float(top_p), None if seed is None else int(seed)

    @staticmethod
    def _read_template(chat_template: Any) -> str | None:
        if chat_template is None:
            return None
        if isinstance(chat_template, os.PathLike):
            chat_template = os.fspath(chat_template)
        if not isinstance(chat_template, str) or not chat_template.strip():
            raise ValueError(f"chat_template must be a Jinja template, the path of a file holding one, or None (the "
                             f"checkpoint's own), got {chat_template!r}")
        if "{" not in chat_template and os.path.isfile(os.path.expanduser(chat_template)):
            with open(os.path.expanduser(chat_template), encoding="utf-8") as handle:
                return handle.read()
        if "{" not in chat_template:
            raise ValueError(f"chat_template: {chat_template!r} is neither a Jinja template nor an existing file; pass "
                             "the template text or the path of a .jinja file")
        return chat_template

    @staticmethod
    def _check_limits(limits: Any) -> dict[str, int] | None:
        if limits is None:
            return None
        if not isinstance(limits, Mapping) or not all(isinstance(k, str) for k in limits):
            raise ValueError(f"limit_mm_per_prompt must be a mapping such as {{'image': 2}} or None, got {limits!r}")
        checked = {}
        for modality, count in limits.items():
            if not isinstance(count, numbers.Integral) or isinstance(count, bool) or count < 0:
                raise ValueError(f"limit_mm_per_prompt[{modality!r}] must be an integer >= 0, got {count!r}")
            checked[modality] = int(count)
        if checked.get("image", 1) < 1:
            raise ValueError("limit_mm_per_prompt['image'] must be at least 1: every message carries an image")
        return checked

    # ----- configuration
    @property
    def sampling(self) -> bool:
        """Whether decoding samples (``temperature > 0``)."""
        return self.temperature > 0

    def config(self) -> dict[str, Any]:
        """What determines the outputs: checkpoint, revision, dtype, prompts, template, decoding, engine.

        Not the placement (``tensor_parallel_size``, ``gpu_memory_utilization``, ``device``).
        """
        decoding: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                                    "top_p": self.top_p, "seed": self.seed if self.sampling else None}
        if self.sampling:
            decoding["sampling"] = SAMPLING_SCHEME
        return {
            "name": self.name,
            "engine": "vllm",
            "checkpoint": self.loading.checkpoint,
            "revision": self.loading.revision,
            "dtype": self.loading.dtype,
            "prompt": self.default_prompt,
            "system_prompt": self.system_prompt,
            "report_template": self.report_template,
            "chat_template": self.chat_template,
            "max_model_len": self.max_model_len,  # a generation that reaches it is cut there
            "decoding": decoding,
        }

    # ----- the engine
    def engine_kwargs(self) -> dict[str, Any]:
        """The keywords of ``vllm.LLM`` (resolving a Hub id to its cached folder when offline)."""
        if self.loading.is_local:
            model, revision = self.loading.path, None
        elif self.loading.local_files_only:
            model, revision = self.loading.snapshot(), None  # the snapshot of that revision, from the cache
        else:
            model, revision = self.loading.path, self.loading.revision
        kwargs: dict[str, Any] = {
            "model": model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "dtype": self.loading.dtype,
        }
        if revision is not None:
            kwargs["revision"] = kwargs["tokenizer_revision"] = revision
        if self.max_model_len is not None:
            kwargs["max_model_len"] = self.max_model_len
        if self.loading.trust_remote_code:
            kwargs["trust_remote_code"] = True
        if self.seed is not None and self.sampling:
            kwargs["seed"] = self.seed  # requests carry their own seeds; this only seeds the engine
        if self.limit_mm_per_prompt is not None:
            kwargs["limit_mm_per_prompt"] = dict(self.limit_mm_per_prompt)
        return kwargs

    def _placement_environment(self) -> dict[str, str]:
        """The environment the engine starts in: its GPU group and, offline, no Hub access."""
        environment: dict[str, str] = {}
        if self.loading.local_files_only:
            environment["HF_HUB_OFFLINE"] = "1"  # read by the engine's own process when it imports huggingface_hub
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        index = _device_index(self.device)
        if index is None:
            if world > 1:
                raise ValueError(
                    f"device: this process is one of {world} launched ranks, and with device unset every rank would "
                    "start its engine on the same GPUs; leave device to the sweep runner (it passes cuda:<rank>) or "
                    "pass device='cuda:N' per rank"
                )
            return environment  # vLLM's own choice: the first tensor_parallel_size visible GPUs
        group = gpu_group(self.device, self.tensor_parallel_size, _visible_gpus())
        if index > 0:
            in_process = (os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"
                          or os.environ.get("VLLM_USE_V1", "1") == "0")
            if in_process and _cuda_initialised():
                raise ValueError(
                    f"device={self.device!r}: CUDA is already initialised in this process and the vLLM engine would run "
                    f"in it (VLLM_ENABLE_V1_MULTIPROCESSING=0 or VLLM_USE_V1=0), so it cannot be moved to GPUs {group}; "
                    "unset those variables (the V1 engine then runs in its own process), or start this process with "
                    f"CUDA_VISIBLE_DEVICES={','.join(group)} and device unset"
                )
            environment["CUDA_VISIBLE_DEVICES"] = ",".join(group)
        return environment

    def load(self) -> VLLMEngine:
        """Start the engine now (otherwise the first :meth:`generate` does); once per adapter."""
        if self._engine is None:
            vllm = require("vllm", INSTALL)
            version = _version_tuple(str(getattr(vllm, "__version__", "")))
            if version is not None and version < MIN_VLLM:
                raise ImportError(f"the vllm adapter needs vLLM >= {'.'.join(map(str, MIN_VLLM))} (PIL images in "
                                  f"LLM.chat, raw log-probabilities), found {vllm.__version__}: {INSTALL}")
            kwargs = self.engine_kwargs()
            with _environment(self._placement_environment()):
                engine = vllm.LLM(**kwargs)
            self._engine, self._vllm = engine, vllm
        return self

    @property
    def engine(self) -> Any:
        """The ``vllm.LLM`` (started on first use)."""
        return self.load()._engine

    # ----- messages
    def question(self, message: Message, index: int = 0) -> str:
        """The message's prompt, else the adapter's ``prompt``."""
        question = message.prompt if message.prompt is not None else self.default_prompt
        if question is None:
            raise ValueError(f"messages[{index}].prompt is None and the vllm adapter has no default prompt; pass "
                             "prompt=...")
        if not isinstance(question, str):
            raise ValueError(f"messages[{index}].prompt must be a string, got {type(question).__name__}")
        return question

    def user_text(self, message: Message, index: int = 0) -> str:
        """The text block of the user turn (report, then question)."""
        return compose_text(self.question(message, index), message.report, self.report_template)

    def conversation(self, message: Message, index: int = 0) -> list[dict[str, Any]]:
        """The chat sent for one message: optional system turn; user turn = images, then text."""
        images = [{"type": "image_pil", "image_pil": to_rgb(image, field=f"messages[{index}].images")}
                  for image in message.images]
        turns: list[dict[str, Any]] = []
        if self.system_prompt is not None:
            turns.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        turns.append({"role": "user", "content": images + [{"type": "text", "text": self.user_text(message, index)}]})
        return turns

    def sampling_params(self, message: Message) -> Any:
        """The ``SamplingParams`` of the generation request for ``message``."""
        kwargs: dict[str, Any] = {"max_tokens": self.max_new_tokens, "temperature": self.temperature}
        if self.sampling:
            kwargs["seed"] = row_seed(self.seed, message)
            if self.top_p is not None:
                kwargs["top_p"] = self.top_p
        return self.load()._vllm.SamplingParams(**kwargs)

    def option_token_ids(self, options: Sequence[str], index: int = 0) -> list[int]:
        """The first token id of each option (no special tokens added); refuses collisions."""
        if self._tokenizer is None:
            self._tokenizer = self.engine.get_tokenizer()
        tokenizer = self._tokenizer
        return first_token_ids(tokenizer, options, index)

    def _validate(self, messages: Sequence[Message]) -> list[Message]:
        most = None if self.limit_mm_per_prompt is None else self.limit_mm_per_prompt.get("image")
        return validate_messages(messages, max_images=most, too_many_images="raise limit_mm_per_prompt['image']",
                                 question=self.question)

    # ----- generation
    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One :class:`Generation` per message, in order, from one engine call."""
        checked = self._validate(messages)
        if not checked:
            return []
        vllm = self.load()._vllm
        requests: list[_Request] = []
        for index, message in enumerate(checked):
            conversation = self.conversation(message, index)
            requests.append(_Request(index, conversation, self.sampling_params(message)))
            if message.options:
                for option, token in zip(message.options, self.option_token_ids(message.options, index)):
                    params = vllm.SamplingParams(max_tokens=1, temperature=0.0, logprobs=1, allowed_token_ids=[token])
                    requests.append(_Request(index, conversation, params, option, token))
        outcome = self._submit(requests, len(checked))
        return self._check_batch(checked, [self._finish(message, outcome[i]) for i, message in enumerate(checked)])

    def _chat(self, requests: Sequence[_Request]) -> list[Any]:
        kwargs: dict[str, Any] = {"use_tqdm": False}
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        outputs = list(self.engine.chat([r.conversation for r in requests], [r.params for r in requests], **kwargs))
        if len(outputs) != len(requests):
            raise RuntimeError(f"vllm: {len(outputs)} outputs for {len(requests)} requests")
        return outputs

    def _submit(self, requests: list[_Request], count: int) -> list[list[tuple[_Request, Any]] | str]:
        """Per message, its (request, output) pairs, or the reason the engine refused it."""
        try:
            outputs = self._chat(requests)
        except ValueError as error:
            if count == 1:
                raise
            return self._submit_one_by_one(requests, count, error)
        outcome: list[list[tuple[_Request, Any]] | str] = [[] for _ in range(count)]
        for request, output in zip(requests, outputs):
            outcome[request.owner].append((request, output))  # type: ignore[union-attr]
        return outcome

    def _submit_one_by_one(self, requests: list[_Request], count: int,
                           error: ValueError) -> list[list[tuple[_Request, Any]] | str]:
        """After a refused call: each message on its own, so one bad request fails only its message."""
        outcome: list[list[tuple[_Request, Any]] | str] = []
        refusals: list[ValueError] = []
        for owner in range(count):
            mine = [r for r in requests if r.owner == owner]
            try:
                outcome.append(list(zip(mine, self._chat(mine))))
            except ValueError as refused:
                refusals.append(refused)
                outcome.append(f"vllm refused the request: {refused}")
        if len(refusals) == count:
            raise error  # every message is refused: the call's problem, not one request's
        return outcome

    def _finish(self, message: Message, outcome: list[tuple[_Request, Any]] | str) -> Generation:
        if isinstance(outcome, str):
            return Generation.failure(outcome)
        text: str | None = None
        scores: dict[str, float] = {}
        for request, output in outcome:
            completions = getattr(output, "outputs", None)
            if not completions:
                return Generation.failure("vllm returned no completion for the request")
            completion = completions[0]
            reason = getattr(completion, "finish_reason", None)
            if reason is not None and str(reason) in _FAILED_FINISH:
                what = "generation" if request.option is None else f"score of option {request.option!r}"
                return Generation.failure(f"vllm: the {what} request finished with {str(reason)!r}")
            if request.option is None:
                text = completion.text
                continue
            logprobs = getattr(completion, "logprobs", None)
            first = logprobs[0] if logprobs else None
            entry = None if first is None else first.get(request.token)
            if entry is None:
                return Generation.failure(f"vllm returned no log-probability for option {request.option!r} "
                                          f"(token {request.token})")
            scores[request.option] = float(getattr(entry, "logprob", entry))
        if text is None:
            return Generation.failure("vllm returned no generation for the message")
        if message.options:
            self._check_raw(scores)
        return Generation(text=text.strip(), scores=scores if message.options else None)

    @staticmethod
    def _check_raw(scores: Mapping[str, float]) -> None:
        """Refuse scores that cannot be log-probabilities over the whole vocabulary."""
        if len(scores) < 2:
            return
        top = max(scores.values())
        total = top + math.log(sum(math.exp(v - top) for v in scores.values()))
        if total > 0.05:
            raise RuntimeError(
                f"vllm returned option log-probabilities {dict(scores)} whose probabilities sum to {math.exp(total):.2f} "
                "> 1: they were taken after the allowed-token mask (the V0 engine, or logprobs_mode="
                "'processed_logprobs'); use vLLM >= 0.9.2 with its V1 engine and the default logprobs_mode"
            )

"""Decoding: the settings, sampling seeded per message, stop strings and output clean-up.

Sampling is reproducible, per message (reference §9, defect 7)
--------------------------------------------------------------
Greedy decoding is the default. ``do_sample=True`` needs an explicit integer ``seed``, and the
text sampled for a message then depends only on that seed and the message: not on the batch size,
on which messages share a batch or in what order, on the device the noise is used on, nor on the
caller's random state (which is never touched).

Hugging Face ``generate`` draws every row of a batch from torch's one global generator, so the
draw is made here instead. :class:`SeededRowSampler` is a logits processor that, at each step,
warps the scores as transformers does when sampling (temperature, then top-k, then top-p) and
picks one token per row by the Gumbel-max trick, ``argmax(score + Gumbel noise)``, which is an
exact draw from ``softmax(score)``; every other token's score becomes ``-inf``, so ``generate``
runs greedily (``do_sample=False``) and keeps exactly that token. Each row has its own CPU
``torch.Generator``, seeded by :func:`row_seed` from the decoding seed and the message's own
``seed`` (set by the sweep runner from the run seed and the generation key) or, when that is
``None``, a digest of the message's content (prompt, report, options, image bytes). A row takes
one draw per step whatever the other rows do, and the noise is drawn on the CPU before it is
moved, so the same seed gives the same noise on any device.

What can still move a sampled token is what moves a greedy one: the model's own scores differ by
float rounding between devices, dtypes and padded batch shapes, which matters only at near ties.
The noise costs one draw per vocabulary entry per row per step on the CPU (about 2 ms per row per
step for a 262k vocabulary on one core), so sampling is slower than greedy decoding.

Settings left ``None`` (``temperature``, ``top_k``, ``top_p``) take the checkpoint's
``generation_config`` values, else transformers' defaults (1.0, 50, 1.0), as ``generate`` would.
What this sampler cannot honour is refused: sampling with beam search (``num_beams > 1``) and the
checkpoint's other sampling warpers (``min_p``, ``typical_p``, ``epsilon_cutoff``,
``eta_cutoff``, ``top_h``).

The reasoning trace is not scored
---------------------------------
NV-Reason-CXR's ``<think>`` block goes to ``Generation.reasoning`` (:func:`split_reasoning`);
§5.3 notes the authors never stripped it.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from shovir.models.base import Message

__all__ = [
    "first_token_ids",
    "Decoding",
    "SeededRowSampler",
    "left_pad",
    "message_digest",
    "row_seed",
    "split_reasoning",
    "stop_on_strings",
    "truncate_at",
]

_WARPER_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}
"""transformers' values for sampling settings that neither the user nor the checkpoint set."""

_UNSUPPORTED_WARPERS = {
    "min_p": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "top_h": (None,),
}
"""Sampling warpers :class:`SeededRowSampler` does not apply, with the values that mean "off"."""

SAMPLING_SCHEME = "per-message Gumbel-max"
"""Recorded in :meth:`Decoding.as_config` when sampling, so that texts sampled by another scheme are never reused."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Decoding:
    """Decoding settings, validated; exactly one of ``max_new_tokens`` and ``max_length``.

    >>> Decoding(max_new_tokens=10).generate_kwargs()
    {'max_new_tokens': 10, 'do_sample': False, 'num_beams': 1, 'use_cache': True}
    >>> Decoding(max_new_tokens=10, do_sample=True)
    Traceback (most recent call last):
    ...
    ValueError: seed: sampling (do_sample=True) needs an explicit integer seed ...
    >>> Decoding(max_new_tokens=10, do_sample=True, seed=1, num_beams=4)
    Traceback (most recent call last):
    ...
    ValueError: num_beams=4: beam search cannot be combined with per-message seeded sampling; ...
    """

    max_new_tokens: int | None = None
    max_length: int | None = None
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    num_beams: int = 1
    use_cache: bool = True
    seed: int | None = None

    def __post_init__(self) -> None:
        if (self.max_new_tokens is None) == (self.max_length is None):
            raise ValueError("give exactly one of max_new_tokens and max_length")
        for field in ("max_new_tokens", "max_length", "num_beams"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{field} must be a positive integer, got {value!r}")
        if not isinstance(self.do_sample, bool) or not isinstance(self.use_cache, bool):
            raise ValueError("do_sample and use_cache must be booleans")
        if self.do_sample:
            if not isinstance(self.seed, int) or isinstance(self.seed, bool):
                raise ValueError(
                    "seed: sampling (do_sample=True) needs an explicit integer seed so that outputs are reproducible; "
                    f"pass seed=<int> (got {self.seed!r}) or keep do_sample=False"
                )
            if self.num_beams > 1:
                raise ValueError(
                    f"num_beams={self.num_beams}: beam search cannot be combined with per-message seeded sampling; "
                    "pass num_beams=1 to sample, or do_sample=False for beam search"
                )
            if self.temperature is not None and not self.temperature > 0:
                raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature!r}")
            if self.top_p is not None and not 0 < self.top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
            if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
                raise ValueError(f"top_k must be a positive integer, got {self.top_k!r}")
        else:
            for field, neutral in (("temperature", 1.0), ("top_p", 1.0)):
                value = getattr(self, field)
                if value is not None and value != neutral:
                    raise ValueError(f"{field}={value!r} only matters when sampling; pass do_sample=True and a seed")
            if self.top_k is not None:
                raise ValueError(f"top_k={self.top_k!r} only matters when sampling; pass do_sample=True and a seed")

    def generate_kwargs(self, messages: Sequence[Message] | None = None, *,
                        generation_config: Any = None) -> dict[str, Any]:
        """Keyword arguments for ``model.generate`` on a batch of ``messages``.

        Greedy decoding needs no messages. Sampling needs the batch's messages, in row order: it
        returns ``do_sample=False`` and a ``logits_processor`` list holding this batch's
        :class:`SeededRowSampler` (built by :meth:`sampler` with the model's
        ``generation_config``), so pass the result to exactly one ``generate`` call.

        >>> Decoding(max_length=64, num_beams=2).generate_kwargs()
        {'max_length': 64, 'do_sample': False, 'num_beams': 2, 'use_cache': True}
        """
        kwargs: dict[str, Any] = {}
        if self.max_new_tokens is not None:
            kwargs["max_new_tokens"] = self.max_new_tokens
        else:
            kwargs["max_length"] = self.max_length
        if not self.do_sample:
            kwargs.update(do_sample=False, num_beams=self.num_beams, use_cache=self.use_cache)
            for field in ("temperature", "top_p", "top_k"):  # neutral values only (checked above)
                value = getattr(self, field)
                if value is not None:
                    kwargs[field] = value
            return kwargs
        if messages is None:
            raise ValueError(
                "messages: sampling (do_sample=True) seeds one stream per message; pass the batch's messages to "
                "generate_kwargs(messages)"
            )
        from transformers import LogitsProcessorList

        # the sampler picks the token; generate's own sampling would draw again from the global generator
        kwargs.update(do_sample=False, num_beams=1, use_cache=self.use_cache,
                      logits_processor=LogitsProcessorList([self.sampler(messages, generation_config)]))
        return kwargs

    def warping(self, generation_config: Any = None) -> dict[str, Any]:
        """Temperature, top-k and top-p of a sampled step: these settings, else the checkpoint's, else transformers'.

        >>> Decoding(max_new_tokens=5, do_sample=True, seed=1, top_p=0.9).warping()
        {'temperature': 1.0, 'top_k': 50, 'top_p': 0.9}
        """
        settings: dict[str, Any] = {}
        for name, default in _WARPER_DEFAULTS.items():
            value = getattr(self, name)
            if value is None:
                value = getattr(generation_config, name, None)
            settings[name] = default if value is None else value
        for name, off in _UNSUPPORTED_WARPERS.items():
            value = getattr(generation_config, name, None)
            if value not in off:
                raise ValueError(
                    f"generation_config.{name}={value!r} (set by the checkpoint) is a sampling warper that per-message "
                    f"seeded sampling does not apply; decode greedily (do_sample=False), or set {name} to "
                    f"{off[-1]!r} in the checkpoint folder's generation_config.json"
                )
        return settings

    def sampler(self, messages: Sequence[Message], generation_config: Any = None) -> Any:
        """A fresh :class:`SeededRowSampler` for one ``generate`` call on ``messages`` (one row each)."""
        if not self.do_sample:
            raise ValueError("do_sample: a sampler is only built when sampling; pass do_sample=True and a seed")
        seeds = [row_seed(self.seed, message) for message in messages]
        return _sampler_class()(seeds, **self.warping(generation_config))

    def as_config(self) -> dict[str, Any]:
        """The settings as a plain dict; the seed and the sampling scheme only when sampling (greedy ignores both).

        >>> Decoding(max_new_tokens=5, do_sample=True, seed=3).as_config()["seed"]
        3
        >>> Decoding(max_new_tokens=5, seed=3).as_config()["seed"] is None
        True
        """
        config = asdict(self)
        if self.do_sample:
            config["sampling"] = SAMPLING_SCHEME
        else:
            config["seed"] = None
        return config


# --------------------------------------------------------------------------- seeds


def message_digest(message: Message) -> bytes:
    """A SHA-256 of what the model sees of ``message``: prompt, report, options and image bytes.

    ``Message.seed`` is not part of it.

    >>> from PIL import Image
    >>> a = Message(images=[Image.new("L", (2, 2), 0)], prompt="Describe.")
    >>> b = Message(images=[Image.new("L", (2, 2), 1)], prompt="Describe.")
    >>> message_digest(a) == message_digest(a) != message_digest(b)
    True
    """
    digest = hashlib.sha256()
    for part in (message.prompt, message.report, "\x1f".join(message.options or [])):
        digest.update(repr(part).encode("utf-8"))
    for image in message.images:
        digest.update(f"{image.mode}|{image.size}".encode())
        digest.update(image.tobytes())
    return digest.digest()


def row_seed(seed: int, message: Message) -> int:
    """The 63-bit seed of one message's sampling stream (stable across processes and machines).

    It comes from the decoding ``seed`` and ``message.seed`` or, when that is ``None``, from
    :func:`message_digest`: two messages with the same content and no seed of their own draw the
    same stream.

    >>> from PIL import Image
    >>> m = Message(images=[Image.new("L", (2, 2))], prompt="Describe.")
    >>> row_seed(3, m) == row_seed(3, m) != row_seed(4, m)
    True
    >>> row_seed(3, Message(images=m.images, prompt="Other.", seed=1)) == row_seed(3, Message(images=[], seed=1))
    True
    """
    digest = hashlib.sha256(f"shovir-sampling|{int(seed)}|".encode())
    if message.seed is not None:
        if not isinstance(message.seed, numbers.Integral) or isinstance(message.seed, bool):
            raise ValueError(f"message.seed must be an integer or None, got {message.seed!r}")
        digest.update(f"message-seed|{int(message.seed)}".encode())
    else:
        digest.update(b"message-content|" + message_digest(message))
    return int.from_bytes(digest.digest()[:8], "little") & (2**63 - 1)


# --------------------------------------------------------------------------- the sampler

_SAMPLER_DOC = """Sample one token per row from that row's own seeded stream; all other scores become -inf.

A ``transformers.LogitsProcessor`` for ``generate(do_sample=False, logits_processor=[...])``
(see :mod:`shovir.models.decoding`). Each call is one step: the scores are warped
(temperature, top-k, top-p, transformers' own warpers in transformers' order), then row ``i``
takes ``argmax(score + Gumbel noise)`` with noise drawn on the CPU from a ``torch.Generator``
seeded with ``seeds[i]``. Every row advances its generator by one draw per step, so a row's tokens
do not depend on the other rows; build one sampler per ``generate`` call.

Args:
    seeds: one seed per row of the batch (:func:`row_seed`).
    temperature, top_k, top_p: the warping; ``1.0``, ``None`` (or ``0``) and ``1.0`` leave the
        scores as they are.

A row whose only finite score is the last token's always gets that token:

>>> import torch
>>> from shovir.models.decoding import SeededRowSampler
>>> sampler = SeededRowSampler([5])
>>> scores = torch.tensor([[float("-inf"), float("-inf"), 0.3]])
>>> [sampler(None, scores).tolist() for _ in range(3)]
[[[-inf, -inf, 0.0]], [[-inf, -inf, 0.0]], [[-inf, -inf, 0.0]]]

A row's draw depends on its seed, not on its neighbours:

>>> flat = torch.zeros(1, 1000)
>>> alone = SeededRowSampler([7])(None, flat).argmax(-1)
>>> among = SeededRowSampler([3, 7, 9])(None, flat.repeat(3, 1)).argmax(-1)
>>> int(alone[0]) == int(among[1]) and among.unique().numel() == 3
True
"""

SeededRowSampler: type
# Built on first use (PEP 562 ``__getattr__`` below): it subclasses transformers' LogitsProcessor,
# and importing transformers (and torch) just to import an adapter module would cost seconds.

__test__ = {"SeededRowSampler": _SAMPLER_DOC}  # doctest cannot find a class created lazily


@functools.cache
def _sampler_class() -> type:
    import torch
    from transformers import (
        LogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    class SeededRowSampler(LogitsProcessor):
        __doc__ = _SAMPLER_DOC

        def __init__(self, seeds: Sequence[int], *, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float = 1.0) -> None:
            if not seeds:
                raise ValueError("seeds: the sampler needs one seed per row of the batch, got none")
            self.seeds = [int(seed) for seed in seeds]
            self.generators = [torch.Generator(device="cpu").manual_seed(seed) for seed in self.seeds]
            self.warpers: list[Any] = []
            # the conditions under which generate itself would add each warper, in its order
            if temperature != 1.0:
                self.warpers.append(TemperatureLogitsWarper(temperature))
            if top_k is not None and top_k != 0:
                self.warpers.append(TopKLogitsWarper(top_k=top_k))
            if top_p < 1.0:
                self.warpers.append(TopPLogitsWarper(top_p=top_p))

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if scores.shape[0] != len(self.generators):
                raise ValueError(
                    f"scores has {scores.shape[0]} rows for {len(self.generators)} seeds: per-message sampling needs "
                    "one row per message (num_beams=1, num_return_sequences=1)"
                )
            for warper in self.warpers:
                scores = warper(input_ids, scores)
            vocabulary = scores.shape[-1]
            tiny = torch.finfo(torch.float32).tiny  # keeps log(0) out of the noise
            uniform = torch.stack([torch.rand(vocabulary, generator=g) for g in self.generators])
            gumbel = uniform.clamp_(min=tiny).log_().neg_().log_().neg_()
            choice = (scores.float() + gumbel.to(scores.device)).argmax(dim=-1, keepdim=True)
            return torch.full_like(scores, float("-inf")).scatter_(1, choice, 0.0)

    SeededRowSampler.__module__, SeededRowSampler.__qualname__ = __name__, "SeededRowSampler"  # pickles by name
    return SeededRowSampler


def __getattr__(name: str) -> Any:
    if name == "SeededRowSampler":
        return _sampler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- batches and stopping


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """Left-pad token id lists into ``(input_ids, attention_mask)`` long tensors.

    >>> ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    import torch

    if not sequences:
        raise ValueError("left_pad needs at least one sequence")
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if len(sequence):
            ids[row, width - len(sequence):] = torch.as_tensor(list(sequence), dtype=torch.long)
            mask[row, width - len(sequence):] = 1
    return ids, mask


def stop_on_strings(tokenizer: Any, stops: Sequence[str], prompt_length: int) -> Any:
    """A batch-aware stopping criterion: row ``i`` is done once its new text contains a stop string.

    LLaVA-style ``KeywordsStoppingCriteria`` looks at one sequence only; this one returns one flag
    per row, which transformers ≥ 4.39 uses to stop rows independently. Older transformers (which
    research repositories often pin) stop the whole batch as soon as any criterion is true, so
    there it answers ``True`` only when every row is done; rows that finished earlier are cut at the
    stop string afterwards (:func:`truncate_at`), which gives the same text under greedy decoding
    (and under seeded sampling, whose draws do not depend on when the batch stops).
    Only the last few tokens of each row are decoded at each step.
    """
    import torch
    import transformers
    from packaging.version import Version
    from transformers import StoppingCriteria

    per_row = Version(transformers.__version__.split("+")[0]) >= Version("4.39")

    stops = [s for s in stops if s]
    window = max([len(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in stops] + [1]) + 3

    class _StopOnStrings(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            new = input_ids[:, prompt_length:]
            done = []
            for row in new:
                tail = tokenizer.decode(row[-window:], skip_special_tokens=False)
                done.append(any(stop in tail for stop in stops))
            if not per_row:
                return all(done)
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return _StopOnStrings()


# --------------------------------------------------------------------------- output text


def truncate_at(text: str, stops: Sequence[str]) -> str:
    """Cut ``text`` at the first stop string and strip it (LLaVA-style conversation separators).

    >>> truncate_at("No effusion.</s>USER: more", ["</s>"])
    'No effusion.'
    >>> truncate_at("No effusion.", ["###"])
    'No effusion.'
    """
    cut = len(text)
    for stop in stops:
        if stop:
            index = text.find(stop)
            if index != -1:
                cut = min(cut, index)
    return text[:cut].strip()


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Split a reasoning model's output into ``(answer, reasoning)``.

    ``<think>…</think>`` blocks are the reasoning (joined by a blank line when there are several);
    what is left is the answer, and an ``<answer>…</answer>`` block, when present, is the answer
    itself. A closing ``</think>`` without an opening tag (a template that pre-writes ``<think>``)
    makes everything before it reasoning. An unclosed ``<think>`` (generation cut by the token
    limit) makes the rest reasoning and the answer empty: a trace is never scored as a report.

    >>> split_reasoning("<think>Look at the heart.</think>\\n<answer>Cardiomegaly</answer>")
    ('Cardiomegaly', 'Look at the heart.')
    >>> split_reasoning("Lungs are clear.")
    ('Lungs are clear.', None)
    >>> split_reasoning("Check the costophrenic angles.</think>Small effusion.")
    ('Small effusion.', 'Check the costophrenic angles.')
    >>> split_reasoning("<think>The heart is")
    ('', 'The heart is')
    >>> split_reasoning("<think>a</think> <think>b</think> Normal.")
    ('Normal.', 'a\\n\\nb')
    >>> split_reasoning("<think>x</think><answer>Edema")
    ('Edema', 'x')
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    reasoning: list[str] = []
    rest = text
    first_open, first_close = rest.find("<think>"), rest.find("</think>")
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        reasoning.append(rest[:first_close].strip())
        rest = rest[first_close + len("</think>"):]
    reasoning.extend(block.strip() for block in _THINK.findall(rest))
    rest = _THINK.sub("", rest)
    dangling = rest.find("<think>")
    if dangling != -1:
        reasoning.append(rest[dangling + len("<think>"):].strip())
        rest = rest[:dangling]
    answer = _ANSWER.search(rest)
    text_out = answer.group(1) if answer else rest
    text_out = text_out.replace("</answer>", "").replace("<answer>", "").strip()
    return text_out, ("\n\n".join(reasoning) if reasoning else None)


def first_token_ids(tokenizer: Any, options: Sequence[str], index: int = 0) -> list[int]:
    """The first token id of each option (no special tokens added), refusing options that share
    one: first-token answer scores could not tell them apart.

    >>> first_token_ids(lambda text, add_special_tokens: {"input_ids": [ord(text[0])]}, ["yes", "no"])
    [121, 110]
    """
    ids = []
    for option in options:
        tokens = tokenizer(option, add_special_tokens=False)["input_ids"]
        if not tokens:
            raise ValueError(f"messages[{index}].options: {option!r} gives no tokens")
        ids.append(int(tokens[0]))
    if len(set(ids)) != len(ids):
        clash = [o for o, i in zip(options, ids) if ids.count(i) > 1]
        raise ValueError(
            f"messages[{index}].options {clash} share their first token, so first-token scores cannot separate "
            "them; reword the options (e.g. 'yes'/'no', or letters)"
        )
    return ids

"""The generic Hugging Face adapter: any image-text-to-text checkpoint with a chat template.

:class:`ImageTextToTextAdapter` runs any ``AutoModelForImageTextToText`` checkpoint that has a chat
template (LLaVA, Qwen2.5-VL, Gemma 3, Idefics, ...). :class:`~shovir.models.medgemma.MedGemma` and
:class:`~shovir.models.nv_reason.NVReasonCXR` are thin subclasses with the ShoViR authors'
settings. The pieces every shovir adapter shares live beside it: loading options in
:mod:`shovir.models.loading`, decoding and seeded sampling in :mod:`shovir.models.decoding`, image
conversion in :mod:`shovir.models.images` and the base class in :mod:`shovir.models.pretrained`.
This module re-exports their former names (``from shovir.models.hf import Decoding`` keeps
working).

How a message becomes model input (generic adapter)
---------------------------------------------------
One user turn holds the message's images, then one text block (``image_first=False`` puts the text
first; ModaLens tested both orders). The text block is the question (``Message.prompt``, else the
adapter's ``prompt``); when the message carries a ``report`` (the ModaLens "with report" arm) the
report comes first, through :data:`~shovir.models.pretrained.REPORT_TEMPLATE`::

    Radiology report:
    <report>

    <question>

An optional ``system_prompt`` adds a system turn. The conversation goes through the processor's
own chat template (``processor.apply_chat_template(..., tokenize=True)``, which also keeps a
template's BOS from being doubled), batched with **left padding**. Prompt tokens are sliced off the
output and the rest is decoded with ``skip_special_tokens=True``. Images are converted by
:func:`~shovir.models.images.to_rgb` (8-bit, lossless, grayscale repeated on three channels).

Sampling (``do_sample=True`` with a ``seed``) goes through
:class:`~shovir.models.decoding.SeededRowSampler`: each message's text depends only on the seed and
the message, not on the batch it shares (see :mod:`shovir.models.decoding`).

Answer scores (ModaLens margins)
--------------------------------
When a message has ``options``, :class:`ImageTextToTextAdapter` runs one extra one-token pass
(``generate(max_new_tokens=1, output_logits=True)``, which builds the inputs, positions and image
features exactly as generation does) and returns, for each option, the log-softmax of the raw
logits at the first generated position, taken at the option's first token
(``tokenizer(option, add_special_tokens=False)``, so ``"yes"`` and ``" yes"`` are different
options). Options that share a first token cannot be told apart and are refused.

Example (no weights are loaded until the first :meth:`~shovir.models.base.ModelAdapter.generate`)::

    >>> adapter = ImageTextToTextAdapter("org/some-vlm", prompt="Describe the findings.")
    >>> adapter.config()["prompt"], adapter.config()["decoding"]["max_new_tokens"]
    ('Describe the findings.', 512)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from shovir.models.base import Generation, Message
from shovir.models.decoding import (
    first_token_ids,
    Decoding,
    left_pad,
    split_reasoning,
    stop_on_strings,
    truncate_at,
)
from shovir.models.images import to_8bit, to_rgb
from shovir.models.loading import (
    canonical_dtype,
    local_snapshot,
    resolve_checkpoint,
    torch_dtype,
)
from shovir.models.pretrained import REPORT_TEMPLATE, PretrainedAdapter, compose_text

if TYPE_CHECKING:  # re-exported lazily (below): medgemma and nv_reason import this module
    from shovir.models.medgemma import MedGemma
    from shovir.models.nv_reason import NVReasonCXR

__all__ = [
    "REPORT_TEMPLATE",
    "Decoding",
    "ImageTextToTextAdapter",
    "MedGemma",
    "NVReasonCXR",
    "PretrainedAdapter",
    "canonical_dtype",
    "compose_text",
    "left_pad",
    "local_snapshot",
    "resolve_checkpoint",
    "split_reasoning",
    "stop_on_strings",
    "to_8bit",
    "to_rgb",
    "torch_dtype",
    "truncate_at",
]

_LAZY = {"MedGemma": "shovir.models.medgemma", "NVReasonCXR": "shovir.models.nv_reason"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ImageTextToTextAdapter(PretrainedAdapter):
    """Any ``AutoModelForImageTextToText`` checkpoint with a chat template.

    Args:
        checkpoint: a local folder or a Hub id. Nothing is downloaded unless ``local_files_only=False``.
        prompt: the question used when a message has none.
        system_prompt: an optional system turn.
        dtype: ``float32``, ``float16``, ``bfloat16`` or ``None`` (the checkpoint's own dtype).
        device: e.g. ``"cuda:0"`` or ``"cpu"`` (default: CUDA when available); or ``device_map``
            (e.g. ``"auto"``, needs accelerate) to shard a large model.
        max_new_tokens, do_sample, temperature, top_p, top_k, num_beams, use_cache: decoding;
            greedy by default. Settings left ``None`` come from the checkpoint's
            ``generation_config`` (keyed by checkpoint and revision).
        seed: required when ``do_sample=True``; with ``Message.seed`` (or the message content) it
            fixes each message's sampled text, whatever batch it is in (:mod:`shovir.models.decoding`).
        trust_remote_code: run code shipped with the checkpoint; only passed when ``True``.
        revision: a Hub revision (commit hash recommended).
        local_files_only: read only local files / the local Hub cache (default ``True``).
        attn_implementation: e.g. ``"sdpa"`` or ``"eager"``; ``None`` lets transformers choose.
        skip_special_tokens: passed to ``batch_decode``.
        image_first: images before the text in the user turn (``False``: text first).
        report_template: how a context report precedes the question (:data:`REPORT_TEMPLATE`).
        batch_size: messages per ``generate`` call.
    """

    name = "hf-image-text-to-text"
    supports_scores = True
    decode_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        system_prompt: str | None = None,
        dtype: str | None = None,
        device: str | None = None,
        device_map: str | dict | None = None,
        max_new_tokens: int = 512,
        do_sample: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        num_beams: int = 1,
        use_cache: bool = True,
        seed: int | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        local_files_only: bool = True,
        attn_implementation: str | None = None,
        skip_special_tokens: bool = True,
        image_first: bool = True,
        report_template: str = REPORT_TEMPLATE,
        batch_size: int | None = None,
    ) -> None:
        decoding = Decoding(
            max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, top_p=top_p, top_k=top_k,
            num_beams=num_beams, use_cache=use_cache, seed=seed,
        )
        loading = self.load_options(
            checkpoint, revision=revision, dtype=dtype, device=device, device_map=device_map,
            trust_remote_code=trust_remote_code, local_files_only=local_files_only,
            attn_implementation=attn_implementation,
        )
        super().__init__(
            loading, decoding=decoding, batch_size=batch_size, prompt=prompt, report_template=report_template
        )
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be a string or None, got {type(system_prompt).__name__}")
        if not isinstance(image_first, bool) or not isinstance(skip_special_tokens, bool):
            raise ValueError("image_first and skip_special_tokens must be booleans")
        self.system_prompt = system_prompt
        self.skip_special_tokens = skip_special_tokens
        self.image_first = image_first
        self._require_remote_code()
        self.processor: Any = None
        self.model: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {
            "system_prompt": self.system_prompt,
            "image_first": self.image_first,
            "attn_implementation": self.loading.attn_implementation,
            "skip_special_tokens": self.skip_special_tokens,
        }

    # ----- loading
    def _load(self) -> None:
        import transformers

        hub = self._hub_kwargs()
        self.processor = self._run_loader(transformers.AutoProcessor.from_pretrained, self.checkpoint, **hub)
        tokenizer = getattr(self.processor, "tokenizer", None)
        if tokenizer is None:
            raise ValueError(f"{self.checkpoint_name!r}: the processor has no tokenizer; this adapter needs one")
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise ValueError(f"{self.checkpoint_name!r}: the tokenizer has neither a pad nor an eos token")
            tokenizer.pad_token = tokenizer.eos_token
        model = self._run_loader(
            transformers.AutoModelForImageTextToText.from_pretrained, self.checkpoint, **self.loading.model_kwargs()
        )
        if self.loading.device_map is None:
            model = model.to(self._device())
        self.model = model.eval()

    # ----- prompts
    def user_text(self, message: Message, index: int = 0) -> str:
        """The text block of the user turn (report, then question)."""
        return compose_text(self.question(message, index), message.report, self.report_template)

    def conversation(self, message: Message, index: int = 0) -> list[dict[str, Any]]:
        """The chat for one message (see the module docstring for the layout)."""
        images = [{"type": "image", "image": to_rgb(im, field=f"messages[{index}].images")} for im in message.images]
        text = [{"type": "text", "text": self.user_text(message, index)}]
        turns: list[dict[str, Any]] = []
        if self.system_prompt is not None:
            turns.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        turns.append({"role": "user", "content": images + text if self.image_first else text + images})
        return turns

    def render_prompt(self, message: Message) -> str:
        """The prompt string the model sees for ``message`` (chat template applied, not tokenised)."""
        self.load()
        return self.processor.apply_chat_template(
            self.conversation(message), add_generation_prompt=True, tokenize=False
        )

    def _inputs(self, batch: list[Message], offset: int) -> dict[str, Any]:
        conversations = [self.conversation(m, offset + i) for i, m in enumerate(batch)]
        inputs = self.processor.apply_chat_template(
            conversations, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt",
            processor_kwargs={"padding": True},
        )
        return self._move(inputs, self.model.device, self.model.dtype)

    # ----- generation
    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        inputs = self._inputs(batch, offset)
        tokenizer = self.processor.tokenizer
        kwargs = self._generate_kwargs(batch)
        kwargs["pad_token_id"] = tokenizer.pad_token_id
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, **kwargs)
        prompt_length = inputs["input_ids"].shape[1]
        texts = self.processor.batch_decode(
            sequences[:, prompt_length:], skip_special_tokens=self.skip_special_tokens, **self.decode_kwargs
        )
        scores = self._scores(batch, inputs, offset) if any(m.options for m in batch) else [None] * len(batch)
        return [self._finish(text, score) for text, score in zip(texts, scores)]

    def _finish(self, text: str, scores: dict[str, float] | None) -> Generation:
        return Generation(text=text.strip(), scores=scores)

    def option_token_ids(self, options: Sequence[str], index: int = 0) -> list[int]:
        """The first token id of each option (no special tokens added); refuses collisions."""
        self.load()
        tokenizer = self.processor.tokenizer
        return first_token_ids(tokenizer, options, index)

    def _scores(self, batch: list[Message], inputs: Mapping[str, Any], offset: int) -> list[dict[str, float] | None]:
        import torch

        token_ids = [self.option_token_ids(m.options, offset + i) if m.options else None for i, m in enumerate(batch)]
        with torch.inference_mode():
            first = self.model.generate(
                **inputs, max_new_tokens=1, do_sample=False, num_beams=1, output_logits=True,
                return_dict_in_generate=True, use_cache=self.decoding.use_cache,
                pad_token_id=self.processor.tokenizer.pad_token_id,
            )
        logprobs = torch.log_softmax(first.logits[0].float(), dim=-1)
        scores: list[dict[str, float] | None] = []
        for row, (message, ids) in enumerate(zip(batch, token_ids)):
            if ids is None:
                scores.append(None)
            else:
                scores.append({option: float(logprobs[row, i]) for option, i in zip(message.options, ids)})
        return scores

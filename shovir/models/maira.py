"""MAIRA-2 (``microsoft/maira-2``) non-grounded findings generation with the authors' settings.

Reference code §5.3, row *MAIRA-2*: ``AutoModelForCausalLM`` with the model's own code
(``trust_remote_code``), ``attn_implementation="sdpa"``, bf16; inputs from the processor's
reporting API with ``current_frontal=image``, ``current_lateral=None``, ``prior_frontal=None``,
``indication=prompt`` (``""`` by default), ``technique=""``, ``comparison=""``,
``prior_report=None``, ``get_grounding=False``; left-padded batches; greedy, ``use_cache=True``,
450 new tokens. Batch size 24 (§5.1). MAIRA-2 is gated on the Hub (research licence).

How a batch is built
--------------------
The processor's ``format_and_preprocess_reporting_input`` formats and tokenises one study. For a
batch, its formatting half, ``format_reporting_input`` (same arguments; it returns the prompt text
and the normalised images), is called per message and the processor then tokenises the texts
together with ``padding=True`` and left padding. The prompts are therefore the ones the
single-study API builds. The generated tokens after the prompt are decoded with
``skip_special_tokens=True`` and passed through
``processor.convert_output_to_plaintext_or_grounded_sequence`` as in the model card.

Constant images
---------------
MAIRA-2's processor min–max normalises each image (``x -= min; x /= max``). A constant image — the
"blank" condition of Beyond Accuracy — gives ``0/0 = NaN``, and casting NaN to ``uint8`` is
undefined (platform dependent). Such an image is replaced here by an all-zero image, the value the
cast gives on x86 and the authors' own convention for constant images (reference §4.1). Every
constant image is indistinguishable to MAIRA-2 anyway.

Messages: ``prompt`` becomes the INDICATION section (as the authors did); one frontal image per
message; a context ``report`` is refused (MAIRA-2 only takes a prior report together with a prior
image). Option scoring is not offered.

Example::

    >>> Maira2(**{"trust_remote_code": True}).config()["decoding"]["max_new_tokens"]
    450
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np  # noqa: F401 (the doctest of _nonconstant uses it)
from PIL import Image

from shovir.models.base import Generation, Message
from shovir.models.decoding import Decoding
from shovir.models.images import to_8bit
from shovir.models.pretrained import PretrainedAdapter

__all__ = ["Maira2"]


class Maira2(PretrainedAdapter):
    """MAIRA-2 reporting (reference §5.3).

    Args:
        checkpoint: local folder or Hub id (default ``microsoft/maira-2``).
        prompt: the INDICATION section used when a message has no prompt (default ``""``).
        technique, comparison: the TECHNIQUE and COMPARISON sections (default ``""``; the processor
            writes ``N/A`` for empty sections).
        dtype: default ``bfloat16``; attn_implementation: default ``"sdpa"`` (§5.3).
        max_new_tokens: default 450; use_cache: default ``True`` (§5.3). Greedy.
        trust_remote_code: must be ``True``: the model and processor code ship with the checkpoint.
        revision, local_files_only: Hub revision; no download unless ``local_files_only=False``.
        batch_size: default 24 (§5.1).
    """

    name = "maira-2"
    default_checkpoint = "microsoft/maira-2"
    default_prompt = ""
    requires_remote_code = True
    max_images = 1
    batch_size = 24

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        technique: str = "",
        comparison: str = "",
        dtype: str | None = "bfloat16",
        attn_implementation: str | None = "sdpa",
        device: str | None = None,
        max_new_tokens: int = 450,
        use_cache: bool = True,
        trust_remote_code: bool = False,
        revision: str | None = None,
        local_files_only: bool = True,
        batch_size: int | None = None,
    ) -> None:
        decoding = Decoding(max_new_tokens=max_new_tokens, do_sample=False, use_cache=use_cache)
        loading = self.load_options(
            checkpoint, revision=revision, dtype=dtype, device=device, trust_remote_code=trust_remote_code,
            local_files_only=local_files_only, attn_implementation=attn_implementation,
        )
        super().__init__(loading, decoding=decoding, batch_size=batch_size, prompt=prompt)
        for field, value in (("technique", technique), ("comparison", comparison)):
            if not isinstance(value, str):
                raise ValueError(f"{field} must be a string, got {type(value).__name__}")
        self.technique = technique
        self.comparison = comparison
        self._require_remote_code()
        self.processor: Any = None
        self.model: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {
            "technique": self.technique,
            "comparison": self.comparison,
            "get_grounding": False,
            "attn_implementation": self.loading.attn_implementation,
        }

    def _load(self) -> None:
        import transformers

        hub = self._hub_kwargs()
        self.processor = self._run_loader(transformers.AutoProcessor.from_pretrained, self.checkpoint, **hub)
        if not hasattr(self.processor, "format_reporting_input"):
            raise ValueError(f"{self.checkpoint_name!r}: the processor has no format_reporting_input(); not MAIRA-2 code")
        self.processor.tokenizer.padding_side = "left"
        model = self._run_loader(
            transformers.AutoModelForCausalLM.from_pretrained, self.checkpoint, **self.loading.model_kwargs()
        )
        self.model = model.to(self._device()).eval()

    def _validate(self, messages: Any) -> list[Message]:
        checked = super()._validate(messages)
        for index, message in enumerate(checked):
            if message.report is not None:
                raise ValueError(
                    f"messages[{index}].report must be None: MAIRA-2 takes a prior report only with a prior image"
                )
        return checked

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        texts, images = [], []
        for row, message in enumerate(batch):
            frontal = _nonconstant(to_8bit(message.images[0], field=f"messages[{offset + row}].images"))
            text, normalised = self.processor.format_reporting_input(
                current_frontal=frontal, current_lateral=None, prior_frontal=None,
                indication=self.question(message, offset + row), technique=self.technique,
                comparison=self.comparison, prior_report=None, get_grounding=False,
            )
            texts.append(text)
            images.extend(normalised)
        inputs = self.processor(text=texts, images=images, padding=True, return_tensors="pt")
        inputs = self._move(inputs, self.model.device, self.model.dtype)
        tokenizer = self.processor.tokenizer
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, pad_token_id=pad_id, **self._generate_kwargs(batch))
        new_tokens = sequences[:, inputs["input_ids"].shape[1]:]
        outputs = []
        for text in self.processor.batch_decode(new_tokens, skip_special_tokens=True):
            plain = self.processor.convert_output_to_plaintext_or_grounded_sequence(text)
            if not isinstance(plain, str):  # grounded phrases: keep their text only
                plain = " ".join(phrase for phrase, _boxes in plain)
            outputs.append(Generation(text=plain.strip()))
        return outputs


def _nonconstant(image: Image.Image) -> Image.Image:
    """A constant image becomes all zeros (see the module docstring); others are unchanged.

    >>> np.asarray(_nonconstant(Image.new("L", (2, 2), 128))).max()
    np.uint8(0)
    """
    low, high = image.convert("L").getextrema()
    if low == high:
        return Image.new("L", image.size, 0)
    return image

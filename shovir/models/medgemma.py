"""MedGemma 1.5 4B-it with the ShoViR authors' settings: the prompt in the system turn.

Reference code §5.3, row *MedGemma* (final prompts from ``src/benchmark/prompts.py`` @
``06324c9``; launch flags from §5.1). :class:`MedGemma` is the generic
:class:`~shovir.models.hf.ImageTextToTextAdapter` with the authors' conversation layout and
defaults; everything else (loading, batching, seeded sampling, option scores) is the generic
adapter's.

Example (no weights are loaded until the first ``generate``)::

    >>> adapter = MedGemma()
    >>> adapter.config()["prompt"], adapter.config()["decoding"]["max_new_tokens"]
    ('Describe this X-ray.', 450)
"""

from __future__ import annotations

import os
from typing import Any

from shovir.models.base import Message
from shovir.models.hf import ImageTextToTextAdapter
from shovir.models.images import to_rgb
from shovir.models.pretrained import compose_text

__all__ = ["MedGemma"]


class MedGemma(ImageTextToTextAdapter):
    """MedGemma 1.5 4B-it with the ShoViR authors' settings (reference §5.3, row *MedGemma*).

    Each default and its source:

    * checkpoint ``google/medgemma-1.5-4b-it`` — §5.3 HF id;
    * ``prompt="Describe this X-ray."`` as the **system** turn — §5.3 (``medgemma_default``;
      "Messages: system = prompt");
    * user turn = [text ``"Analyze this image."``, image] — §5.3 (text before the image); a context
      report precedes that text through
      :data:`~shovir.models.pretrained.REPORT_TEMPLATE`;
    * greedy, ``max_new_tokens=450`` — §5.3; ``use_cache=False`` — §5.3 (the authors' spec; greedy
      output does not depend on it, only speed);
    * ``dtype="bfloat16"`` — §5.1 (``--dtype bfloat16``); ``attn_implementation="sdpa"`` — §5.3;
    * ``batch_size=100`` — §5.1.

    For the ModaLens layout (question in the user turn) use ``hf-image-text-to-text`` with this
    checkpoint instead. Every other keyword is the generic adapter's (``device`` is named here so
    that the sweep runner can place each rank's model).
    """

    name = "medgemma"
    default_checkpoint = "google/medgemma-1.5-4b-it"
    default_prompt = "Describe this X-ray."
    user_instruction = "Analyze this image."
    batch_size = 100

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        user_instruction: str = "Analyze this image.",
        dtype: str | None = "bfloat16",
        device: str | None = None,
        max_new_tokens: int = 450,
        use_cache: bool = False,
        attn_implementation: str | None = "sdpa",
        **options: Any,
    ) -> None:
        if options.get("system_prompt") is not None:
            raise ValueError("MedGemma puts the prompt in the system turn (as the authors did); pass prompt=... instead "
                             "of system_prompt")
        options.pop("system_prompt", None)
        if options.pop("image_first", False):
            raise ValueError("MedGemma's user turn is [text, image] as the authors built it; image_first is fixed")
        super().__init__(
            checkpoint, prompt=prompt, dtype=dtype, device=device, max_new_tokens=max_new_tokens,
            use_cache=use_cache, attn_implementation=attn_implementation, image_first=False, **options,
        )
        if not isinstance(user_instruction, str):
            raise ValueError(f"user_instruction must be a string, got {type(user_instruction).__name__}")
        self.user_instruction = user_instruction

    def _extra_config(self) -> dict[str, Any]:
        config = super()._extra_config()
        config["user_instruction"] = self.user_instruction
        return config

    def conversation(self, message: Message, index: int = 0) -> list[dict[str, Any]]:
        """System = prompt; user = [report + ``"Analyze this image."``, image(s)]."""
        images = [{"type": "image", "image": to_rgb(im, field=f"messages[{index}].images")} for im in message.images]
        text = compose_text(self.user_instruction, message.report, self.report_template)
        system = self.question(message, index)
        return [
            {"role": "system", "content": [{"type": "text", "text": system}]},
            {"role": "user", "content": [{"type": "text", "text": text}] + images},
        ]

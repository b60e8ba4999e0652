"""NV-Reason-CXR-3B (Qwen2.5-VL) with the ShoViR authors' settings; the reasoning trace kept apart.

Reference code §5.3, row *NV-Reason-CXR* (final prompts from ``src/benchmark/prompts.py`` @
``06324c9``; launch flags from §5.1). :class:`NVReasonCXR` is the generic
:class:`~shovir.models.hf.ImageTextToTextAdapter` with the authors' defaults and one difference
in the output: the ``<think>`` block goes to ``Generation.reasoning``
(:func:`~shovir.models.decoding.split_reasoning`), so that it is never scored as the report
(§5.3 notes the authors never stripped it).

Example (no weights are loaded until the first ``generate``)::

    >>> NVReasonCXR().config()["decoding"]["max_new_tokens"]
    2048
    >>> from shovir.models.decoding import split_reasoning
    >>> split_reasoning("<think>Heart is enlarged.</think><answer>Cardiomegaly</answer>")
    ('Cardiomegaly', 'Heart is enlarged.')
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from shovir.models.base import Generation
from shovir.models.decoding import split_reasoning
from shovir.models.hf import ImageTextToTextAdapter

__all__ = ["NVReasonCXR"]


class NVReasonCXR(ImageTextToTextAdapter):
    """NV-Reason-CXR-3B (Qwen2.5-VL) with the ShoViR authors' settings (reference §5.3).

    Each default and its source:

    * checkpoint ``nvidia/NV-Reason-CXR-3B`` — §5.3 HF id;
    * user turn = [image, ``"Find abnormalities and support devices."``] — §5.3
      (``nv_reason_default``) and the model card's example;
    * greedy, ``max_new_tokens=2048``, ``use_cache=True`` — §5.3;
    * ``dtype="bfloat16"`` — §5.1 (``--dtype bfloat16``; the model card uses float16);
    * decoding with ``skip_special_tokens=True, clean_up_tokenization_spaces=False`` — model card;
    * ``batch_size=128`` — §5.1.

    The model answers ``<think>…</think><answer>…</answer>`` (the format its GRPO rewards check).
    :func:`~shovir.models.decoding.split_reasoning` puts the trace in ``Generation.reasoning`` and
    only the answer in ``Generation.text``; the authors scored the whole output (§5.3 "not
    stripped"). Every other keyword is the generic adapter's (``device`` is named here so that the
    sweep runner can place each rank's model).
    """

    name = "nv-reason-cxr"
    default_checkpoint = "nvidia/NV-Reason-CXR-3B"
    default_prompt = "Find abnormalities and support devices."
    batch_size = 128
    decode_kwargs: ClassVar[dict[str, Any]] = {"clean_up_tokenization_spaces": False}

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        dtype: str | None = "bfloat16",
        device: str | None = None,
        max_new_tokens: int = 2048,
        use_cache: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(
            checkpoint, prompt=prompt, dtype=dtype, device=device, max_new_tokens=max_new_tokens, use_cache=use_cache,
            **options,
        )

    def _extra_config(self) -> dict[str, Any]:
        config = super()._extra_config()
        config["reasoning"] = "split <think> into Generation.reasoning"
        return config

    def _finish(self, text: str, scores: dict[str, float] | None) -> Generation:
        answer, reasoning = split_reasoning(text)
        return Generation(text=answer, reasoning=reasoning, scores=scores)

"""CXRMate-RRG24 (``aehrc/cxrmate-rrg24``) with the authors' settings, one report per image.

Reference code §5.3, row *CXRMate*: ``AutoModel`` with the model's own code
(``trust_remote_code``), **fp32** (the authors passed no dtype); no prompt; torchvision v2
preprocessing ``PILToTensor → Grayscale(3) → Resize(encoder.image_size) → CenterCrop(square) →
ToDtype(float32, scale=True) → Normalize(encoder mean/std)``; ``pixel_values`` shaped
``[B, 1, C, H, W]``; ``generate(max_length=…, num_beams=1, bad_words_ids=[[NF], [NI]])`` (greedy,
the ``[NF]``/``[NI]`` "no findings / no impression" tokens banned); the output goes through
``model.split_and_decode_sections`` and is written ``"Findings: {f}\\nImpression: {i}"``. Batch
size 128 (§5.1).

Defects avoided (reference §9)
------------------------------
* **Defect 10 (broadcast).** The authors' adapter returned ``findings[0]`` / ``impression[0]``
  for a batch of 128 images and their runner copied that single report to every image. Here
  ``split_and_decode_sections`` must return exactly one findings and one impression section per
  image, and they are paired with the images in order; anything else raises ``RuntimeError``.
* **Defect 10 (length).** One stored version used the spec default ``max_length=128`` (prompt
  included), which truncates reports; the default here is **512**, the value of the authors' other
  version and of the CXRMate-RRG24 model card.
* **Defect 15 (fp32 vs bf16).** fp32 stays the default, *as the authors ran it*, and is recorded
  in :meth:`~CXRMate.config`; pass ``dtype="bfloat16"`` to match the other models. With
  transformers ≥ 5 a missing dtype would mean the checkpoint's stored dtype, so float32 is passed
  explicitly.

The model card itself decodes with ``num_beams=4``; the authors used greedy (``num_beams=1``),
which is the default here (``num_beams`` is an argument). CXRMate takes no text: a message with a
``prompt`` or a ``report`` is refused, and each message must hold exactly one image.

Example (torchvision is needed; nothing is loaded before the first ``generate``)::

    >>> try:
    ...     adapter = CXRMate(**{"trust_remote_code": True})  # opted in by the user
    ... except ImportError as error:
    ...     print("pip install torchvision" in str(error))
    ... else:
    ...     print(adapter.config()["decoding"]["max_length"] == 512)
    True
"""

from __future__ import annotations

import os
from typing import Any

from shovir.models.base import Generation, Message, require
from shovir.models.decoding import Decoding
from shovir.models.images import to_8bit
from shovir.models.loading import torch_dtype
from shovir.models.pretrained import PretrainedAdapter

__all__ = ["CXRMate", "format_sections"]

TORCHVISION_HINT = "pip install torchvision (CXRMate's preprocessing is torchvision's transforms.v2, as the authors ran it)"


def format_sections(findings: str, impression: str) -> str:
    """The report text the authors stored (``_extract_text`` in their runner).

    >>> print(format_sections("Heart size is normal.", "No acute process."))
    Findings: Heart size is normal.
    Impression: No acute process.
    """
    return f"Findings: {findings}\nImpression: {impression}".strip()


class CXRMate(PretrainedAdapter):
    """CXRMate-RRG24 findings + impression generation (reference §5.3).

    Args:
        checkpoint: local folder or Hub id (default ``aehrc/cxrmate-rrg24``).
        dtype: default ``None`` = float32, as the authors ran it.
        device: default CUDA when available.
        max_length: total sequence length, prompt tokens included (default 512; see above).
        num_beams: default 1 (greedy, §5.3).
        trust_remote_code: must be ``True``: the model code ships with the checkpoint.
        revision, local_files_only: Hub revision; no download unless ``local_files_only=False``.
        batch_size: default 128 (§5.1).
    """

    name = "cxrmate"
    default_checkpoint = "aehrc/cxrmate-rrg24"
    default_prompt = None
    uses_prompt = False
    requires_remote_code = True
    max_images = 1
    batch_size = 128

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        dtype: str | None = None,
        device: str | None = None,
        max_length: int = 512,
        num_beams: int = 1,
        trust_remote_code: bool = False,
        revision: str | None = None,
        local_files_only: bool = True,
        batch_size: int | None = None,
    ) -> None:
        decoding = Decoding(max_length=max_length, num_beams=num_beams, do_sample=False)
        loading = self.load_options(
            checkpoint, revision=revision, dtype="float32" if dtype is None else dtype, device=device,
            trust_remote_code=trust_remote_code, local_files_only=local_files_only,
        )
        super().__init__(loading, decoding=decoding, batch_size=batch_size)
        self._v2 = require("torchvision.transforms.v2", TORCHVISION_HINT)
        self._require_remote_code()
        self.tokenizer: Any = None
        self.model: Any = None
        self.transform: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {
            "bad_words": ["[NF]", "[NI]"],
            "preprocessing": "PILToTensor, Grayscale(3), Resize, CenterCrop, ToDtype(scale), Normalize",
            "output": "Findings: {findings}\\nImpression: {impression}",
        }

    def _load(self) -> None:
        import torch
        import transformers

        hub = self._hub_kwargs()
        self.tokenizer = self._run_loader(transformers.AutoTokenizer.from_pretrained, self.checkpoint, **hub)
        model = self._run_loader(transformers.AutoModel.from_pretrained, self.checkpoint, **self.loading.model_kwargs())
        self.model = model.to(self._device()).eval()
        encoder = getattr(getattr(self.model, "config", None), "encoder", None)
        for field in ("image_size", "image_mean", "image_std"):
            if getattr(encoder, field, None) is None:
                raise ValueError(f"{self.checkpoint_name!r}: config.encoder.{field} is missing; is this a CXRMate checkpoint?")
        if not hasattr(self.model, "split_and_decode_sections"):
            raise ValueError(f"{self.checkpoint_name!r}: the model has no split_and_decode_sections(); not CXRMate-RRG24 code")
        size = int(encoder.image_size)
        v2 = self._v2
        self.transform = v2.Compose([
            v2.PILToTensor(),
            v2.Grayscale(num_output_channels=3),
            v2.Resize(size=size, antialias=True),
            v2.CenterCrop(size=[size, size]),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=encoder.image_mean, std=encoder.image_std),
        ])
        self._bad_words = []
        for token in ("[NF]", "[NI]"):
            token_id = self.tokenizer.convert_tokens_to_ids(token)
            if token_id is None or token_id == self.tokenizer.unk_token_id:
                raise ValueError(f"{self.checkpoint_name!r}: the tokenizer has no {token} token")
            self._bad_words.append([int(token_id)])

    def _validate(self, messages: Any) -> list[Message]:
        checked = super()._validate(messages)
        for index, message in enumerate(checked):
            if message.prompt is not None:
                raise ValueError(f"messages[{index}].prompt must be None: CXRMate takes no text prompt")
            if message.report is not None:
                raise ValueError(f"messages[{index}].report must be None: CXRMate takes no context report")
        return checked

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        pixels = torch.stack([
            self.transform(to_8bit(m.images[0], field=f"messages[{offset + i}].images")) for i, m in enumerate(batch)
        ]).unsqueeze(1)  # [B, 1, C, H, W]: one image per study
        pixels = pixels.to(device=self.model.device, dtype=torch_dtype(self.dtype))
        with torch.inference_mode():
            output_ids = self.model.generate(
                pixel_values=pixels, bad_words_ids=self._bad_words, **self._generate_kwargs(batch)
            )
        findings, impression = self.model.split_and_decode_sections(output_ids, self.tokenizer)
        if len(findings) != len(batch) or len(impression) != len(batch):
            raise RuntimeError(
                f"cxrmate: split_and_decode_sections gave {len(findings)} findings and {len(impression)} impressions "
                f"for {len(batch)} images; refusing to broadcast or drop reports (reference §9, defect 10)"
            )
        return [Generation(text=format_sections(f, i)) for f, i in zip(findings, impression)]

"""CheXagent-2 (``StanfordAIMI/CheXagent-2-3b-srrg-findings``) with the authors' settings.

Reference code §5.3, row *CheXagent-2*: ``AutoTokenizer`` + ``AutoModelForCausalLM`` with the
model's own code (``trust_remote_code``), bf16; the query is
``tokenizer.from_list_format([{"image": path}, {"text": prompt}])``; the conversation is a system
turn ``"You are a helpful assistant."`` then a human turn holding the query, rendered with
``apply_chat_template(add_generation_prompt=True)``; batches are left-padded; greedy decoding
(``do_sample=False, num_beams=1, temperature=1.0, top_p=1.0``), ``use_cache=True``, 512 new
tokens; prompt ``"Structured Radiology Report Generation for Findings Section"``. Batch size 24
(§5.1).

Why a temporary file, and why PNG
---------------------------------
CheXagent-2's tokenizer (Qwen-VL style) takes an image *path*: the path is written into the image
slot of the prompt and the model's vision tower opens the file during the forward pass. So each
image is written to a temporary directory that lives exactly as long as the batch's ``generate``
call (``tempfile.TemporaryDirectory``: removed on success and on error). Defect 15 of reference §9
is avoided twice over: the authors re-encoded every input as **JPEG** (PIL default quality 75, so
the model saw compression artefacts on top of the interventions being tested) and never deleted
the files; here images are written as **lossless PNG** (grayscale stays one channel; 16-bit input
is normalised by :func:`shovir.models.images.to_8bit`) and always removed. File names are
``<row>-<image>.png`` inside the directory; the path's characters fill the image slot, whose
embeddings the vision features replace, so the random directory name does not change the output.

A context report (``Message.report``) precedes the prompt in the text item through
:data:`shovir.models.pretrained.REPORT_TEMPLATE`. Option scoring is not offered (``scores`` is ``None``).

Example (nothing is loaded before the first ``generate``)::

    >>> opt_in = {"trust_remote_code": True}  # the user reviewed the model code
    >>> adapter = CheXagent2(**opt_in)
    >>> adapter.config()["prompt"]
    'Structured Radiology Report Generation for Findings Section'
    >>> CheXagent2()
    Traceback (most recent call last):
    ...
    ValueError: CheXagent2: 'StanfordAIMI/CheXagent-2-3b-srrg-findings' ships its model code ... pass trust_remote_code as True
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shovir.models.base import Generation, Message
from shovir.models.decoding import Decoding, left_pad
from shovir.models.images import to_8bit
from shovir.models.pretrained import REPORT_TEMPLATE, PretrainedAdapter, compose_text

__all__ = ["CheXagent2"]


class CheXagent2(PretrainedAdapter):
    """CheXagent-2 structured findings generation (reference §5.3).

    Args:
        checkpoint: local folder or Hub id (default ``StanfordAIMI/CheXagent-2-3b-srrg-findings``).
        prompt: the text item of the query (default: the authors' SRRG findings instruction).
        system_message: the system turn (default ``"You are a helpful assistant."``, §5.3).
        dtype: default ``bfloat16`` (§5.3).
        device: default CUDA when available.
        max_new_tokens: default 512 (§5.3).
        use_cache: default ``True`` (§5.3).
        do_sample, temperature, top_p, seed: greedy by default (§5.3); sampling needs a seed and is
            seeded per message (:mod:`shovir.models.decoding`).
        trust_remote_code: must be ``True``: the model and tokenizer code ship with the checkpoint.
        revision, local_files_only: Hub revision; no download unless ``local_files_only=False``.
        batch_size: default 24 (§5.1).
    """

    name = "chexagent-2"
    default_checkpoint = "StanfordAIMI/CheXagent-2-3b-srrg-findings"
    default_prompt = "Structured Radiology Report Generation for Findings Section"
    requires_remote_code = True
    batch_size = 24

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        system_message: str = "You are a helpful assistant.",
        dtype: str | None = "bfloat16",
        device: str | None = None,
        max_new_tokens: int = 512,
        use_cache: bool = True,
        do_sample: bool = False,
        temperature: float | None = 1.0,
        top_p: float | None = 1.0,
        seed: int | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        local_files_only: bool = True,
        report_template: str = REPORT_TEMPLATE,
        batch_size: int | None = None,
    ) -> None:
        decoding = Decoding(
            max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, top_p=top_p,
            num_beams=1, use_cache=use_cache, seed=seed,
        )
        loading = self.load_options(
            checkpoint, revision=revision, dtype=dtype, device=device, trust_remote_code=trust_remote_code,
            local_files_only=local_files_only,
        )
        super().__init__(
            loading, decoding=decoding, batch_size=batch_size, prompt=prompt, report_template=report_template
        )
        if not isinstance(system_message, str):
            raise ValueError(f"system_message must be a string, got {type(system_message).__name__}")
        self.system_message = system_message
        self._require_remote_code()
        self.tokenizer: Any = None
        self.model: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {"system_message": self.system_message, "image_encoding": "lossless PNG in a temporary directory"}

    def _load(self) -> None:
        import transformers

        hub = self._hub_kwargs()
        self.tokenizer = self._run_loader(transformers.AutoTokenizer.from_pretrained, self.checkpoint, **hub)
        if not hasattr(self.tokenizer, "from_list_format"):
            raise ValueError(
                f"{self.checkpoint_name!r}: the tokenizer has no from_list_format(); this adapter expects the "
                "CheXagent-2 tokenizer code shipped with the checkpoint"
            )
        model = self._run_loader(
            transformers.AutoModelForCausalLM.from_pretrained, self.checkpoint, **self.loading.model_kwargs()
        )
        self.model = model.to(self._device()).eval()

    def _pad_id(self) -> int:
        for candidate in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if candidate is not None:
                return int(candidate)
        raise ValueError(f"{self.checkpoint_name!r}: the tokenizer has neither a pad nor an eos token id")

    def query(self, message: Message, image_paths: list[str], index: int = 0) -> list[dict[str, str]]:
        """The conversation for one message, given the paths its images were written to."""
        text = compose_text(self.question(message, index), message.report, self.report_template)
        items = [{"image": path} for path in image_paths] + [{"text": text}]
        return [
            {"from": "system", "value": self.system_message},
            {"from": "human", "value": self.tokenizer.from_list_format(items)},
        ]

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        with tempfile.TemporaryDirectory(prefix="shovir-chexagent-") as folder:
            rows = []
            for row, message in enumerate(batch):
                paths = []
                for position, image in enumerate(message.images):
                    path = Path(folder) / f"{row}-{position}.png"
                    to_8bit(image, field=f"messages[{offset + row}].images").save(path, format="PNG")
                    paths.append(str(path))
                ids = self.tokenizer.apply_chat_template(
                    self.query(message, paths, offset + row), add_generation_prompt=True, tokenize=True
                )
                rows.append(_as_id_list(ids))
            pad_id = self._pad_id()
            input_ids, attention_mask = left_pad(rows, pad_id)
            device = self.model.device
            kwargs = self._generate_kwargs(batch)
            with torch.inference_mode():
                sequences = self.model.generate(
                    input_ids.to(device), attention_mask=attention_mask.to(device), pad_token_id=pad_id, **kwargs
                )
        new_tokens = sequences[:, input_ids.shape[1]:]
        texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [Generation(text=text.strip()) for text in texts]


def _as_id_list(ids: Any) -> list[int]:
    """Token ids from ``apply_chat_template`` whatever it returned (list, tensor, BatchEncoding)."""
    if isinstance(ids, Mapping):
        ids = ids["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if ids and isinstance(ids[0], list):
        if len(ids) != 1:
            raise ValueError(f"expected the ids of one conversation, got {len(ids)}")
        ids = ids[0]
    return [int(i) for i in ids]

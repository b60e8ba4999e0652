"""Libra v1.0 and LLaVA-Rad (Libra port) through Libra's own builder, with the authors' settings.

Reference code §5.3, rows *LIBRA-v1* and *LLaVA-Rad*:

* both load through Libra's builder ``libra.model.builder.load_pretrained_model(path, None,
  model_name)`` (the ``libra`` package from https://github.com/X-iZhang/Libra);
* the query is ``<image>\\n`` + prompt (with ``<im_start>``/``<im_end>`` around the image token
  when the model config asks for them) inside Libra's conversation template, tokenised with
  ``tokenizer_image_token``; generation stops at the template's separator;
* the image input has **two slots**, ``[current, prior]``, a tensor ``[2, B, C, H, W]``; with no
  prior the current image is duplicated (Libra's Temporal Alignment Connector expects a prior; this
  is what Libra's own ``libra_eval`` does). A message with two images uses the second as the prior.
* **Libra v1** — ``X-iZhang/libra-v1.0-7b``, conversation ``libra_v1``, prompt ``"Provide a
  detailed description of the findings in the radiology image."``, 300 new tokens;
* **LLaVA-Rad** — ``X-iZhang/libra-llava-rad``, conversation ``v1``, prompt ``"Describe the
  findings in the radiology image."``, greedy, ``use_cache=True``, 300 new tokens;
* batch size 24 for both (§5.1); batches are left-padded.

Defects avoided (reference §9)
------------------------------
* **Defect 7: Libra sampled without a seed.** The stored code called ``generate(do_sample=True)``
  with torch's unseeded global generator, so Libra's reports could not be reproduced. Here Libra v1
  decodes **greedily by default**. The authors' sampling is available as ``do_sample=True`` and
  then needs an explicit ``seed``; each message is sampled from its own stream, seeded from it
  and the message, whatever batch it is in (see :mod:`shovir.models.decoding`), and
  ``temperature`` then defaults to 0.2, the value the authors' methodology notes state and the
  default of Libra's ``libra_eval``.
* **Per-row stopping.** LLaVA's ``KeywordsStoppingCriteria`` inspects one sequence; here each row
  stops on its own at the separator (:func:`shovir.models.decoding.stop_on_strings`) and the text is cut
  there.
* **Offline.** Libra's builder has no ``local_files_only`` switch, so it is handed a local folder:
  the checkpoint folder, or its snapshot in the local Hugging Face cache. The vision tower the
  checkpoint names (``microsoft/rad-dino`` for Libra) is loaded by Libra's code and must also be in
  the cache; set ``HF_HUB_OFFLINE=1`` to make sure nothing is fetched.

Libra's code targets transformers 4.x and float16 (its builder fixes the dtype); install it in an
environment pinned as its repository says. The model name given to the builder is an argument
because the builder picks code paths from it (a local snapshot folder's name would not say
"libra").

Example (the ``libra`` package is imported at construction; without it the error says how to
install it)::

    >>> LibraV1.default_checkpoint, LibraV1.conv_mode_default, LlavaRad.conv_mode_default
    ('X-iZhang/libra-v1.0-7b', 'libra_v1', 'v1')
    >>> "pip install git+https://github.com/X-iZhang/Libra.git" in LIBRA_INSTALL
    True
"""

from __future__ import annotations

import os
from typing import Any

from shovir.models.base import Generation, Message, require
from shovir.models.decoding import Decoding, left_pad, stop_on_strings, truncate_at
from shovir.models.images import to_rgb
from shovir.models.pretrained import REPORT_TEMPLATE, PretrainedAdapter, compose_text

__all__ = ["LIBRA_INSTALL", "LibraV1", "LlavaRad"]

LIBRA_INSTALL = (
    "install Libra's code (not on PyPI): pip install git+https://github.com/X-iZhang/Libra.git "
    "(or clone it and `pip install -e .`), in an environment with the transformers/torch versions it pins"
)
"""The install hint of the ImportError raised when ``libra`` is missing."""

AUTHORS_TEMPERATURE = 0.2
"""Sampling temperature when ``do_sample=True`` and none is given (authors' notes; ``libra_eval`` default)."""


class _LibraBuilderAdapter(PretrainedAdapter):
    """Shared code of the two models that load through Libra's builder."""

    conv_mode_default = "libra_v1"
    model_name_default = "libra-v1.0-7b"
    max_images = 2
    batch_size = 24

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        conv_mode: str | None = None,
        model_name: str | None = None,
        device: str | None = None,
        max_new_tokens: int = 300,
        use_cache: bool = True,
        do_sample: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        num_beams: int = 1,
        no_repeat_ngram_size: int | None = None,
        seed: int | None = None,
        revision: str | None = None,
        local_files_only: bool = True,
        report_template: str = REPORT_TEMPLATE,
        batch_size: int | None = None,
    ) -> None:
        if do_sample and temperature is None:
            temperature = AUTHORS_TEMPERATURE
        decoding = Decoding(
            max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, top_p=top_p,
            num_beams=num_beams, use_cache=use_cache, seed=seed,
        )
        loading = self.load_options(
            checkpoint, revision=revision, dtype="float16", device=device, local_files_only=local_files_only
        )
        super().__init__(
            loading, decoding=decoding, batch_size=batch_size, prompt=prompt, report_template=report_template
        )
        if no_repeat_ngram_size is not None and (not isinstance(no_repeat_ngram_size, int) or no_repeat_ngram_size < 1):
            raise ValueError(f"no_repeat_ngram_size must be a positive integer or None, got {no_repeat_ngram_size!r}")
        self.conv_mode = conv_mode or self.conv_mode_default
        self.model_name = model_name or self.model_name_default
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self._libra = {
            name: require(f"libra.{name}", LIBRA_INSTALL)
            for name in ("constants", "conversation", "mm_utils", "model.builder")
        }
        if self.conv_mode not in self._libra["conversation"].conv_templates:
            raise ValueError(
                f"conv_mode {self.conv_mode!r} is not one of Libra's templates: "
                f"{sorted(self._libra['conversation'].conv_templates)}"
            )
        self.tokenizer: Any = None
        self.model: Any = None
        self.image_processor: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {
            "conv_mode": self.conv_mode,
            "model_name": self.model_name,
            "image_slots": "[current, prior]; prior = current when absent",
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
        }

    def _load(self) -> None:
        folder = self.loading.snapshot()
        device = self._device()
        builder = self._libra["model.builder"]
        self.tokenizer, self.model, self.image_processor, _ = builder.load_pretrained_model(
            folder, None, self.model_name, device=device
        )
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = self.tokenizer.eos_token_id
        self.model.eval()

    def _prompt(self, message: Message, index: int) -> tuple[str, str]:
        """The conversation text for one message and its stop string."""
        constants, conversation = self._libra["constants"], self._libra["conversation"]
        text = compose_text(self.question(message, index), message.report, self.report_template)
        if getattr(self.model.config, "mm_use_im_start_end", False):
            image = constants.DEFAULT_IM_START_TOKEN + constants.DEFAULT_IMAGE_TOKEN + constants.DEFAULT_IM_END_TOKEN
        else:
            image = constants.DEFAULT_IMAGE_TOKEN
        conv = conversation.conv_templates[self.conv_mode].copy()
        conv.append_message(conv.roles[0], f"{image}\n{text}")
        conv.append_message(conv.roles[1], None)
        styles = conversation.SeparatorStyle
        two = {getattr(styles, s) for s in ("TWO", "LLAMA_3", "MISTRAL") if hasattr(styles, s)}
        stop = conv.sep2 if conv.sep_style in two else conv.sep
        return conv.get_prompt(), stop

    def _pixels(self, images: list[Any]) -> Any:
        import torch

        process = self._libra["mm_utils"].process_images
        tensors = [process([image], self.image_processor, self.model.config)[0] for image in images]
        return torch.stack(tensors)

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        mm_utils, constants = self._libra["mm_utils"], self._libra["constants"]
        rows, stops, current, prior = [], [], [], []
        for row, message in enumerate(batch):
            prompt, stop = self._prompt(message, offset + row)
            ids = mm_utils.tokenizer_image_token(prompt, self.tokenizer, constants.IMAGE_TOKEN_INDEX, return_tensors="pt")
            rows.append([int(i) for i in ids.tolist()])
            stops.append(stop)
            images = [to_rgb(im, field=f"messages[{offset + row}].images") for im in message.images]
            current.append(images[0])
            prior.append(images[1] if len(images) > 1 else images[0])
        pad_id = int(self.tokenizer.pad_token_id)
        input_ids, attention_mask = left_pad(rows, pad_id)
        device = self.model.device
        images = torch.stack([self._pixels(current), self._pixels(prior)]).to(device=device, dtype=self.model.dtype)
        kwargs = self._generate_kwargs(batch)
        if self.no_repeat_ngram_size is not None:
            kwargs["no_repeat_ngram_size"] = self.no_repeat_ngram_size
        stopping = stop_on_strings(self.tokenizer, sorted(set(stops)), input_ids.shape[1])
        with torch.inference_mode():
            sequences = self.model.generate(
                input_ids.to(device), images=images, attention_mask=attention_mask.to(device),
                pad_token_id=pad_id, stopping_criteria=[stopping], **kwargs,
            )
        new_tokens = sequences[:, input_ids.shape[1]:]
        texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [Generation(text=truncate_at(text, [stop])) for text, stop in zip(texts, stops)]


class LibraV1(_LibraBuilderAdapter):
    """Libra v1.0 (7B, RAD-DINO + Meditron, Temporal Alignment Connector) — reference §5.3.

    Defaults and sources: checkpoint ``X-iZhang/libra-v1.0-7b`` (§5.3: scripts and NAME_MAP);
    conversation ``libra_v1`` (§5.3, ``base.py``); prompt "Provide a detailed description of the
    findings in the radiology image." (§5.3); 300 new tokens (§5.3); **greedy** unless
    ``do_sample=True`` with a ``seed`` (fixes §9 defect 7; temperature then 0.2); ``use_cache=True``;
    float16 (Libra's builder); batch size 24 (§5.1). Libra's own ``libra_eval`` also sets
    ``no_repeat_ngram_size=3``; the ShoViR code is not documented to, so it is off unless given.
    """

    name = "libra-v1"
    default_checkpoint = "X-iZhang/libra-v1.0-7b"
    default_prompt = "Provide a detailed description of the findings in the radiology image."
    conv_mode_default = "libra_v1"
    model_name_default = "libra-v1.0-7b"


class LlavaRad(_LibraBuilderAdapter):
    """LLaVA-Rad as ported to Libra (``X-iZhang/libra-llava-rad``) — reference §5.3.

    Defaults and sources: conversation ``v1``; prompt "Describe the findings in the radiology
    image."; greedy, ``use_cache=True``, 300 new tokens; always two image slots
    ``[current, prior=current]``; left-padded batches with per-row stopping (all §5.3); float16
    (Libra's builder); batch size 24 (§5.1).
    """

    name = "llava-rad"
    default_checkpoint = "X-iZhang/libra-llava-rad"
    default_prompt = "Describe the findings in the radiology image."
    conv_mode_default = "v1"
    model_name_default = "libra-llava-rad"

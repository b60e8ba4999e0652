"""RaDialog (LLaVA-1.5 + LoRA + BioViL-T) with its CheXpert findings classifier, authors' settings.

Reference code §5.3, row *RaDialog*, two steps per image:

1. **Findings classifier.** The image is remapped to ``uint8`` (RaDialog's ``remap_to_uint8``) and
   made grayscale ``L``. RaDialog's CheXpert classifier (``LitIGClassifier``, checkpoint
   ``findings_classifier/checkpoints/chexpert_train/ChexpertClassifier.ckpt``, 14 classes in the
   order No Finding, Enlarged Cardiomediastinum, Cardiomegaly, Lung Opacity, Lung Lesion, Edema,
   Consolidation, Pneumonia, Atelectasis, Pneumothorax, Pleural Effusion, Pleural Other, Fracture,
   Support Devices) sees ``Resize(512) → CenterCrop(488) → ToTensor → ExpandChannels`` in float16;
   classes with sigmoid > **0.5** are lower-cased and comma-joined.
2. **Report.** Prompt, in the ``conv_vicuna_v1`` template::

       <image>. Predicted Findings: {findings}. You are to act as a radiologist and write the finding
       section of a chest x-ray radiology report for this X-ray image and the given predicted
       findings. Write in the style of a radiologist, write one fluent text without enumeration, be
       concise and don't provide explanations or reasons.

   The image goes through ``create_chest_xray_transform_for_inference(512, center_crop_size=448)``;
   greedy, ``use_cache=True``, 300 new tokens, stopping at the template separator; batches are
   left-padded; batch size 32 (§5.1).

Checkpoints: the LoRA repository ``Chantal/RaDialog-interactive-radiology-report-generation``
(§5.3; the RaDialog README links it as ``ChantalPellegrini/...``) on the base
``liuhaotian/llava-v1.5-7b``, LoRA name
``llava-v1.5-7b-task-lora_radialog_instruct_llava_biovil_unfrozen_2e-5_5epochs_v5_checkpoint-21000``.

Code outside transformers
-------------------------
RaDialog's code (``LLAVA_Biovil/``, ``findings_classifier/``, ``utils.py``) lives in that Hugging
Face repository, not on PyPI. ``repo_dir`` names a local copy (default: the checkpoint folder, or
its snapshot in the local Hugging Face cache); it is put on ``sys.path`` and the modules are
imported at construction, with an :class:`ImportError` saying how to install them when missing.
``utils.py`` is loaded from its file under a private module name, so that it cannot shadow or be
shadowed by another ``utils`` module. RaDialog's code targets old transformers/torch versions;
install it in an environment pinned as its ``requirements.txt`` says.

What differs from the authors' code on purpose
----------------------------------------------
* The classifier checkpoint is an argument (``classifier_checkpoint``), not a path relative to the
  working directory, and the threshold is an argument (default 0.5).
* The classifier runs in float16 on CUDA as the authors ran it, and in float32 on CPU (float16
  convolutions are not available there). The language model is bfloat16 (RaDialog's builder fixes
  it) and the image tensor follows it, as the authors cast it to bfloat16.
* RaDialog's builder fetches the base model, the BioViL-T weights and, when absent from the
  checkpoint folder, ``non_lora_trainables.bin`` through the Hub; offline, they must already be in
  the local cache (set ``HF_HUB_OFFLINE=1`` to make sure nothing is fetched).
* Each row of a batch stops on its own (:func:`shovir.models.decoding.stop_on_strings`); the authors
  used one ``KeywordsStoppingCriteria`` for the whole batch.
* A message's ``prompt``, when given, replaces the report instruction after the ``Predicted
  Findings`` sentence (RaDialog's instruct tasks share that prefix); a context ``report`` precedes
  it through :data:`shovir.models.pretrained.REPORT_TEMPLATE`.

Example (the prompt built around the classifier's findings)::

    >>> findings_text([True] + [False] * 13)
    'no finding'
    >>> REPORT_INSTRUCTION.split(".")[0]
    'You are to act as a radiologist and write the finding section of a chest x-ray radiology report for this X-ray image and the given predicted findings'
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from shovir.models.base import Generation, Message, require
from shovir.models.decoding import Decoding, left_pad, stop_on_strings, truncate_at
from shovir.models.images import to_8bit
from shovir.models.loading import local_snapshot
from shovir.models.pretrained import REPORT_TEMPLATE, PretrainedAdapter, compose_text

__all__ = ["CHEXPERT_CLASSES", "RADIALOG_INSTALL", "REPORT_INSTRUCTION", "RaDialog", "findings_text"]

CHEXPERT_CLASSES = (
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
    "Support Devices",
)
"""The classifier's output order (RaDialog's ``chexpert_cols``; not the CheXbert head order)."""

REPORT_INSTRUCTION = (
    "You are to act as a radiologist and write the finding section of a chest x-ray radiology report for this X-ray "
    "image and the given predicted findings. Write in the style of a radiologist, write one fluent text without "
    "enumeration, be concise and don't provide explanations or reasons."
)
"""RaDialog's report-generation instruction (reference §5.3)."""

RADIALOG_INSTALL = (
    "RaDialog's code is not on PyPI: clone https://huggingface.co/ChantalPellegrini/"
    "RaDialog-interactive-radiology-report-generation (it holds LLAVA_Biovil/, findings_classifier/ and utils.py), "
    "install its requirements.txt in an environment with the versions it pins (plus torchvision and "
    "pytorch-lightning), and pass repo_dir=<that folder>"
)
"""The install hint of the ImportError raised when RaDialog's code is missing."""

LORA_NAME = "llava-v1.5-7b-task-lora_radialog_instruct_llava_biovil_unfrozen_2e-5_5epochs_v5_checkpoint-21000"
CLASSIFIER_RELATIVE = "findings_classifier/checkpoints/chexpert_train/ChexpertClassifier.ckpt"


def findings_text(flags: Sequence[bool], classes: Sequence[str] = CHEXPERT_CLASSES) -> str:
    """The ``Predicted Findings`` text: positive classes, lower-cased, comma-joined.

    >>> findings_text([False, False, True] + [False] * 7 + [True] + [False] * 3)
    'cardiomegaly, pleural effusion'
    >>> findings_text([False] * 14)
    ''
    """
    if len(flags) != len(classes):
        raise ValueError(f"expected {len(classes)} classifier outputs, got {len(flags)}")
    return ", ".join(name for name, flag in zip(classes, flags) if flag).lower().strip()


class RaDialog(PretrainedAdapter):
    """RaDialog report generation with its findings classifier (reference §5.3).

    Args:
        checkpoint: the LoRA checkpoint folder or Hub id (default
            ``Chantal/RaDialog-interactive-radiology-report-generation``).
        repo_dir: a local copy of RaDialog's Hugging Face repository (its code); default: the
            checkpoint folder or its cached snapshot.
        classifier_checkpoint: the CheXpert classifier checkpoint (default:
            ``<repo_dir>/findings_classifier/checkpoints/chexpert_train/ChexpertClassifier.ckpt``).
        threshold: classifier probability above which a finding is listed (default 0.5).
        model_base: the base model (default ``liuhaotian/llava-v1.5-7b``); model_name: the LoRA
            name given to the builder (default: the authors').
        prompt: the instruction after the findings sentence (default :data:`REPORT_INSTRUCTION`).
        device: default CUDA when available.
        max_new_tokens: default 300; use_cache: default ``True`` (§5.3). Greedy.
        revision, local_files_only: Hub revision; no download unless ``local_files_only=False``.
        batch_size: default 32 (§5.1).
    """

    name = "radialog"
    default_checkpoint = "Chantal/RaDialog-interactive-radiology-report-generation"
    default_prompt = REPORT_INSTRUCTION
    max_images = 1
    batch_size = 32

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        repo_dir: str | os.PathLike | None = None,
        classifier_checkpoint: str | os.PathLike | None = None,
        threshold: float = 0.5,
        model_base: str = "liuhaotian/llava-v1.5-7b",
        model_name: str = LORA_NAME,
        prompt: str | None = None,
        device: str | None = None,
        max_new_tokens: int = 300,
        use_cache: bool = True,
        revision: str | None = None,
        local_files_only: bool = True,
        report_template: str = REPORT_TEMPLATE,
        batch_size: int | None = None,
    ) -> None:
        decoding = Decoding(max_new_tokens=max_new_tokens, do_sample=False, use_cache=use_cache)
        loading = self.load_options(
            checkpoint, revision=revision, dtype="bfloat16", device=device, local_files_only=local_files_only
        )
        super().__init__(
            loading, decoding=decoding, batch_size=batch_size, prompt=prompt, report_template=report_template
        )
        if not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be a probability in (0, 1), got {threshold!r}")
        self.threshold = float(threshold)
        self.model_base = model_base
        self.model_name = model_name
        self.repo_dir = self._find_repo(repo_dir)
        self.classifier_checkpoint = self._find_classifier(classifier_checkpoint)
        self._code = self._import_code()
        self.tokenizer: Any = None
        self.model: Any = None

    # ----- code and files
    def _find_repo(self, repo_dir: str | os.PathLike | None) -> Path | None:
        if repo_dir is not None:
            path = Path(os.path.expanduser(os.fspath(repo_dir)))
            if not path.is_dir():
                raise FileNotFoundError(f"repo_dir: no such folder {os.fspath(repo_dir)!r}; {RADIALOG_INSTALL}")
            return path
        if self.checkpoint_is_local:
            return Path(self.checkpoint)
        try:
            return Path(local_snapshot(self.checkpoint, revision=self.revision, local_files_only=True))
        except OSError:
            return None  # not cached: the import below explains what to do

    def _find_classifier(self, classifier_checkpoint: str | os.PathLike | None) -> Path | None:
        if classifier_checkpoint is not None:
            path = Path(os.path.expanduser(os.fspath(classifier_checkpoint)))
            if not path.is_file():
                raise FileNotFoundError(
                    f"classifier_checkpoint: no such file {os.fspath(classifier_checkpoint)!r}; it is "
                    f"{CLASSIFIER_RELATIVE} in RaDialog's Hugging Face repository"
                )
            return path
        return None if self.repo_dir is None else self.repo_dir / CLASSIFIER_RELATIVE

    def _import_code(self) -> dict[str, Any]:
        if self.repo_dir is not None and str(self.repo_dir) not in sys.path:
            sys.path.insert(0, str(self.repo_dir))
        code = {
            "builder": require("LLAVA_Biovil.llava.model.builder", RADIALOG_INSTALL),
            "mm_utils": require("LLAVA_Biovil.llava.mm_utils", RADIALOG_INSTALL),
            "conversation": require("LLAVA_Biovil.llava.conversation", RADIALOG_INSTALL),
            "constants": require("LLAVA_Biovil.llava.constants", RADIALOG_INSTALL),
            "classifier": require("findings_classifier.chexpert_train", RADIALOG_INSTALL),
            "transforms": require("torchvision.transforms", RADIALOG_INSTALL),
        }
        utils_file = None if self.repo_dir is None else self.repo_dir / "utils.py"
        if utils_file is None or not utils_file.is_file():
            raise ImportError(f"RaDialog's utils.py (create_chest_xray_transform_for_inference) was not found; {RADIALOG_INSTALL}")
        spec = importlib.util.spec_from_file_location("shovir_radialog_utils", utils_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        code["utils"] = module
        return code

    def _extra_config(self) -> dict[str, Any]:
        return {
            "model_base": self.model_base,
            "model_name": self.model_name,
            "classifier_checkpoint": None if self.classifier_checkpoint is None else self.classifier_checkpoint.name,
            "classifier_threshold": self.threshold,
            "classifier_classes": list(CHEXPERT_CLASSES),
            "conversation": "conv_vicuna_v1",
            "prompt_prefix": "<image>. Predicted Findings: {findings}. ",
        }

    # ----- loading
    def _load(self) -> None:
        import torch

        if self.classifier_checkpoint is None or not self.classifier_checkpoint.is_file():
            raise FileNotFoundError(
                f"classifier_checkpoint: {self.classifier_checkpoint} not found; pass classifier_checkpoint=<path to "
                f"ChexpertClassifier.ckpt> ({CLASSIFIER_RELATIVE} in RaDialog's repository)"
            )
        folder = self.loading.snapshot()
        device = self._device()
        self.tokenizer, self.model, _, _ = self._code["builder"].load_pretrained_model(
            Path(folder), model_base=self.model_base, model_name=self.model_name, load_8bit=False, load_4bit=False,
            device=device,
        )
        self.model = self.model.to(device).eval()
        self.model.config.tokenizer_padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = self.tokenizer.eos_token_id
        classifier_module, transforms = self._code["classifier"], self._code["transforms"]
        classifier = classifier_module.LitIGClassifier.load_from_checkpoint(
            str(self.classifier_checkpoint), num_classes=len(CHEXPERT_CLASSES), class_names=list(CHEXPERT_CLASSES),
            strict=False,  # as RaDialog loads it; the checkpoint holds training-only entries
        )
        self._classifier_dtype = torch.float16 if str(device).startswith("cuda") else torch.float32
        self.classifier = classifier.to(device=device, dtype=self._classifier_dtype).eval()
        names = [str(n) for n in getattr(classifier, "class_names", CHEXPERT_CLASSES)]
        if names != list(CHEXPERT_CLASSES):
            raise ValueError(f"the classifier's classes {names} differ from RaDialog's {list(CHEXPERT_CLASSES)}")
        self.classifier_transform = transforms.Compose([
            transforms.Resize(512), transforms.CenterCrop(488), transforms.ToTensor(),
            classifier_module.ExpandChannels(),
        ])
        self.vision_transform = self._code["utils"].create_chest_xray_transform_for_inference(512, center_crop_size=448)

    # ----- generation
    def _grayscale(self, image: Image.Image, index: int) -> Image.Image:
        """RaDialog's input: ``remap_to_uint8`` of the pixel array, as an ``L`` image."""
        array = np.asarray(to_8bit(image, field=f"messages[{index}].images").convert("L"))
        return Image.fromarray(self._code["mm_utils"].remap_to_uint8(array)).convert("L")

    def predicted_findings(self, images: Sequence[Image.Image]) -> list[str]:
        """The classifier step for prepared grayscale images: one findings string per image."""
        import torch

        batch = torch.stack([self.classifier_transform(image) for image in images])
        with torch.inference_mode():
            logits = self.classifier(batch.to(device=self.model.device, dtype=self._classifier_dtype))
        flags = (torch.sigmoid(logits.float()) > self.threshold).cpu().numpy()
        return [findings_text(row.tolist()) for row in flags]

    def prompt_text(self, message: Message, findings: str, index: int = 0) -> tuple[str, str]:
        """The conversation text and its stop string for one message."""
        conversation = self._code["conversation"]
        instruction = compose_text(self.question(message, index), message.report, self.report_template)
        conv = conversation.conv_vicuna_v1.copy()
        conv.append_message("USER", f"<image>. Predicted Findings: {findings}. {instruction}")
        conv.append_message("ASSISTANT", None)
        stop = conv.sep2 if conv.sep_style == conversation.SeparatorStyle.TWO else conv.sep
        return conv.get_prompt(), stop

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        import torch

        gray = [self._grayscale(m.images[0], offset + i) for i, m in enumerate(batch)]
        findings = self.predicted_findings(gray)
        mm_utils, constants = self._code["mm_utils"], self._code["constants"]
        rows, stops = [], []
        for row, (message, found) in enumerate(zip(batch, findings)):
            prompt, stop = self.prompt_text(message, found, offset + row)
            ids = mm_utils.tokenizer_image_token(prompt, self.tokenizer, constants.IMAGE_TOKEN_INDEX, return_tensors="pt")
            rows.append([int(i) for i in ids.tolist()])
            stops.append(stop)
        pad_id = int(self.tokenizer.pad_token_id)
        input_ids, attention_mask = left_pad(rows, pad_id)
        device = self.model.device
        pixels = torch.stack([self.vision_transform(image) for image in gray]).to(device=device, dtype=self.model.dtype)
        stopping = stop_on_strings(self.tokenizer, sorted(set(stops)), input_ids.shape[1])
        with torch.inference_mode():
            sequences = self.model.generate(
                input_ids.to(device), images=pixels, attention_mask=attention_mask.to(device), pad_token_id=pad_id,
                stopping_criteria=[stopping], **self._generate_kwargs(batch),
            )
        texts = self.tokenizer.batch_decode(sequences[:, input_ids.shape[1]:], skip_special_tokens=True)
        return [Generation(text=truncate_at(text, [stop])) for text, stop in zip(texts, stops)]

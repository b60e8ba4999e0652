"""Hugging Face adapters: any image-text-to-text checkpoint, MedGemma and NV-Reason-CXR.

:class:`ImageTextToTextAdapter` runs any ``AutoModelForImageTextToText`` checkpoint that has a chat
template (LLaVA, Qwen2.5-VL, Gemma 3, Idefics, ...). :class:`MedGemma` and :class:`NVReasonCXR`
are thin subclasses with the ShoViR authors' settings (reference code §5.3, final prompts from
``src/benchmark/prompts.py`` @ ``06324c9``; launch flags from §5.1).

The module also holds the pieces every shovir adapter shares (:class:`PretrainedAdapter`,
:class:`Decoding`, image conversion, checkpoint resolution, the report template, stop strings),
so that the family modules (``chexagent``, ``cxrmate``, ``libra``, ``maira``, ``radialog``) only
describe what is particular to their model.

How a message becomes model input (generic adapter)
---------------------------------------------------
One user turn holds the message's images, then one text block (``image_first=False`` puts the text
first; ModaLens tested both orders). The text block is the question (``Message.prompt``, else the
adapter's ``prompt``); when the message carries a ``report`` (the ModaLens "with report" arm) the
report comes first, through :data:`REPORT_TEMPLATE`::

    Radiology report:
    <report>

    <question>

An optional ``system_prompt`` adds a system turn. The conversation goes through the processor's
own chat template (``processor.apply_chat_template(..., tokenize=True)``, which also keeps a
template's BOS from being doubled), batched with **left padding**. Prompt tokens are sliced off the
output and the rest is decoded with ``skip_special_tokens=True``.

Defects of the reference code avoided here (reference §9)
---------------------------------------------------------
* **Sampling is reproducible** (defect 7). Greedy decoding is the default. ``do_sample=True``
  needs an explicit integer ``seed``: Hugging Face ``generate`` draws from torch's global
  generator, so each batch runs inside ``torch.random.fork_rng`` with the generators seeded from a
  SHA-256 of ``(seed, the batch's prompts, reports, options and image bytes)``. The same batch gives
  the same text in any process, and the caller's random state is left untouched. (Sampled outputs
  still depend on which messages share a batch; use ``batch_size=1`` for per-message draws.)
* **One output per message, in order** (defect 10): every adapter checks it.
* **No remote code unless asked**: ``trust_remote_code`` is an explicit argument defaulting to
  ``False`` and is not even passed to ``from_pretrained`` unless it is ``True``.
* **Nothing downloads unless asked** (DESIGN: offline first): ``local_files_only=True`` by default;
  a missing local folder is an immediate :class:`FileNotFoundError`, before any Hub call.
* **Grayscale stays grayscale, 16-bit is normalised explicitly**: see :func:`to_8bit`.
* **The reasoning trace is not scored**: NV-Reason-CXR's ``<think>`` block goes to
  ``Generation.reasoning`` (:func:`split_reasoning`); §5.3 notes the authors never stripped it.

Answer scores (ModaLens margins)
--------------------------------
When a message has ``options``, :class:`ImageTextToTextAdapter` runs one extra one-token pass
(``generate(max_new_tokens=1, output_logits=True)``, which builds the inputs, positions and image
features exactly as generation does) and returns, for each option, the log-softmax of the raw
logits at the first generated position, taken at the option's first token
(``tokenizer(option, add_special_tokens=False)``, so ``"yes"`` and ``" yes"`` are different
options). Options that share a first token cannot be told apart and are refused.

Example (no weights are loaded until the first :meth:`~ModelAdapter.generate`)::

    >>> adapter = MedGemma()
    >>> adapter.config()["prompt"], adapter.config()["decoding"]["max_new_tokens"]
    ('Describe this X-ray.', 450)
    >>> split_reasoning("<think>Heart is enlarged.</think><answer>Cardiomegaly</answer>")
    ('Cardiomegaly', 'Heart is enlarged.')
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from PIL import Image

from shovir.models.base import Generation, Message, ModelAdapter

__all__ = [
    "REPORT_TEMPLATE",
    "Decoding",
    "PretrainedAdapter",
    "ImageTextToTextAdapter",
    "MedGemma",
    "NVReasonCXR",
    "compose_text",
    "to_8bit",
    "to_rgb",
    "split_reasoning",
    "truncate_at",
    "resolve_checkpoint",
    "local_snapshot",
    "canonical_dtype",
    "torch_dtype",
    "batch_seed",
    "seeded_sampling",
    "left_pad",
    "stop_on_strings",
]

REPORT_TEMPLATE = "Radiology report:\n{report}\n\n{question}"
"""How a context report and the question share the user turn (fields ``{report}``, ``{question}``)."""

_DTYPES = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
_HIGH_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}


# --------------------------------------------------------------------------- text helpers


def compose_text(question: str, report: str | None, template: str = REPORT_TEMPLATE) -> str:
    """The user-turn text: the question alone, or the report then the question.

    >>> compose_text("Is there an effusion?", None)
    'Is there an effusion?'
    >>> print(compose_text("Is there an effusion?", "Small left effusion."))
    Radiology report:
    Small left effusion.
    <BLANKLINE>
    Is there an effusion?
    """
    if report is None:
        return question
    if not isinstance(report, str):
        raise ValueError(f"report must be a string or None, got {type(report).__name__}")
    return template.format(report=report, question=question)


def _check_template(template: str, field: str = "report_template") -> str:
    if not isinstance(template, str) or "{report}" not in template or "{question}" not in template:
        raise ValueError(f"{field} must be a string containing '{{report}}' and '{{question}}', got {template!r}")
    try:
        template.format(report="", question="")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(f"{field}: only the fields {{report}} and {{question}} are allowed ({error})") from None
    return template


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


# --------------------------------------------------------------------------- images


def to_8bit(image: Any, *, field: str = "images") -> Image.Image:
    """An 8-bit PIL image: ``L`` for grayscale inputs, ``RGB`` for colour ones.

    ``L`` and ``RGB`` pass through unchanged. 16-bit and 32-bit grayscale (``I;16``, ``I``, ``F``,
    e.g. PadChest PNGs) are min–max scaled to 0–255 with *rounding* (a constant image becomes all
    zeros, as in the authors' base normalisation, reference §4.1); ``1``/``LA`` become ``L``, other
    modes ``RGB``. No lossy step is involved.

    >>> to_8bit(Image.new("L", (2, 2), 7)).getpixel((0, 0))
    7
    >>> wide = Image.fromarray(np.array([[0, 1000], [3000, 4000]], dtype=np.uint16))
    >>> np.asarray(to_8bit(wide)).tolist()
    [[0, 64], [191, 255]]
    """
    if not isinstance(image, Image.Image):
        raise ValueError(f"{field}: expected a PIL image, got {type(image).__name__}")
    mode = image.mode
    if mode in ("L", "RGB"):
        return image
    if mode in _HIGH_BIT_MODES:
        values = np.asarray(image, dtype=np.float64)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) / (high - low) * 255.0 if high > low else np.zeros_like(values)
        return Image.fromarray(np.rint(scaled).astype(np.uint8), mode="L")
    if mode in ("1", "LA", "La"):
        return image.convert("L")
    return image.convert("RGB")


def to_rgb(image: Any, *, field: str = "images") -> Image.Image:
    """:func:`to_8bit`, then three equal channels for a grayscale image (lossless).

    >>> to_rgb(Image.new("L", (1, 1), 9)).getpixel((0, 0))
    (9, 9, 9)
    """
    return to_8bit(image, field=field).convert("RGB")


# --------------------------------------------------------------------------- checkpoints, dtype


def resolve_checkpoint(checkpoint: Any, *, field: str = "checkpoint") -> tuple[str, bool]:
    """``(checkpoint, is_local_folder)``, refusing a local path that does not exist.

    A string naming an existing folder is local. Something that can only be a filesystem path
    (absolute, ``./``, ``../``, ``~``, a backslash, more than one ``/``, a trailing ``/``) but does
    not exist raises :class:`FileNotFoundError` at once, before any Hub call. Anything else is a
    Hub id (``org/name``).

    >>> resolve_checkpoint("google/medgemma-1.5-4b-it")
    ('google/medgemma-1.5-4b-it', False)
    >>> resolve_checkpoint("/no/such/folder")
    Traceback (most recent call last):
    ...
    FileNotFoundError: checkpoint: no such folder '/no/such/folder' ...
    """
    if isinstance(checkpoint, os.PathLike):
        checkpoint = os.fspath(checkpoint)
    if not isinstance(checkpoint, str) or not checkpoint.strip():
        raise ValueError(f"{field} must be a local folder or a Hugging Face Hub id ('org/name'), got {checkpoint!r}")
    expanded = os.path.expanduser(checkpoint)
    if os.path.isdir(expanded):
        return expanded, True
    if os.path.exists(expanded):
        raise ValueError(f"{field}: {checkpoint!r} is a file; pass the checkpoint folder that holds config.json")
    looks_local = (
        os.path.isabs(expanded)
        or checkpoint.startswith((".", "~"))
        or "\\" in checkpoint
        or checkpoint.count("/") > 1
        or checkpoint.endswith("/")
    )
    if looks_local:
        raise FileNotFoundError(
            f"{field}: no such folder {checkpoint!r} (nothing was downloaded). Pass an existing checkpoint "
            "folder (config.json, weights, processor/tokenizer files) or a Hugging Face Hub id such as 'org/name'."
        )
    return checkpoint, False


def local_snapshot(checkpoint: str, *, revision: str | None = None, local_files_only: bool = True,
                   field: str = "checkpoint") -> str:
    """A local folder for ``checkpoint``: the folder itself, or the Hub snapshot in the cache.

    Research code that builds models itself (Libra's and RaDialog's builders) has no
    ``local_files_only`` switch, so shovir hands it a folder. With ``local_files_only=True`` (the
    default) only the local Hugging Face cache is read; otherwise the snapshot may be downloaded.
    """
    path, is_local = resolve_checkpoint(checkpoint, field=field)
    if is_local:
        return path
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id=path, revision=revision, local_files_only=local_files_only)
    except Exception as error:  # LocalEntryNotFoundError, OfflineModeIsEnabled, HTTP errors, ...
        raise OSError(_hub_hint(path, local_files_only, field)) from error


def _hub_hint(checkpoint: str, local_files_only: bool, field: str) -> str:
    if local_files_only:
        return (
            f"{field}: {checkpoint!r} is not a local folder and is not in the local Hugging Face cache; downloads are "
            f"off by default (local_files_only=True). Download it once (`hf download {checkpoint}`), pass a local "
            "folder, or pass local_files_only=False to let it be downloaded."
        )
    return (
        f"{field}: {checkpoint!r} could not be fetched from the Hugging Face Hub (offline? HF_HUB_OFFLINE=1? gated "
        "model without accepted terms or a token?). Download it where the Hub is reachable and pass the folder."
    )


def canonical_dtype(dtype: Any, *, field: str = "dtype") -> str:
    """A dtype name: ``float32``, ``float16``, ``bfloat16`` or ``auto`` (the checkpoint's own).

    >>> canonical_dtype("bf16"), canonical_dtype(None)
    ('bfloat16', 'auto')
    """
    if dtype is None:
        return "auto"
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"{field} must be one of float32, float16, bfloat16, auto (or None), got {dtype!r}")
    return _DTYPES[name]


def torch_dtype(name: str) -> Any:
    """The torch dtype for a :func:`canonical_dtype` name (``"auto"`` stays a string)."""
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def _default_device(device: str | None) -> str:
    if device is not None:
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------- decoding and seeds


@dataclass(frozen=True)
class Decoding:
    """Decoding settings, validated; exactly one of ``max_new_tokens`` and ``max_length``.

    >>> Decoding(max_new_tokens=10).generate_kwargs()
    {'max_new_tokens': 10, 'do_sample': False, 'num_beams': 1, 'use_cache': True}
    >>> Decoding(max_new_tokens=10, do_sample=True)
    Traceback (most recent call last):
    ...
    ValueError: seed: sampling (do_sample=True) needs an explicit integer seed ...
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

    def generate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``model.generate`` (the seed is applied by :func:`seeded_sampling`)."""
        kwargs: dict[str, Any] = {}
        if self.max_new_tokens is not None:
            kwargs["max_new_tokens"] = self.max_new_tokens
        else:
            kwargs["max_length"] = self.max_length
        kwargs.update(do_sample=self.do_sample, num_beams=self.num_beams, use_cache=self.use_cache)
        for field in ("temperature", "top_p", "top_k"):
            value = getattr(self, field)
            if value is not None:
                kwargs[field] = value
        return kwargs

    def as_config(self) -> dict[str, Any]:
        """The settings as a plain dict (the seed only when sampling: greedy output ignores it)."""
        config = asdict(self)
        if not self.do_sample:
            config["seed"] = None
        return config


def _message_digest(message: Message) -> bytes:
    digest = hashlib.sha256()
    for part in (message.prompt, message.report, "\x1f".join(message.options or [])):
        digest.update(repr(part).encode("utf-8"))
    for image in message.images:
        digest.update(f"{image.mode}|{image.size}".encode())
        digest.update(image.tobytes())
    return digest.digest()


def batch_seed(seed: int, messages: Sequence[Message]) -> int:
    """A 63-bit seed from the user's seed and the batch's content (stable across processes).

    >>> m = Message(images=[Image.new("L", (2, 2))], prompt="Describe.")
    >>> batch_seed(3, [m]) == batch_seed(3, [m]) != batch_seed(4, [m])
    True
    """
    digest = hashlib.sha256(f"shovir-sampling|{int(seed)}|".encode())
    for message in messages:
        digest.update(_message_digest(message))
    return int.from_bytes(digest.digest()[:8], "little") & (2**63 - 1)


@contextlib.contextmanager
def seeded_sampling(seed: int | None) -> Iterator[None]:
    """Seed torch's generators inside a forked random state (``None``: do nothing).

    Hugging Face ``generate`` has no ``generator`` argument and samples from torch's global
    generators, so this is how a batch gets its own reproducible stream without changing the
    caller's random state.
    """
    if seed is None:
        yield
        return
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


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
    stop string afterwards (:func:`truncate_at`), which gives the same text under greedy decoding.
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


# --------------------------------------------------------------------------- the shared base


class PretrainedAdapter(ModelAdapter):
    """Shared machinery of the checkpoint-backed adapters.

    It validates messages, loads the model on first use, splits a call into batches of
    :attr:`batch_size`, applies the sampling seed per batch and checks one output per message.
    Subclasses implement :meth:`_load` and :meth:`_generate_batch`, and may add to
    :meth:`_extra_config`.
    """

    default_checkpoint: str | None = None
    requires_remote_code: bool = False
    supports_scores: bool = False
    uses_prompt: bool = True
    max_images: int | None = None

    def __init__(
        self,
        checkpoint: str | os.PathLike | None,
        *,
        decoding: Decoding,
        dtype: str | None = None,
        device: str | None = None,
        device_map: str | dict | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        local_files_only: bool = True,
        batch_size: int | None = None,
        prompt: str | None = None,
        report_template: str = REPORT_TEMPLATE,
    ) -> None:
        if checkpoint is None:
            checkpoint = self.default_checkpoint
        if checkpoint is None:
            raise ValueError(f"{type(self).__name__}: pass checkpoint=<local folder or Hub id>")
        if not isinstance(trust_remote_code, bool):
            raise ValueError(f"trust_remote_code must be True or False, got {trust_remote_code!r}")
        if not isinstance(local_files_only, bool):
            raise ValueError(f"local_files_only must be True or False, got {local_files_only!r}")
        if device is not None and device_map is not None:
            raise ValueError("pass either device or device_map, not both")
        if batch_size is not None:
            if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
                raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
            self.batch_size = batch_size
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string or None, got {type(prompt).__name__}")
        self.checkpoint, self.checkpoint_is_local = resolve_checkpoint(checkpoint)
        self.checkpoint_name = os.fspath(checkpoint)
        self.decoding = decoding
        self.dtype = canonical_dtype(dtype)
        self.device = device
        self.device_map = device_map
        self.trust_remote_code = trust_remote_code
        self.revision = revision
        self.local_files_only = local_files_only
        if prompt is not None:
            self.default_prompt = prompt
        self.report_template = _check_template(report_template)
        self._loaded = False

    # ----- configuration
    def _require_remote_code(self) -> None:
        if self.requires_remote_code and not self.trust_remote_code:
            raise ValueError(
                f"{type(self).__name__}: {self.checkpoint_name!r} ships its model code inside the checkpoint and cannot "
                "load without it; review that code, then pass trust_remote_code as True"
            )

    def _hub_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"local_files_only": self.local_files_only}
        if self.revision is not None:
            kwargs["revision"] = self.revision
        if self.trust_remote_code:
            kwargs["trust_remote_code"] = True
        return kwargs

    def config(self) -> dict[str, Any]:
        """Checkpoint, revision, prompt, decoding and dtype: what determines the outputs."""
        config = {
            "name": self.name,
            "checkpoint": self.checkpoint_name,
            "revision": self.revision,
            "prompt": self.default_prompt,
            "report_template": self.report_template,
            "dtype": self.dtype,
            "decoding": self.decoding.as_config(),
        }
        config.update(self._extra_config())
        return config

    def _extra_config(self) -> dict[str, Any]:
        return {}

    # ----- loading
    def load(self) -> "PretrainedAdapter":
        """Load the weights now (otherwise the first :meth:`generate` does it)."""
        if not self._loaded:
            self._load()
            self._loaded = True
        return self

    def _load(self) -> None:
        raise NotImplementedError

    def _run_loader(self, loader: Any, *args: Any, **kwargs: Any) -> Any:
        """Call a ``from_pretrained`` and turn cache misses / remote-code refusals into clear errors."""
        try:
            return loader(*args, **kwargs)
        except ValueError as error:
            if "trust_remote_code" in str(error):
                raise ValueError(
                    f"{self.checkpoint_name!r} ships its own model code; review it and pass trust_remote_code as True"
                ) from error
            raise
        except OSError as error:
            if self.checkpoint_is_local:
                raise OSError(f"checkpoint folder {self.checkpoint!r} could not be loaded: {error}") from error
            raise OSError(_hub_hint(self.checkpoint, self.local_files_only, "checkpoint")) from error

    def _device(self) -> str:
        return _default_device(self.device)

    # ----- generation
    def question(self, message: Message, index: int = 0) -> str:
        """The message's prompt, else the adapter's default prompt."""
        question = message.prompt if message.prompt is not None else self.default_prompt
        if question is None:
            raise ValueError(f"messages[{index}].prompt is None and {self.name} has no default prompt; pass prompt=...")
        if not isinstance(question, str):
            raise ValueError(f"messages[{index}].prompt must be a string, got {type(question).__name__}")
        return question

    def _validate(self, messages: Sequence[Message]) -> list[Message]:
        checked = list(messages)
        for index, message in enumerate(checked):
            if not isinstance(message, Message):
                raise ValueError(f"messages[{index}] must be a shovir Message, got {type(message).__name__}")
            if not isinstance(message.images, (list, tuple)) or not message.images:
                raise ValueError(f"messages[{index}].images must be a non-empty list of PIL images")
            for position, image in enumerate(message.images):
                if not isinstance(image, Image.Image):
                    raise ValueError(
                        f"messages[{index}].images[{position}] must be a PIL image, got {type(image).__name__}"
                    )
            if self.max_images is not None and len(message.images) > self.max_images:
                raise ValueError(
                    f"messages[{index}] has {len(message.images)} images; {self.name} takes at most {self.max_images}"
                )
            if message.report is not None and not isinstance(message.report, str):
                raise ValueError(f"messages[{index}].report must be a string or None, got {type(message.report).__name__}")
            if self.uses_prompt:
                self.question(message, index)  # fail before any generation, naming the message
            if message.options is not None:
                if (not isinstance(message.options, (list, tuple)) or not message.options
                        or not all(isinstance(o, str) and o for o in message.options)):
                    raise ValueError(f"messages[{index}].options must be a non-empty list of non-empty strings")
                if len(set(message.options)) != len(message.options):
                    raise ValueError(f"messages[{index}].options has duplicates: {list(message.options)}")
        return checked

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One :class:`Generation` per message, in order (batches of :attr:`batch_size`)."""
        checked = self._validate(messages)
        if not checked:
            return []
        self.load()
        outputs: list[Generation] = []
        for start in range(0, len(checked), self.batch_size):
            batch = checked[start:start + self.batch_size]
            seed = batch_seed(self.decoding.seed, batch) if self.decoding.do_sample else None
            with seeded_sampling(seed):
                produced = self._generate_batch(batch, offset=start)
            outputs.extend(self._check_batch(batch, produced))
        return self._check_batch(checked, outputs)

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        raise NotImplementedError

    def _move(self, inputs: Mapping[str, Any], device: Any, dtype: Any = None) -> dict[str, Any]:
        import torch

        moved: dict[str, Any] = {}
        for key, value in inputs.items():
            if torch.is_tensor(value):
                if dtype is not None and torch.is_floating_point(value):
                    moved[key] = value.to(device=device, dtype=dtype)
                else:
                    moved[key] = value.to(device)
            else:
                moved[key] = value
        return moved


# --------------------------------------------------------------------------- generic adapter


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
        seed: required when ``do_sample=True`` (see the module docstring).
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
    decode_kwargs: dict[str, Any] = {}

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
        super().__init__(
            checkpoint, decoding=decoding, dtype=dtype, device=device, device_map=device_map,
            trust_remote_code=trust_remote_code, revision=revision, local_files_only=local_files_only,
            batch_size=batch_size, prompt=prompt, report_template=report_template,
        )
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be a string or None, got {type(system_prompt).__name__}")
        if not isinstance(image_first, bool) or not isinstance(skip_special_tokens, bool):
            raise ValueError("image_first and skip_special_tokens must be booleans")
        self.system_prompt = system_prompt
        self.attn_implementation = attn_implementation
        self.skip_special_tokens = skip_special_tokens
        self.image_first = image_first
        self._require_remote_code()
        self.processor: Any = None
        self.model: Any = None

    def _extra_config(self) -> dict[str, Any]:
        return {
            "system_prompt": self.system_prompt,
            "image_first": self.image_first,
            "attn_implementation": self.attn_implementation,
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
        model_kwargs = dict(hub)
        model_kwargs["dtype"] = torch_dtype(self.dtype)
        if self.device_map is not None:
            model_kwargs["device_map"] = self.device_map
        if self.attn_implementation is not None:
            model_kwargs["attn_implementation"] = self.attn_implementation
        model = self._run_loader(transformers.AutoModelForImageTextToText.from_pretrained, self.checkpoint, **model_kwargs)
        if self.device_map is None:
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
        kwargs = self.decoding.generate_kwargs()
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


class MedGemma(ImageTextToTextAdapter):
    """MedGemma 1.5 4B-it with the ShoViR authors' settings (reference §5.3, row *MedGemma*).

    Each default and its source:

    * checkpoint ``google/medgemma-1.5-4b-it`` — §5.3 HF id;
    * ``prompt="Describe this X-ray."`` as the **system** turn — §5.3 (``medgemma_default``;
      "Messages: system = prompt");
    * user turn = [text ``"Analyze this image."``, image] — §5.3 (text before the image); a context
      report precedes that text through :data:`REPORT_TEMPLATE`;
    * greedy, ``max_new_tokens=450`` — §5.3; ``use_cache=False`` — §5.3 (the authors' spec; greedy
      output does not depend on it, only speed);
    * ``dtype="bfloat16"`` — §5.1 (``--dtype bfloat16``); ``attn_implementation="sdpa"`` — §5.3;
    * ``batch_size=100`` — §5.1.

    For the ModaLens layout (question in the user turn) use ``hf-image-text-to-text`` with this
    checkpoint instead.
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
            checkpoint, prompt=prompt, dtype=dtype, max_new_tokens=max_new_tokens, use_cache=use_cache,
            attn_implementation=attn_implementation, image_first=False, **options,
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
    :func:`split_reasoning` puts the trace in ``Generation.reasoning`` and only the answer in
    ``Generation.text``; the authors scored the whole output (§5.3 "not stripped").
    """

    name = "nv-reason-cxr"
    default_checkpoint = "nvidia/NV-Reason-CXR-3B"
    default_prompt = "Find abnormalities and support devices."
    batch_size = 128
    decode_kwargs = {"clean_up_tokenization_spaces": False}

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        *,
        prompt: str | None = None,
        dtype: str | None = "bfloat16",
        max_new_tokens: int = 2048,
        use_cache: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(
            checkpoint, prompt=prompt, dtype=dtype, max_new_tokens=max_new_tokens, use_cache=use_cache, **options
        )

    def _extra_config(self) -> dict[str, Any]:
        config = super()._extra_config()
        config["reasoning"] = "split <think> into Generation.reasoning"
        return config

    def _finish(self, text: str, scores: dict[str, float] | None) -> Generation:
        answer, reasoning = split_reasoning(text)
        return Generation(text=answer, reasoning=reasoning, scores=scores)

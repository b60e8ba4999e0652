"""CheXbert (Smit et al. 2020) on transformers 5, from local files only.

CheXbert is ``bert-base-uncased`` followed by dropout on the ``[CLS]`` hidden state and 14 linear
heads: 13 four-way heads (0 blank, 1 positive, 2 negative, 3 uncertain) and a two-way *No Finding*
head (0 blank, 1 positive), in the order of :data:`shovir.labels.CLASSES`. The head index *is* the
shovir code, so the labeler's output needs no remapping.

What this module reproduces from the original (``stanfordmlgroup/CheXbert``: ``bert_tokenizer.py``,
``label.py``, ``models/bert_labeler.py``) and from the ShoViR authors' copy (reference code §6.1):

* **Cleaning** (:func:`clean_report`): strip, newlines → spaces, runs of whitespace → one space,
  strip.
* **Token ids** (:func:`chexbert_token_ids`): WordPiece tokens of the cleaned text, ids =
  ``[CLS] + ids + [SEP]``; a sequence longer than 512 keeps its first 511 ids and ends with
  ``[SEP]``; a report without tokens becomes ``[CLS, SEP]``. The original called the removed
  ``encode_plus`` on a list of word pieces, which is exactly ``convert_tokens_to_ids`` between
  ``[CLS]`` and ``[SEP]`` (no re-tokenisation); that is what is done here. By default the Python
  ("slow") BERT tokenizer is used, as in the original; ``fast_tokenizer=True`` selects the Rust one
  (identical on ordinary text, possibly not on rare Unicode).
* **Model**: :class:`CheXbertModel`, whose ``state_dict`` keys are the original ones
  (``bert.*``, ``linear_heads.N.*``) once the ``module.`` prefix left by ``nn.DataParallel`` is
  removed.
* **Batching**: padded batches with an attention mask, as ``label.py`` did. Reports are sorted by
  length before batching (less padding) and put back in input order.

Differences on purpose:

* **Strict loading.** f1chexbert loads with ``strict=False`` and silently ignores mismatched keys.
  Here missing or unexpected keys, or a shape mismatch, raise :class:`ValueError` listing them. The
  only keys tolerated are the position-id and token-type-id *buffers* that older transformers saved
  (``bert.embeddings.position_ids``, ``bert.embeddings.token_type_ids``), and only when they hold
  their default values (``arange`` / zeros); they are not weights.
* **Safe loading.** The checkpoint is read with ``torch.load(weights_only=True)``, which loads the
  original format (a dict with ``epoch``, ``model_state_dict`` and an Adam
  ``optimizer_state_dict``, in either the zip or the legacy serialisation) without unpickling
  arbitrary objects. A file that needs arbitrary unpickling is refused; a ``.safetensors`` file
  holding the state dict is also accepted.
* **No downloads.** The checkpoint comes from ``checkpoint=`` or ``$SHOVIR_CHEXBERT_CHECKPOINT``;
  the BERT ``config.json`` and ``vocab.txt`` from ``bert_dir=`` or ``$SHOVIR_CHEXBERT_BERT`` (a
  ``bert-base-uncased`` folder). Nothing is fetched from the Hub.

Example (no weights needed to clean and cut)::

    >>> clean_report("  Small left\\n\\n effusion.  ")
    'Small left effusion.'
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from shovir import labels as L

__all__ = [
    "CHECKPOINT_ENV",
    "BERT_ENV",
    "MAX_LENGTH",
    "CheXbertLabeler",
    "clean_report",
    "chexbert_token_ids",
    "load_chexbert_state_dict",
]

CHECKPOINT_ENV = "SHOVIR_CHEXBERT_CHECKPOINT"
"""Environment variable naming the ``chexbert.pth`` checkpoint."""

BERT_ENV = "SHOVIR_CHEXBERT_BERT"
"""Environment variable naming the local ``bert-base-uncased`` folder (``config.json``, ``vocab.txt``)."""

MAX_LENGTH = 512
"""CheXbert's maximum sequence length in word-piece ids, ``[CLS]`` and ``[SEP]`` included."""

NUM_FOUR_WAY_HEADS = 13
"""Heads 0–12 (every class but No Finding) have four outputs; head 13 (No Finding) has two."""

# Buffers (not weights) that transformers < 4.31 saved in BERT state dicts; tolerated only with
# their default values, because transformers 5 rebuilds them and does not persist them.
_BENIGN_BUFFERS = ("bert.embeddings.position_ids", "bert.embeddings.token_type_ids")

_WHITESPACE = re.compile(r"\s+")


def _require_torch() -> Any:
    try:
        import torch
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("the CheXbert labeler needs torch and transformers: pip install 'shovir[scorers]'") from error
    return torch


def clean_report(text: str) -> str:
    """Normalise a report the way CheXbert's ``bert_tokenizer.py`` did before tokenising.

    Strip, replace newlines by spaces, collapse every run of whitespace to one space, strip.

    >>> clean_report("No acute\\r\\n  process. ")
    'No acute process.'
    >>> clean_report(" \\n ")
    ''
    """
    return _WHITESPACE.sub(" ", text.strip().replace("\n", " ")).strip()


def chexbert_token_ids(report: str, tokenizer: Any, max_length: int = MAX_LENGTH) -> list[int]:
    """CheXbert's input ids for one report.

    ``[CLS] + wordpiece ids + [SEP]`` of :func:`clean_report` ``(report)``; longer than
    ``max_length`` → the first ``max_length - 1`` ids and ``[SEP]``; no tokens → ``[CLS, SEP]``.
    ``tokenizer`` is any BERT tokenizer with ``tokenize``, ``convert_tokens_to_ids``,
    ``cls_token_id`` and ``sep_token_id``.
    """
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2 ([CLS] and [SEP]), got {max_length}")
    pieces = tokenizer.tokenize(clean_report(report))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if not pieces:
        return [cls, sep]
    ids = [cls, *tokenizer.convert_tokens_to_ids(pieces), sep]
    if len(ids) > max_length:
        ids = ids[: max_length - 1] + [sep]
    return ids


def _load_checkpoint_file(path: Path) -> Mapping[str, Any]:
    torch = _require_torch()
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as error:  # UnpicklingError and friends; never retry with weights_only=False
        raise ValueError(
            f"checkpoint {str(path)!r} cannot be read with torch.load(weights_only=True): {str(error).splitlines()[0]}. "
            "shovir never unpickles arbitrary objects; convert the file once, in a session you trust, to a plain "
            "{'model_state_dict': state_dict} saved with torch.save (or to .safetensors)"
        ) from None


def load_chexbert_state_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a CheXbert checkpoint safely and return its state dict with ``module.`` prefixes removed.

    Accepts the original ``{"model_state_dict": ..., ...}`` dict, a bare state dict, or a
    ``.safetensors`` file. Only a *leading* ``module.`` (from ``nn.DataParallel``) is removed.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"CheXbert checkpoint {str(file)!r} does not exist; set {CHECKPOINT_ENV} or pass checkpoint= "
            "(the chexbert.pth of StanfordAIMI/RRG_scorers or stanfordmlgroup/CheXbert)"
        )
    payload = _load_checkpoint_file(file)
    if not isinstance(payload, Mapping):
        raise ValueError(f"checkpoint {str(file)!r}: expected a dict, got {type(payload).__name__}")
    state = payload.get("model_state_dict", payload)
    if not isinstance(state, Mapping):
        raise ValueError(f"checkpoint {str(file)!r}: 'model_state_dict' is a {type(state).__name__}, expected a dict")
    torch = _require_torch()
    not_tensors = [key for key, value in state.items() if not isinstance(value, torch.Tensor)]
    if not_tensors:
        raise ValueError(
            f"checkpoint {str(file)!r}: expected a 'model_state_dict' of tensors (CheXbert's training checkpoint "
            f"format); these entries are not tensors: {', '.join(map(str, not_tensors[:10]))}"
        )
    return {(key[len("module.") :] if key.startswith("module.") else key): value for key, value in state.items()}


def _resolve(value: str | os.PathLike[str] | None, env: str, argument: str, what: str) -> Path:
    if value is None:
        value = os.environ.get(env) or None
    if value is None:
        raise ValueError(f"no {what} given; set {env} or pass {argument}=")
    return Path(value).expanduser()


def _describe(keys: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


_MODEL_CLASS: type | None = None


def _model_class() -> type:
    """Build :class:`CheXbertModel` on first use, so that importing this module needs no torch."""
    global _MODEL_CLASS
    if _MODEL_CLASS is not None:
        return _MODEL_CLASS
    torch = _require_torch()
    from transformers import BertModel

    class CheXbertModel(torch.nn.Module):
        """CheXbert's ``bert_labeler``: BERT encoder → dropout on ``[CLS]`` → 14 linear heads.

        ``state_dict`` keys: ``bert.*`` (a transformers ``BertModel`` *with* its pooler, which the
        checkpoint contains although the heads read the ``[CLS]`` hidden state) and
        ``linear_heads.{0..13}.{weight,bias}``. :meth:`forward` returns the 14 logit tensors,
        ``(batch, 4)`` for heads 0–12 and ``(batch, 2)`` for head 13.
        """

        def __init__(self, config: Any, dropout: float = 0.1) -> None:
            super().__init__()
            self.bert = BertModel(config, add_pooling_layer=True)
            self.dropout = torch.nn.Dropout(dropout)
            hidden = config.hidden_size
            heads = [torch.nn.Linear(hidden, 4) for _ in range(NUM_FOUR_WAY_HEADS)] + [torch.nn.Linear(hidden, 2)]
            self.linear_heads = torch.nn.ModuleList(heads)

        def forward(self, input_ids: Any, attention_mask: Any) -> list[Any]:
            """Logits of the 14 heads for a padded batch of ids and its attention mask."""
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            cls = self.dropout(hidden[:, 0, :])
            return [head(cls) for head in self.linear_heads]

    CheXbertModel.__module__ = __name__
    CheXbertModel.__qualname__ = "CheXbertModel"
    _MODEL_CLASS = CheXbertModel
    return CheXbertModel


def __getattr__(name: str) -> Any:
    # ``CheXbertModel`` is a torch ``nn.Module``; it is created lazily (PEP 562) so that this module
    # imports, and its doctests run, without torch.
    if name == "CheXbertModel":
        return _model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_and_fit_state_dict(model: Any, state: dict[str, Any], source: str) -> dict[str, Any]:
    """Strict key and shape check; returns the state dict to load (benign buffers removed)."""
    torch = _require_torch()
    expected = model.state_dict()
    buffers = dict(model.named_buffers())
    state = dict(state)
    for key in _BENIGN_BUFFERS:
        if key in state and key not in expected and key in buffers:
            value, default = state[key], buffers[key]
            if value.shape[-1] != default.shape[-1] or not torch.equal(value.reshape(-1).to(default.dtype), default.reshape(-1).cpu()):
                raise ValueError(
                    f"checkpoint {source!r}: buffer {key!r} differs from its default value; "
                    "it is not a CheXbert checkpoint for this BERT config"
                )
            del state[key]
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys: {_describe(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_describe(unexpected)}")
        raise ValueError(
            f"checkpoint {source!r} does not match the CheXbert architecture ({'; '.join(parts)}). "
            f"Expected keys 'bert.*' and 'linear_heads.0-13.*' (optionally prefixed 'module.'); check {CHECKPOINT_ENV} "
            f"/ checkpoint= and that {BERT_ENV} / bert_dir= is the bert-base-uncased folder it was trained from"
        )
    wrong = [
        f"{key}: checkpoint {tuple(state[key].shape)} vs model {tuple(expected[key].shape)}"
        for key in expected
        if tuple(state[key].shape) != tuple(expected[key].shape)
    ]
    if wrong:
        raise ValueError(
            f"checkpoint {source!r}: shape mismatch for {len(wrong)} tensors ({_describe(wrong, 5)}); "
            f"is {BERT_ENV} / bert_dir= the BERT config the checkpoint was trained with?"
        )
    return state


def _load_tokenizer(folder: Path, fast: bool) -> Any:
    vocab = folder / "vocab.txt"
    do_lower_case = True
    tokenizer_config = folder / "tokenizer_config.json"
    if tokenizer_config.is_file():
        do_lower_case = bool(json.loads(tokenizer_config.read_text(encoding="utf-8")).get("do_lower_case", True))
    if fast:
        from transformers import BertTokenizer as Tokenizer
    else:
        try:
            from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as Tokenizer
        except ImportError:  # transformers < 5: BertTokenizer is the Python tokenizer
            from transformers import BertTokenizer as Tokenizer
    # positional: the vocabulary path is ``vocab_file`` for the Python tokenizer and ``vocab`` for
    # transformers 5's Rust-backed BertTokenizer (which silently ignores ``vocab_file=``)
    return Tokenizer(str(vocab), do_lower_case=do_lower_case)


class CheXbertLabeler:
    """Label reports with CheXbert: ``labeler(reports) -> (n, 14) int8`` codes (see :mod:`shovir.labels`).

    Parameters
    ----------
    checkpoint:
        ``chexbert.pth`` (default ``$SHOVIR_CHEXBERT_CHECKPOINT``).
    bert_dir:
        Folder with the ``bert-base-uncased`` ``config.json`` and ``vocab.txt`` (default
        ``$SHOVIR_CHEXBERT_BERT``). Only the configuration and vocabulary are read; all weights
        come from the checkpoint.
    device:
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a :class:`torch.device`; default CUDA when available.
    batch_size:
        Reports per forward pass.
    progress:
        Show a tqdm bar over batches (can be overridden per call).
    fast_tokenizer:
        Use the Rust BERT tokenizer instead of the Python one the original used.

    The codes are the per-head argmax: heads 0–12 give 0 blank / 1 positive / 2 negative /
    3 uncertain, the No Finding head gives 0 or 1.
    """

    name = "chexbert"

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | None = None,
        bert_dir: str | os.PathLike[str] | None = None,
        *,
        device: str | Any | None = None,
        batch_size: int = 32,
        progress: bool = False,
        fast_tokenizer: bool = False,
    ) -> None:
        torch = _require_torch()
        from transformers import BertConfig

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        checkpoint_path = _resolve(checkpoint, CHECKPOINT_ENV, "checkpoint", "CheXbert checkpoint (chexbert.pth)")
        folder = _resolve(bert_dir, BERT_ENV, "bert_dir", "bert-base-uncased folder")
        if not folder.is_dir():
            raise FileNotFoundError(
                f"BERT folder {str(folder)!r} does not exist; set {BERT_ENV} or pass bert_dir= "
                "(a local bert-base-uncased folder with config.json and vocab.txt)"
            )
        absent = [name for name in ("config.json", "vocab.txt") if not (folder / name).is_file()]
        if absent:
            raise FileNotFoundError(
                f"BERT folder {str(folder)!r} lacks {', '.join(absent)}; set {BERT_ENV} or pass bert_dir= "
                "to a bert-base-uncased folder with config.json and vocab.txt"
            )

        self.checkpoint = checkpoint_path
        self.bert_dir = folder
        self.batch_size = batch_size
        self.progress = progress
        self.device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = _load_tokenizer(folder, fast_tokenizer)
        config = BertConfig.from_pretrained(str(folder), local_files_only=True)
        n_vocab = len(self.tokenizer.get_vocab())
        if config.vocab_size != n_vocab:
            raise ValueError(
                f"{str(folder / 'config.json')!r} has vocab_size {config.vocab_size} but the tokenizer built from "
                f"vocab.txt has {n_vocab} entries; {BERT_ENV} / bert_dir= must be one BERT folder"
            )
        if config.max_position_embeddings < MAX_LENGTH:
            raise ValueError(
                f"{str(folder / 'config.json')!r}: max_position_embeddings {config.max_position_embeddings} < "
                f"{MAX_LENGTH}, CheXbert's sequence length"
            )
        model = _model_class()(config)
        state = _check_and_fit_state_dict(model, load_chexbert_state_dict(checkpoint_path), str(checkpoint_path))
        model.load_state_dict(state, strict=True)
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        self.model = model.to(self.device)

    def __repr__(self) -> str:
        return f"CheXbertLabeler(checkpoint={str(self.checkpoint)!r}, device={str(self.device)!r})"

    def token_ids(self, reports: Sequence[str]) -> list[list[int]]:
        """CheXbert's input ids for each report (:func:`chexbert_token_ids`)."""
        return [chexbert_token_ids(report, self.tokenizer) for report in _check_reports(reports)]

    def _batches(self, ids: list[list[int]], progress: bool) -> Iterator[tuple[list[int], list[Any]]]:
        torch = _require_torch()
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        starts = range(0, len(order), self.batch_size)
        if progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="CheXbert", unit="batch")
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode():
            for start in starts:
                rows = order[start : start + self.batch_size]
                width = max(len(ids[i]) for i in rows)
                input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):
                    input_ids[r, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[r, : len(ids[i])] = 1
                yield rows, self.model(input_ids.to(self.device), mask.to(self.device))

    def logits(self, reports: Sequence[str], *, progress: bool | None = None) -> list[np.ndarray]:
        """The 14 heads' logits, in input order: 13 arrays ``(n, 4)`` then one ``(n, 2)`` (float32)."""
        ids = self.token_ids(reports)
        out = [np.zeros((len(ids), 4 if j < NUM_FOUR_WAY_HEADS else 2), dtype=np.float32) for j in range(L.NUM_CLASSES)]
        for rows, heads in self._batches(ids, self.progress if progress is None else progress):
            for j, head in enumerate(heads):
                out[j][rows] = head.float().cpu().numpy()
        return out

    def __call__(self, reports: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        """Codes of shape ``(len(reports), 14)``, dtype ``int8``, in :data:`shovir.labels.CLASSES` order."""
        ids = self.token_ids(reports)
        codes = np.zeros((len(ids), L.NUM_CLASSES), dtype=np.int8)
        for rows, heads in self._batches(ids, self.progress if progress is None else progress):
            codes[rows] = np.stack([head.argmax(dim=1).cpu().numpy() for head in heads], axis=1)
        return codes


def _check_reports(reports: Sequence[str]) -> Sequence[str]:
    if isinstance(reports, str):
        raise ValueError("reports: expected a sequence of strings, got a single string; wrap it in a list")
    for index, report in enumerate(reports):
        if not isinstance(report, str):
            raise ValueError(f"reports[{index}]: expected a string, got {type(report).__name__} ({report!r})")
    return reports

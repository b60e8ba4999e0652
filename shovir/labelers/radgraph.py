"""F1-RadGraph (Delbrouck et al. 2022) through the ``radgraph`` package, from local weights only.

Reports are annotated by the ``radgraph`` package's DyGIE++ model (entities with labels and
relations); each hypothesis/reference pair is then scored by set overlap of entity tuples
(reference code §6.2):

* ``simple`` (RG_E): ``(tokens, label)`` for every entity;
* ``partial`` (RG_ER, the number usually reported and the default here): ``(tokens, label)`` for an
  entity without relations, ``(tokens, label, True)`` for one with relations;
* ``complete`` (RG_ER-bar): ``(tokens, label)`` for an entity without relations, and for each
  relation of an entity ``(tokens.lower(), label, relation, target tokens.lower())``.

Precision = |hyp ∩ ref| / |hyp|, recall = |hyp ∩ ref| / |ref|, F1 = 2PR / (P + R), 0 when
undefined; a pair scores 0 when either report is empty (after stripping whitespace) or has no
entity. The corpus score is the mean over pairs. The arithmetic is that of ``radgraph==0.1.18``
(the version the ShoViR authors used), implemented in :func:`radgraph_rewards` and checked against
the package in the tests; note that 0.1.18 lower-cases tokens only in ``complete`` (later GitHub
versions lower-case everywhere, so scores on mixed-case text differ between versions).

The default model is the classic ``"radgraph"`` (not the package default ``"radgraph-xl"``).

**Local weights.** ``model_cache_dir=`` (or ``$SHOVIR_RADGRAPH_CACHE_DIR``, else the package's own
cache ``~/.cache/radgraph/<version>``) must hold ``<model_type>/`` extracted from
``radgraph.tar.gz`` (``config.json``, ``vocabulary/``, ``weights.th``); the extracted folder itself
is accepted too. Nothing is ever downloaded: a missing folder is an error. The DyGIE config names a
base encoder (tokenizer and config only; its weights are in ``weights.th``); it is resolved from
``encoder=`` / ``$SHOVIR_RADGRAPH_ENCODER`` (a local folder), a local path already in the config, or
the Hugging Face cache with ``local_files_only``. When it has to be redirected, the package reads a
rewritten copy of ``config.json`` in a temporary folder that links to the original ``vocabulary/``
and ``weights.th``; the user's files are never modified.

**transformers 5.** The package vendors allennlp, whose tokenizer wrapper calls
``encode_plus`` and ``build_inputs_with_special_tokens``, both removed in transformers 5.
:func:`apply_transformers5_shim` restores them *on the tokenizer instances that the vendored
allennlp creates* (by wrapping ``radgraph.allennlp.common.cached_transformers.get_tokenizer``), not
on transformers' classes. It is applied when a :class:`RadGraphScorer` is constructed (never at
import of shovir), is idempotent, and does nothing to tokenizers that still have the methods.

The reward arithmetic needs no model:

>>> hyp = {"entities": {"1": {"tokens": "effusion", "label": "OBS-DP", "relations": [["located_at", "2"]]},
...                     "2": {"tokens": "pleural", "label": "ANAT-DP", "relations": []}}}
>>> ref = {"entities": {"1": {"tokens": "effusion", "label": "OBS-DP", "relations": []},
...                     "2": {"tokens": "pleural", "label": "ANAT-DP", "relations": []}}}
>>> radgraph_rewards(hyp, ref)
{'simple': 1.0, 'partial': 0.5, 'complete': 0.5}
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

import numpy as np

__all__ = [
    "CACHE_DIR_ENV",
    "ENCODER_ENV",
    "REWARD_LEVELS",
    "RewardLevel",
    "RadGraphScorer",
    "f1_radgraph",
    "radgraph_rewards",
    "apply_transformers5_shim",
]

CACHE_DIR_ENV = "SHOVIR_RADGRAPH_CACHE_DIR"
"""Environment variable: folder holding ``<model_type>/`` (``config.json``, ``vocabulary/``, ``weights.th``)."""

ENCODER_ENV = "SHOVIR_RADGRAPH_ENCODER"
"""Environment variable: local folder with the base encoder's ``config.json`` and tokenizer files."""

RewardLevel = Literal["simple", "partial", "complete"]
REWARD_LEVELS: tuple[str, ...] = ("simple", "partial", "complete")

MODEL_TYPES: tuple[str, ...] = ("radgraph", "radgraph-xl", "modern-radgraph-xl", "echograph")

Annotation = Mapping[str, Any]
"""One report's annotation: ``{"entities": {id: {"tokens", "label", "relations": [[rel, id], ...]}}}``."""

_SHIM_MARK = "_shovir_transformers5_shim"


def _require_radgraph() -> Any:
    try:
        # radgraph's import calls warnings.simplefilter(...) globally; keep that out of the caller's filters
        with warnings.catch_warnings():
            import radgraph
    except ImportError as error:
        raise ImportError(
            "F1-RadGraph needs the radgraph package (radgraph==0.1.18): pip install 'shovir[scorers]'"
        ) from error
    return radgraph


# -- reward arithmetic (radgraph 0.1.18 semantics) ---------------------------------------------


def _entity_sets(annotation: Annotation) -> dict[str, set[tuple[Any, ...]]]:
    entities = annotation["entities"]
    simple: set[tuple[Any, ...]] = set()
    partial: set[tuple[Any, ...]] = set()
    complete: set[tuple[Any, ...]] = set()
    for entity in entities.values():
        tokens, label, relations = entity["tokens"], entity["label"], entity["relations"]
        simple.add((tokens, label))
        if relations:
            partial.add((tokens, label, True))
            for relation, target in relations:
                complete.add((tokens.lower(), label, relation, entities[target]["tokens"].lower()))
        else:
            partial.add((tokens, label))
            complete.add((tokens, label))
    return {"simple": simple, "partial": partial, "complete": complete}


def _f1(hypothesis: set[tuple[Any, ...]], reference: set[tuple[Any, ...]]) -> float:
    common = len(hypothesis & reference)
    precision = common / len(hypothesis) if hypothesis else 0.0
    recall = common / len(reference) if reference else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def radgraph_rewards(hypothesis: Annotation, reference: Annotation) -> dict[str, float]:
    """The three F1-RadGraph rewards of one pair of annotations (0 if either has no entity).

    >>> empty = {"entities": {}}
    >>> radgraph_rewards(empty, {"entities": {"1": {"tokens": "edema", "label": "OBS-DP", "relations": []}}})
    {'simple': 0.0, 'partial': 0.0, 'complete': 0.0}
    """
    if not hypothesis["entities"] or not reference["entities"]:
        return {level: 0.0 for level in REWARD_LEVELS}
    hyp, ref = _entity_sets(hypothesis), _entity_sets(reference)
    return {level: _f1(hyp[level], ref[level]) for level in REWARD_LEVELS}


# -- transformers 5 shim -----------------------------------------------------------------------


def _special_token_template(tokenizer: Any) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """Learn how the tokenizer wraps one and two sequences with special tokens, from its own output.

    Returns ``(single_start, single_end, pair_start, pair_mid, pair_end)``.
    """

    def find(haystack: list[int], needle: list[int], start: int = 0) -> int:
        for i in range(start, len(haystack) - len(needle) + 1):
            if haystack[i : i + len(needle)] == needle:
                return i
        return -1

    for a, b in (("a", "b"), ("1", "2"), ("x", "y")):
        bare_a = tokenizer(a, add_special_tokens=False)["input_ids"]
        bare_b = tokenizer(b, add_special_tokens=False)["input_ids"]
        if not bare_a or not bare_b:
            continue
        single = tokenizer(a)["input_ids"]
        pair = tokenizer(a, b)["input_ids"]
        i = find(single, bare_a)
        j = find(pair, bare_a)
        k = find(pair, bare_b, j + len(bare_a)) if j >= 0 else -1
        if i < 0 or j < 0 or k < 0:
            continue
        template = (
            single[:i],
            single[i + len(bare_a) :],
            pair[:j],
            pair[j + len(bare_a) : k],
            pair[k + len(bare_b) :],
        )
        if len(template[0]) + len(template[1]) != tokenizer.num_special_tokens_to_add(pair=False):
            continue
        return template
    raise NotImplementedError(
        f"cannot infer how {type(tokenizer).__name__} adds special tokens; the radgraph transformers-5 shim "
        "supports template tokenizers (BERT-style [CLS] ... [SEP])"
    )


def _restore_v4_methods(tokenizer: Any) -> Any:
    """Give one tokenizer instance the two methods transformers 5 removed, with v4 semantics."""
    if hasattr(tokenizer, "encode_plus") and hasattr(tokenizer, "build_inputs_with_special_tokens"):
        return tokenizer

    if not hasattr(tokenizer, "encode_plus"):

        def encode_plus(text: str, text_pair: str | None = None, **kwargs: Any) -> Any:
            """transformers 4's single-example ``encode_plus``: ``tokenizer(text, text_pair, **kwargs)``."""
            if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
                raise TypeError("the radgraph shim's encode_plus takes one example (str, optional str)")
            return tokenizer(text, text_pair, **kwargs)

        tokenizer.encode_plus = encode_plus

    if not hasattr(tokenizer, "build_inputs_with_special_tokens"):
        single_start, single_end, pair_start, pair_mid, pair_end = _special_token_template(tokenizer)

        def build_inputs_with_special_tokens(ids_0: list[int], ids_1: list[int] | None = None) -> list[int]:
            """transformers 4's ``build_inputs_with_special_tokens`` (e.g. ``[CLS] A [SEP] (B [SEP])``)."""
            if ids_1 is None:
                return single_start + list(ids_0) + single_end
            return pair_start + list(ids_0) + pair_mid + list(ids_1) + pair_end

        tokenizer.build_inputs_with_special_tokens = build_inputs_with_special_tokens
    return tokenizer


def apply_transformers5_shim() -> bool:
    """Make the ``radgraph`` package's vendored allennlp work with transformers 5.

    Wraps ``radgraph.allennlp.common.cached_transformers.get_tokenizer`` so that every tokenizer
    it returns (new or cached) has ``encode_plus`` (= ``tokenizer(text, text_pair, **kwargs)``,
    which is what transformers 4 did for one example) and ``build_inputs_with_special_tokens``
    (the tokenizer's own single/pair special-token template, learned from its output). Only those
    tokenizer instances change; transformers' classes are untouched, and tokenizers that already
    have the methods (transformers 4) are returned as they are.

    Idempotent; returns ``True`` when it installed the wrapper and ``False`` if it was in place.
    Needs the ``radgraph`` package.
    """
    _require_radgraph()
    from radgraph.allennlp.common import cached_transformers

    current = cached_transformers.get_tokenizer
    if getattr(current, _SHIM_MARK, False):
        return False

    @functools.wraps(current)
    def get_tokenizer(model_name: str, **kwargs: Any) -> Any:
        return _restore_v4_methods(current(model_name, **kwargs))

    setattr(get_tokenizer, _SHIM_MARK, True)
    cached_transformers.get_tokenizer = get_tokenizer
    return True


# -- local weights -----------------------------------------------------------------------------

_MODEL_FILES = ("config.json", "vocabulary", "weights.th")


def _is_model_dir(folder: Path) -> bool:
    return all((folder / name).exists() for name in _MODEL_FILES)


def _default_cache_dir() -> Path:
    radgraph = _require_radgraph()
    return Path(radgraph.radgraph.CACHE_DIR)


def _model_dir(model_cache_dir: str | os.PathLike[str] | None, model_type: str) -> Path:
    if model_cache_dir is None:
        model_cache_dir = os.environ.get(CACHE_DIR_ENV) or None
    base = Path(model_cache_dir).expanduser() if model_cache_dir is not None else _default_cache_dir()
    for candidate in (base / model_type, base):
        if _is_model_dir(candidate):
            return candidate
    folder = base / model_type
    absent = [name for name in _MODEL_FILES if not (folder / name).exists()]
    raise FileNotFoundError(
        f"no local RadGraph model {model_type!r}: {str(folder)!r} lacks {', '.join(absent)}. Extract "
        f"{model_type}.tar.gz (StanfordAIMI/RRG_scorers) into that folder, then set {CACHE_DIR_ENV} or pass "
        "model_cache_dir= (shovir never downloads it)"
    )


def _local_encoder(name: str, encoder: str | os.PathLike[str] | None, cache_dir: str | None) -> str:
    if encoder is not None:
        folder = Path(encoder).expanduser()
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"RadGraph encoder folder {str(folder)!r} lacks config.json; set {ENCODER_ENV} or pass encoder= "
                "to a local folder with the base encoder's config.json and tokenizer files"
            )
        return str(folder)
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id=name, local_files_only=True, cache_dir=cache_dir)
    except Exception:
        raise FileNotFoundError(
            f"the RadGraph config names the base encoder {name!r}, which is not available locally; set "
            f"{ENCODER_ENV} or pass encoder= (a folder with its config.json and tokenizer files), or put it in "
            "the Hugging Face cache (shovir never downloads it)"
        ) from None


def _encoder_names(config: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    paths = [
        ("dataset_reader", "token_indexers", "bert", "model_name"),
        ("model", "embedder", "token_embedders", "bert", "model_name"),
    ]
    found = []
    for path in paths:
        node: Any = config
        for key in path:
            if not isinstance(node, Mapping) or key not in node:
                raise ValueError(f"RadGraph config.json lacks {'.'.join(path)}; is this a radgraph model folder?")
            node = node[key]
        found.append((path, node))
    return found


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        target.symlink_to(source, target_is_directory=source.is_dir())
    except OSError:  # pragma: no cover - filesystems without symlinks
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)


# -- scorer ------------------------------------------------------------------------------------


class RadGraphScorer:
    """F1-RadGraph over pairs of reports, with local weights.

    Parameters
    ----------
    model_type:
        ``"radgraph"`` (classic F1-RadGraph, default), ``"radgraph-xl"``, ``"modern-radgraph-xl"``
        or ``"echograph"``.
    reward_level:
        Which reward :meth:`score` reports as ``mean`` / ``rewards``: ``"partial"`` (default),
        ``"simple"`` or ``"complete"``. All three are always returned under ``levels``.
    model_cache_dir:
        Folder holding ``<model_type>/`` (or the model folder itself); default
        ``$SHOVIR_RADGRAPH_CACHE_DIR``, else the radgraph package's cache.
    encoder:
        Local folder with the base encoder's config and tokenizer (default ``$SHOVIR_RADGRAPH_ENCODER``;
        only needed when the model's config names a Hub id that is not in the local HF cache).
    device:
        ``"cpu"``, ``"cuda"``, ``"cuda:N"``; default CUDA when available.
    batch_size:
        Reports per call to the annotator (the package itself runs one report at a time).
    progress:
        Show a tqdm bar over annotation chunks.
    annotator:
        Replace the model: a callable ``list[str] -> list[annotation]`` (for tests or cached
        annotations). When given, no model is loaded and ``radgraph`` is not needed.
    """

    def __init__(
        self,
        model_type: str = "radgraph",
        reward_level: RewardLevel = "partial",
        *,
        model_cache_dir: str | os.PathLike[str] | None = None,
        encoder: str | os.PathLike[str] | None = None,
        tokenizer_cache_dir: str | None = None,
        device: str | None = None,
        batch_size: int = 64,
        progress: bool = False,
        annotator: Callable[[list[str]], Sequence[Annotation]] | None = None,
    ) -> None:
        if reward_level not in REWARD_LEVELS:
            raise ValueError(f"reward_level must be one of {', '.join(REWARD_LEVELS)}, got {reward_level!r}")
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.model_type = model_type
        self.reward_level = reward_level
        self.batch_size = batch_size
        self.progress = progress
        self._model: Any = None
        if annotator is not None:
            self._annotate_chunk: Callable[[list[str]], Sequence[Annotation]] = annotator
            return
        self._model = self._load_model(model_cache_dir, encoder, tokenizer_cache_dir, device)
        self._annotate_chunk = self._annotate_with_model

    def _load_model(
        self,
        model_cache_dir: str | os.PathLike[str] | None,
        encoder: str | os.PathLike[str] | None,
        tokenizer_cache_dir: str | None,
        device: str | None,
    ) -> Any:
        radgraph = _require_radgraph()
        apply_transformers5_shim()
        import torch

        folder = _model_dir(model_cache_dir, self.model_type)
        if encoder is None:
            encoder = os.environ.get(ENCODER_ENV) or None
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        rewrites = {}
        for path, name in _encoder_names(config):
            local = _local_encoder(name, encoder, tokenizer_cache_dir)
            if local != name:
                rewrites[path] = local
        if device is None:
            cuda = 0 if torch.cuda.is_available() else -1
        else:
            target = torch.device(device)
            if target.type not in ("cpu", "cuda"):
                raise ValueError(f"device must be 'cpu' or 'cuda[:N]' for RadGraph, got {device!r}")
            cuda = -1 if target.type == "cpu" else (target.index or 0)
        kwargs = dict(model_type=self.model_type, cuda=cuda, batch_size=1, tokenizer_cache_dir=tokenizer_cache_dir)
        if not rewrites and folder.name == self.model_type:
            return radgraph.RadGraph(model_cache_dir=str(folder.parent), **kwargs)
        with tempfile.TemporaryDirectory(prefix="shovir-radgraph-") as shadow:
            target_dir = Path(shadow) / self.model_type
            target_dir.mkdir()
            for path, local in rewrites.items():
                node = config
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = local
            (target_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
            for name in ("vocabulary", "weights.th"):
                _link_or_copy((folder / name).resolve(), target_dir / name)
            return radgraph.RadGraph(model_cache_dir=shadow, **kwargs)

    def _annotate_with_model(self, reports: list[str]) -> list[Annotation]:
        output = self._model(reports)
        missing = [i for i in range(len(reports)) if str(i) not in output]
        if missing:
            raise RuntimeError(
                f"RadGraph produced no annotation for {len(missing)} report(s), first: {reports[missing[0]]!r}"
            )
        return [output[str(i)] for i in range(len(reports))]

    def annotate(self, reports: Sequence[str], *, progress: bool | None = None) -> list[Annotation]:
        """Annotate reports (each distinct text once), in input order."""
        reports = _check_reports("reports", reports)
        unique = list(dict.fromkeys(reports))
        chunks: Iterable[int] = range(0, len(unique), self.batch_size)
        if self.progress if progress is None else progress:
            from tqdm.auto import tqdm

            chunks = tqdm(chunks, desc="RadGraph", unit="chunk")
        annotations: dict[str, Annotation] = {}
        for start in chunks:
            chunk = unique[start : start + self.batch_size]
            result = list(self._annotate_chunk(chunk))
            if len(result) != len(chunk):
                raise RuntimeError(f"annotator returned {len(result)} annotations for {len(chunk)} reports")
            annotations.update(zip(chunk, result))
        return [annotations[report] for report in reports]

    def score(self, hyps: Sequence[str], refs: Sequence[str], *, progress: bool | None = None) -> dict[str, Any]:
        """F1-RadGraph of each (hypothesis, reference) pair and their mean.

        Returns ``{"reward_level", "mean", "rewards", "levels": {level: {"mean", "rewards"}},
        "n_pairs", "n_empty"}``; ``n_empty`` counts pairs scored 0 because a report was empty.
        """
        hyps = _check_reports("hyps", hyps)
        refs = _check_reports("refs", refs)
        if len(hyps) != len(refs):
            raise ValueError(f"hyps and refs must have the same length, got {len(hyps)} and {len(refs)}")
        if not hyps:
            raise ValueError("hyps and refs are empty; F1-RadGraph needs at least one pair")
        empty = [not h.strip() or not r.strip() for h, r in zip(hyps, refs)]
        texts = [text for pair, is_empty in zip(zip(hyps, refs), empty) if not is_empty for text in pair]
        annotations = iter(self.annotate(texts, progress=progress))
        per_level: dict[str, list[float]] = {level: [] for level in REWARD_LEVELS}
        for is_empty in empty:
            rewards = (
                {level: 0.0 for level in REWARD_LEVELS}
                if is_empty
                else radgraph_rewards(next(annotations), next(annotations))
            )
            for level in REWARD_LEVELS:
                per_level[level].append(float(rewards[level]))
        levels = {level: {"mean": float(np.mean(values)), "rewards": values} for level, values in per_level.items()}
        return {
            "reward_level": self.reward_level,
            "mean": levels[self.reward_level]["mean"],
            "rewards": levels[self.reward_level]["rewards"],
            "levels": levels,
            "n_pairs": len(hyps),
            "n_empty": int(sum(empty)),
        }

    __call__ = score


def f1_radgraph(hyps: Sequence[str], refs: Sequence[str], **kwargs: Any) -> dict[str, Any]:
    """One-shot F1-RadGraph: ``RadGraphScorer(**kwargs).score(hyps, refs)``.

    >>> fake = lambda reports: [{"entities": {"1": {"tokens": r.split()[0], "label": "OBS-DP", "relations": []}}}
    ...                         for r in reports]
    >>> result = f1_radgraph(["edema", "effusion", ""], ["edema", "edema", "edema"], annotator=fake)
    >>> result["rewards"], round(result["mean"], 4), result["n_empty"]
    ([1.0, 0.0, 0.0], 0.3333, 1)
    """
    return RadGraphScorer(**kwargs).score(hyps, refs)


def _check_reports(field: str, reports: Sequence[str]) -> list[str]:
    if isinstance(reports, str):
        raise ValueError(f"{field}: expected a sequence of strings, got a single string; wrap it in a list")
    out = list(reports)
    for index, report in enumerate(out):
        if not isinstance(report, str):
            raise ValueError(f"{field}[{index}]: expected a string, got {type(report).__name__} ({report!r})")
    return out


def radgraph_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    **scorer_options: Any,
) -> dict[str, Any]:
    """F1-RadGraph of generated vs reference reports for a results file: the mean partial reward
    (ShoViR Table 1) with a percentile bootstrap interval (resampling ``clusters`` when given).

    Without the ``radgraph`` package or local weights this raises
    :class:`shovir.metrics.MetricUnavailable` saying what to install or set, which the scorer
    records in place of the number.

    >>> fake = lambda reports: [{"entities": {"1": {"tokens": r.split()[0], "label": "OBS-DP", "relations": []}}}
    ...                         for r in reports]
    >>> radgraph_scores(["edema here", "effusion"], ["edema", "edema"], annotator=fake)["f1_radgraph"]
    0.5
    """
    from shovir.metrics import MetricUnavailable
    from shovir.metrics.bootstrap import bootstrap_interval

    if "annotator" not in scorer_options:
        try:
            _model_dir(scorer_options.get("model_cache_dir"), scorer_options.get("model_type", "radgraph"))
            scorer = RadGraphScorer(**scorer_options)
        except (ImportError, FileNotFoundError, OSError) as error:
            raise MetricUnavailable(f"F1-RadGraph needs the radgraph package and local weights: {error}") from None
    else:
        scorer = RadGraphScorer(**scorer_options)
    scored = scorer.score(predictions, references)
    rewards = np.asarray(scored["rewards"], dtype=np.float64)
    units = np.column_stack([rewards, np.ones_like(rewards)])
    interval = bootstrap_interval(lambda sums: sums[:, 0] / sums[:, 1], units, clusters, n_resamples, seed=seed)
    return {"f1_radgraph": float(rewards.mean()), "ci": {"f1_radgraph": interval.bounds()}, "n": int(rewards.size),
            "reward_level": scored["reward_level"], "n_empty": scored["n_empty"]}

"""Text-overlap metrics of ShoViR Table 1: BLEU-1, BLEU-4 and ROUGE-L, on one 0–1 scale.

BLEU is sacrebleu's corpus BLEU (13a tokenisation, ``exp`` smoothing, the library defaults);
BLEU-1 is the same with ``max_ngram_order=1``. ROUGE-L is the mean per-report F-measure of
``rouge_score`` without stemming. The ShoViR authors reported BLEU on 0–100 with a bootstrap
and on 0–1 without (reference code §9, defect 12); here every score is on 0–1.

The corpus BLEU interval resamples the per-report sufficient statistics (lengths, n-gram matches
and totals) and recomputes BLEU from the resampled sums in one vectorised pass, which gives the
same BLEU as sacrebleu on every resample without re-tokenising.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from shovir.metrics import _checks
from shovir.metrics.bootstrap import bootstrap_interval

__all__ = ["nlg_scores", "bleu_from_statistics"]


def _require(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"text metrics need {module.split('.')[0]}: pip install 'shovir[scorers]'") from error


def bleu_from_statistics(statistics: np.ndarray, max_order: int) -> np.ndarray:
    """Corpus BLEU (0–1) from summed sacrebleu statistics, one row per corpus (resample).

    Columns: ``sys_len, ref_len, correct_1..N, total_1..N`` (sacrebleu's layout). Implements
    ``sacrebleu.BLEU.compute_bleu`` with ``smooth_method="exp"``, vectorised over rows.

    >>> bleu_from_statistics(np.array([[6, 6, 5, 3, 1, 0, 6, 5, 4, 3]], float), 4).round(6).tolist()
    [0.379918]
    """
    stats = np.atleast_2d(np.asarray(statistics, dtype=np.float64))
    sys_len, ref_len = stats[:, 0], stats[:, 1]
    correct, total = stats[:, 2 : 2 + max_order], stats[:, 2 + max_order : 2 + 2 * max_order]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        brevity = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.where(sys_len > 0, sys_len, 1)), 0.0), 1.0)
        alive = np.ones(stats.shape[0], dtype=bool)
        smooth = np.ones(stats.shape[0])
        log_sum = np.zeros(stats.shape[0])
        for n in range(max_order):
            alive &= total[:, n] > 0
            zero = correct[:, n] == 0
            smooth = np.where(alive & zero, smooth * 2, smooth)
            precision = np.where(zero, 1.0 / (smooth * np.where(total[:, n] > 0, total[:, n], 1)),
                                 correct[:, n] / np.where(total[:, n] > 0, total[:, n], 1))
            log_sum += np.where(alive, np.log(precision), -np.inf)
        score = brevity * np.exp(log_sum / max_order)
    return np.where(correct.sum(1) > 0, score, 0.0)


def _bleu_statistics(predictions: Sequence[str], references: Sequence[str], max_order: int) -> np.ndarray:
    metrics = _require("sacrebleu.metrics")
    bleu = metrics.BLEU(max_ngram_order=max_order)
    return np.asarray(bleu._extract_corpus_statistics(list(predictions), [list(references)]), dtype=np.float64)


def nlg_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """BLEU-1, BLEU-4 (corpus) and ROUGE-L (mean F) of generated versus reference reports, 0–1.

    >>> out = nlg_scores(["the heart is enlarged"], ["the heart is enlarged"])
    >>> out["bleu_1"], out["bleu_4"], out["rouge_l"]
    (1.0, 1.0, 1.0)
    """
    _checks.nonempty("predictions", predictions)
    _checks.same_length(predictions=predictions, references=references, clusters=clusters)
    for field, texts in (("predictions", predictions), ("references", references)):
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"{field}[{index}]: expected a report string, got {type(text).__name__}")
    rouge_module = _require("rouge_score.rouge_scorer")
    scorer = rouge_module.RougeScorer(["rougeL"], use_stemmer=False)
    rouge = np.array([scorer.score(ref, hyp)["rougeL"].fmeasure for hyp, ref in zip(predictions, references)])
    result: dict[str, Any] = {"n": len(predictions), "ci": {}}
    for name, order in (("bleu_1", 1), ("bleu_4", 4)):
        statistics = _bleu_statistics(predictions, references, order)
        result[name] = float(bleu_from_statistics(statistics.sum(0, keepdims=True), order)[0])
        interval = None
        if n_resamples > 0:
            interval = bootstrap_interval(lambda s, o=order: bleu_from_statistics(s, o), statistics, clusters, n_resamples, seed=seed)
        result["ci"][name] = {"low": None if interval is None else interval.low, "high": None if interval is None else interval.high}
    result["rouge_l"] = float(rouge.mean())
    interval = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], np.stack([rouge, np.ones_like(rouge)], 1), clusters, n_resamples, seed=seed) if n_resamples > 0 else None
    result["ci"]["rouge_l"] = {"low": None if interval is None else interval.low, "high": None if interval is None else interval.high}
    return {key: result[key] for key in ("bleu_1", "bleu_4", "rouge_l", "n", "ci")}

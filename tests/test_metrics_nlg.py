"""shovir.metrics.nlg and the nlg evaluate module: BLEU as each published implementation computes
it, ROUGE-L as rouge-score does, the vectorised counter against per-report references, streaming,
and every bad input named.

References: sacrebleu (installed: corpus statistics, ``corpus_score``), pycocoevalcap (installed
from PyPI when available: ``Bleu(4).compute_score`` exactly as RadEval calls it), nltk
(``corpus_bleu`` without smoothing), rouge-score, and hand-computed cases. evaluate's ``bleu`` is a
Hub module whose code is not in the evaluate package and cannot be loaded offline; its algorithm
(tensorflow/nmt ``compute_bleu`` on evaluate's ``tokenizer_13a``, the sacrebleu 13a regexes
without ``rstrip``) is written out below as the oracle, and checked against nltk and sacrebleu's
``smooth_method="none"``, which compute the same number on the same tokens.
"""

from __future__ import annotations

import collections
import math
import random

import numpy as np
import pytest

from shovir.metrics import nlg
from shovir.metrics.nlg import bleu_from_statistics, bleu_score, corpus_statistics, nlg_scores

sacrebleu = pytest.importorskip("sacrebleu")
rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a  # noqa: E402

_13A = Tokenizer13a()

SENTENCES = [
    "The heart size is normal.", "There is a small left pleural effusion.", "No pneumothorax is seen.",
    "Right lower lobe opacity may represent atelectasis or pneumonia.", "Endotracheal tube terminates 4.5 cm above the carina.",
    "No acute cardiopulmonary process.", "Mild pulmonary vascular congestion, unchanged.", "Bibasilar atelectasis, left > right.",
    "Lines & tubes are unchanged in position.", "The lungs are clear.", "Cardiomegaly is stable; no edema.",
    "Degenerative changes of the thoracic spine.", "Right-sided PICC line ends in the mid SVC.",
]


def _corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    hyps, refs = [], []
    for _ in range(n):
        ref = rng.sample(SENTENCES, rng.randint(1, 8))
        hyp = [s for s in ref if rng.random() < 0.6] + rng.sample(SENTENCES, rng.randint(0, 3))
        if rng.random() < 0.2:
            hyp = [s.lower() for s in hyp]
        refs.append(" ".join(ref))
        hyps.append(" ".join(hyp))
    return hyps, refs


def _nasty(n: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """Short strings over punctuation, 13a markup, non-ASCII letters and odd whitespace: every
    route around the fast path (``<skipped>``, ``&`` entities, ``-\\n``, \\x1c, NBSP, İ, K, é)."""
    rng = random.Random(seed)
    alphabet = list("ab .,-1&;\n\t\r") + ["<skipped>", "&amp;", "&quot;", "é", "İ", "\x1c", "\u00a0", "K", "-\n", "1.5", "a-"]
    make = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))  # noqa: E731
    return [make() for _ in range(n)], [make() for _ in range(n)]


def _long_cases() -> tuple[list[str], list[str]]:
    """Reports longer than 64 and 128 tokens (multi-word bit masks), repeats, empties."""
    rng = random.Random(3)
    words = ["a", "b", "c", "d", "effusion", "the", "."]
    hyps = ["", "a", "", "a " * 70, "x y " * 40 + "z", " ".join(str(i) for i in range(150)), "a b c a b c a b"]
    refs = ["", "", "a", "a " * 65, "x y " * 45, " ".join(str(i) for i in range(149, -1, -1)), "a b c a b"]
    for length_h, length_r in ((70, 130), (140, 200), (300, 64), (65, 65), (129, 1)):
        hyps.append(" ".join(rng.choice(words) for _ in range(length_h)))
        refs.append(" ".join(rng.choice(words) for _ in range(length_r)))
    return hyps, refs


def _all_cases() -> tuple[list[str], list[str]]:
    parts = [_corpus(300), _nasty(300), _long_cases()]
    return [h for p in parts for h in p[0]], [r for p in parts for r in p[1]]


# -- independent oracles ------------------------------------------------------------------------


def _ngrams(tokens: list[str], max_order: int = 4) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for order in range(1, max_order + 1):
        for i in range(len(tokens) - order + 1):
            counts[tuple(tokens[i : i + order])] += 1
    return counts


def _oracle_statistics(hyps, refs, tokenize) -> np.ndarray:
    rows = []
    for hyp, ref in zip(hyps, refs):
        h, r = tokenize(hyp), tokenize(ref)
        correct = [0] * 4
        for gram, count in (_ngrams(h) & _ngrams(r)).items():
            correct[len(gram) - 1] += count
        rows.append([len(h), len(r), *correct, *[max(0, len(h) - k) for k in range(4)]])
    return np.array(rows, dtype=float)


def _nmt_bleu(hyps, refs, max_order):
    """tensorflow/nmt compute_bleu (evaluate's bleu) with evaluate's default tokenizer_13a."""
    matches, possible = [0] * max_order, [0] * max_order
    ref_len = hyp_len = 0
    for hyp, ref in zip(hyps, refs):
        h, r = _13A(hyp).split(), _13A(ref).split()
        ref_len += len(r)
        hyp_len += len(h)
        overlap = _ngrams(h, max_order) & _ngrams(r, max_order)
        for gram in overlap:
            matches[len(gram) - 1] += overlap[gram]
        for order in range(1, max_order + 1):
            if len(h) - order + 1 > 0:
                possible[order - 1] += len(h) - order + 1
    precisions = [matches[i] / possible[i] if possible[i] > 0 else 0.0 for i in range(max_order)]
    geo = math.exp(sum((1.0 / max_order) * math.log(p) for p in precisions)) if min(precisions) > 0 else 0
    if ref_len == 0 or hyp_len == 0:
        return 0.0
    ratio = hyp_len / ref_len
    return geo * (1.0 if ratio > 1.0 else math.exp(1 - 1.0 / ratio))


# -- the counter --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "implementation, tokenize",
    [("sacrebleu", lambda s: _13A(s.rstrip()).split()), ("hf", lambda s: _13A(s).split()), ("pycocoevalcap", str.split)],
)
def test_statistics_equal_a_per_report_counter(implementation, tokenize):
    hyps, refs = _all_cases()
    stats, _ = corpus_statistics(hyps, refs, implementation)
    np.testing.assert_array_equal(stats, _oracle_statistics(hyps, refs, tokenize))


def test_statistics_equal_sacrebleu_extraction():
    hyps, refs = _all_cases()
    stats, _ = corpus_statistics(hyps, refs, "sacrebleu")
    expected = np.array(sacrebleu.metrics.BLEU()._extract_corpus_statistics(hyps, [refs]), dtype=float)
    np.testing.assert_array_equal(stats, expected)


def test_rouge_l_equals_rouge_score_on_every_report():
    hyps, refs = _all_cases()
    _, rouge = corpus_statistics(hyps, refs)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    expected = np.array([scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs)])
    np.testing.assert_array_equal(rouge, expected)


def test_rouge_l_by_hand():
    # rouge tokens: hyp (the heart is enlarged), ref (the heart size is enlarged); LCS 4
    _, rouge = corpus_statistics(["the heart is enlarged ."], ["The heart size is enlarged."])
    precision, recall = 4 / 4, 4 / 5
    assert rouge[0] == 2 * precision * recall / (precision + recall)
    # a 200-token reference against its reverse: LCS 1 per distinct token... computed by DP
    ref = [f"w{i % 37}" for i in range(200)]
    hyp = ref[::-1][:150]
    table = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(1, len(ref) + 1):
        for j in range(1, len(hyp) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if ref[i - 1] == hyp[j - 1] else max(table[i - 1][j], table[i][j - 1])
    lcs = table[-1][-1]
    _, rouge = corpus_statistics([" ".join(hyp)], [" ".join(ref)])
    p, r = lcs / len(hyp), lcs / len(ref)
    assert rouge[0] == 2 * p * r / (p + r)


def test_chunks_and_threads_do_not_change_the_numbers(monkeypatch):
    hyps, refs = _all_cases()
    whole = corpus_statistics(hyps, refs)
    monkeypatch.setattr(nlg, "_CHUNK_ROWS", 37)
    monkeypatch.setattr(nlg, "_MASK_BYTES", 1 << 14)
    for threads in ("1", "3"):
        monkeypatch.setenv("SHOVIR_NLG_THREADS", threads)
        chunked = corpus_statistics(hyps, refs)
        np.testing.assert_array_equal(chunked[0], whole[0])
        np.testing.assert_array_equal(chunked[1], whole[1])


def test_arrow_input_and_text_arrow_cannot_hold():
    pa = pytest.importorskip("pyarrow")
    hyps, refs = _corpus(50)
    out = nlg_scores(hyps, refs)
    assert nlg_scores(pa.array(hyps), pa.chunked_array([pa.array(refs[:20]), pa.array(refs[20:])])) == out
    # a lone surrogate is a valid Python str but not UTF-8: the reference tokenisers take it
    odd = nlg_scores(["a b \ud800 c"], ["a b c"])
    assert odd["bleu_1"] == pytest.approx(sacrebleu.metrics.BLEU(max_ngram_order=1).corpus_score(["a b \ud800 c"], [["a b c"]]).score / 100)


# -- BLEU against each implementation -------------------------------------------------------------


def test_sacrebleu_equals_sacrebleu_corpus_score():
    hyps, refs = _all_cases()
    out = nlg_scores(hyps, refs)
    assert out["bleu_4"] == pytest.approx(sacrebleu.metrics.BLEU().corpus_score(hyps, [refs]).score / 100, rel=1e-13)
    assert out["bleu_1"] == pytest.approx(sacrebleu.metrics.BLEU(max_ngram_order=1).corpus_score(hyps, [refs]).score / 100, rel=1e-13)
    assert out["bleu_signature"].startswith("bleu:sacrebleu|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert out["bleu_signature"].endswith(f"version:{sacrebleu.__version__}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hf_equals_the_nmt_algorithm_exactly(seed):
    hyps, refs = _corpus(200, seed)
    nasty_h, nasty_r = _nasty(50, seed)
    hyps, refs = hyps + nasty_h, refs + nasty_r
    out = nlg_scores(hyps, refs, bleu_implementation="hf")
    assert out["bleu_4"] == _nmt_bleu(hyps, refs, 4)
    assert out["bleu_1"] == _nmt_bleu(hyps, refs, 1)
    assert out["bleu_signature"] == nlg.bleu_signature("hf")


def test_hf_equals_nltk_and_sacrebleu_without_smoothing():
    bleu_score_module = pytest.importorskip("nltk.translate.bleu_score")
    tokens = lambda s: _13A(s).split()  # noqa: E731
    # nltk counts max(1, n-grams) per hypothesis in the denominator: keep hypotheses of >= 4 tokens
    pairs = [(h, r) for h, r in zip(*_corpus(300, 5)) if len(tokens(h)) >= 4]
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    out = nlg_scores(hyps, refs, bleu_implementation="hf")
    for order, weights in ((4, (0.25,) * 4), (1, (1.0,))):
        expected = bleu_score_module.corpus_bleu([[tokens(r)] for r in refs], [tokens(h) for h in hyps], weights=weights)
        assert out[f"bleu_{order}"] == pytest.approx(expected, rel=1e-12)
        plain = sacrebleu.metrics.BLEU(smooth_method="none", max_ngram_order=order).corpus_score(hyps, [refs]).score / 100
        assert out[f"bleu_{order}"] == pytest.approx(plain, rel=1e-12)


def _radeval_bleu(hyps, refs, n):
    """RadEval's Bleu(n): pycocoevalcap's BleuScorer over {i: [ref]} / {i: [hyp]}, option 'closest'."""
    scorer = pytest.importorskip("pycocoevalcap.bleu.bleu").Bleu(4)
    score, _ = scorer.compute_score({i: [r] for i, r in enumerate(refs)}, {i: [h] for i, h in enumerate(hyps)}, verbose=0)
    return score[n - 1]


def test_pycocoevalcap_equals_the_installed_package_exactly():
    pytest.importorskip("pycocoevalcap.bleu.bleu")
    for hyps, refs in (_corpus(300, 7), _long_cases(), (["a b c d"], ["a b c e"]), (["x"], ["y z"])):
        out = nlg_scores(hyps, refs, bleu_implementation="pycocoevalcap")
        assert out["bleu_4"] == _radeval_bleu(hyps, refs, 4)
        assert out["bleu_1"] == _radeval_bleu(hyps, refs, 1)


def test_where_the_three_implementations_differ():
    hyps, refs = _corpus(300, 11)
    values = {impl: nlg_scores(hyps, refs, bleu_implementation=impl)["bleu_4"] for impl in nlg.BLEU_IMPLEMENTATIONS}
    # same 13a tokens and every order matched somewhere: sacrebleu and evaluate's bleu coincide
    assert values["sacrebleu"] == pytest.approx(values["hf"], rel=1e-12)
    # whitespace tokens keep "effusion." as one token: fewer matches than 13a
    assert values["pycocoevalcap"] < values["hf"]
    # an order without matches: exp smoothing keeps a score, evaluate's bleu is 0, pycocoevalcap ~1e-4
    small = {impl: nlg_scores(["a b c d"], ["a b c e"], bleu_implementation=impl)["bleu_4"] for impl in nlg.BLEU_IMPLEMENTATIONS}
    assert small["hf"] == 0.0 and small["sacrebleu"] > 0.4 and 0 < small["pycocoevalcap"] < 1e-3


# -- hand-computed cases ------------------------------------------------------------------------


def test_brevity_penalty_by_hand():
    # 5 hypothesis tokens, 6 reference tokens, every unigram matches: BLEU-1 = exp(1 - 6/5)
    hyps, refs = ["the heart is enlarged ."], ["the heart size is enlarged ."]
    for implementation in ("sacrebleu", "hf"):
        assert nlg_scores(hyps, refs, bleu_implementation=implementation)["bleu_1"] == pytest.approx(math.exp(1 - 6 / 5), rel=1e-15)
    # pycocoevalcap: ratio = (5 + 1e-15) / (6 + 1e-9), BP = exp(1 - 1 / ratio)
    ratio = (5 + 1e-15) / (6 + 1e-9)
    expected = (5 + 1e-15) / (5 + 1e-9) * math.exp(1 - 1 / ratio)
    assert nlg_scores(hyps, refs, bleu_implementation="pycocoevalcap")["bleu_1"] == expected


def test_clipped_counts_by_hand():
    stats, _ = corpus_statistics(["the the the the"], ["the the cat"])
    assert stats[0].tolist() == [4, 3, 2, 1, 0, 0, 4, 3, 2, 1]  # "the" clipped at 2, "the the" at 1
    assert nlg_scores(["the the the the"], ["the the cat"], bleu_implementation="hf")["bleu_1"] == 2 / 4
    assert bleu_score([4, 3, 2, 1, 0, 0, 4, 3, 2, 1], 2, "hf") == math.exp(0.5 * math.log(2 / 4) + 0.5 * math.log(1 / 3))


def test_zero_matches_by_hand():
    hyps, refs = ["a b"], ["c d"]
    assert nlg_scores(hyps, refs)["bleu_4"] == 0.0
    assert nlg_scores(hyps, refs, bleu_implementation="hf")["bleu_4"] == 0.0
    coco = nlg_scores(hyps, refs, bleu_implementation="pycocoevalcap")
    # equal lengths still get pycocoevalcap's BP: ratio = (2 + 1e-15) / (2 + 1e-9) < 1
    brevity = math.exp(1 - 1 / ((2 + 1e-15) / (2 + 1e-9)))
    assert coco["bleu_1"] == (0 + 1e-15) / (2 + 1e-9) * brevity
    product = (1e-15 / (2 + 1e-9)) * (1e-15 / (1 + 1e-9)) * (1e-15 / 1e-9) * (1e-15 / 1e-9)
    assert coco["bleu_4"] == product ** 0.25 * brevity
    # no 4-gram at all (3-token hypothesis): sacrebleu stops at the empty order, evaluate's is 0
    assert nlg_scores(["a b c"], ["a b c"], bleu_implementation="hf")["bleu_4"] == 0.0
    assert nlg_scores(["a b c"], ["a b c"])["bleu_4"] == 0.0


def test_sacrebleu_exp_smoothing_by_hand():
    # correct (5, 3, 1, 0) of totals (6, 5, 4, 3): exp smoothing turns p_4 into 1 / (2 * 3)
    expected = math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(1 / 4) + math.log(1 / 6)) / 4)
    row = np.array([[6, 6, 5, 3, 1, 0, 6, 5, 4, 3]], float)
    assert bleu_from_statistics(row, 4)[0] == pytest.approx(expected, rel=1e-15)
    assert bleu_score(row[0], 4) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("implementation", nlg.BLEU_IMPLEMENTATIONS)
def test_vectorised_bleu_equals_the_scalar_formula_on_resampled_corpora(implementation):
    hyps, refs = _corpus(60, 13)
    stats, _ = corpus_statistics(hyps, refs, implementation)
    rng = np.random.default_rng(0)
    sums = np.array([stats[rng.integers(0, len(stats), len(stats))].sum(0) for _ in range(50)])
    sums[0] = stats[:1].sum(0)
    for order in (1, 4):
        vectorised = bleu_from_statistics(sums, order, implementation)
        scalar = [bleu_score(row, order, implementation) for row in sums]
        np.testing.assert_allclose(vectorised, scalar, rtol=1e-12, atol=1e-300)


def test_bootstrap_intervals_and_stable_keys():
    hyps, refs = _corpus(80, 17)
    out = nlg_scores(hyps, refs, n_resamples=300, clusters=[i // 4 for i in range(80)], seed=3)
    assert list(out) == ["bleu_1", "bleu_4", "rouge_l", "n", "ci", "bleu_signature", "rouge_signature"]
    for key in ("bleu_1", "bleu_4", "rouge_l"):
        assert out["ci"][key]["low"] <= out[key] <= out["ci"][key]["high"]
    bare = nlg_scores(hyps, refs)
    assert list(bare) == list(out) and bare["ci"]["bleu_4"] == {"low": None, "high": None}
    assert out["rouge_signature"].startswith("rouge:rouge-score|type:rougeL|stem:no")


# -- bad inputs -----------------------------------------------------------------------------------

BAD = [
    (dict(predictions=["no acute findings", 7], references=["no acute findings", "7"]), r"predictions\[1\]: expected a report string, got int 7"),
    (dict(predictions=["a", float("nan")], references=["a", "b"]), r"predictions\[1\]: expected a report string, got NaN"),
    (dict(predictions=["a", None], references=["a", "b"]), r"predictions\[1\]: expected a report string, got None"),
    (dict(predictions=["a"], references=[b"a"]), r"references\[0\]: expected a report string, got bytes"),
    (dict(predictions=[["no", "effusion"]], references=["no effusion"]), r"predictions\[0\]: .*got list.*join token lists"),
    (dict(predictions="no effusion", references=["no effusion"]), r"predictions: expected a list of report strings.*single str"),
    (dict(predictions=["a", "b"], references=["a"]), r"references: expected 2 reports, one per prediction, got 1"),
    (dict(predictions=[], references=[]), r"predictions: empty"),
    (dict(predictions=["a"], references=["a"], n_resamples=1.5), r"n_resamples: expected an integer >= 0, got float 1.5"),
    (dict(predictions=["a"], references=["a"], n_resamples=-1), r"n_resamples: expected an integer >= 0, got -1"),
    (dict(predictions=["a"], references=["a"], n_resamples=True), r"n_resamples: expected an integer"),
    (dict(predictions=["a"], references=["a"], seed="3"), r"seed: expected an integer >= 0, got str '3'"),
    (dict(predictions=["a"], references=["a"], bleu_implementation="nltk"), r"bleu_implementation: expected one of 'sacrebleu', 'hf', 'pycocoevalcap'"),
    (dict(predictions=["a"], references=["a"], confidence=95), r"confidence: expected a number in \(0, 1\)"),
    (dict(predictions=["a", "b"], references=["a", "b"], clusters=["p1"]), r"clusters"),
    (dict(predictions=["a", "b"], references=["a", "b"], clusters=["p1", None]), r"clusters: id at row 1"),
    (dict(predictions=["a", "b"], references=["a", "b"], clusters=["p1", float("nan")]), r"clusters: id at row 1 .*NaN"),
    (dict(predictions=["a", "b"], references=["a", "b"], clusters="p1"), r"clusters"),
]


@pytest.mark.parametrize("kwargs, message", BAD)
def test_function_names_every_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        nlg_scores(**kwargs)


evaluate = pytest.importorskip("evaluate")


def _module():
    from shovir.evaluate_modules import modules_root

    return evaluate.load(str(modules_root() / "nlg"))


@pytest.mark.parametrize("kwargs, message", BAD)
def test_module_names_every_bad_input_before_arrow(kwargs, message):
    module = _module()
    with pytest.raises(ValueError, match=message):
        module.compute(**kwargs)
    # nothing was stored: the module scores the next call alone
    assert module.compute(predictions=["no effusion"], references=["no effusion"])["rouge_l"] == 1.0


def test_module_add_and_add_batch_refuse_non_text():
    module = _module()
    with pytest.raises(ValueError, match=r"prediction \(row 0\): expected a report string, got int 7"):
        module.add(prediction=7, reference="7")
    module.add_batch(predictions=["a b"], references=["a b"])
    with pytest.raises(ValueError, match=r"references\[2\]: expected a report string, got NaN"):
        module.add_batch(predictions=["x", "y"], references=["x", float("nan")])
    with pytest.raises(ValueError, match=r"bleu_implementation"):
        module.compute(bleu_implementation="moses")


# -- streaming ------------------------------------------------------------------------------------


def test_add_add_batch_and_combine_equal_one_compute():
    hyps, refs = _corpus(40, 19)
    clusters = [f"p{i // 3}" for i in range(40)]
    settings = dict(n_resamples=200, seed=5, bleu_implementation="hf")
    once = _module().compute(predictions=hyps, references=refs, clusters=clusters, **settings)
    assert once == nlg_scores(hyps, refs, clusters=clusters, **settings)

    one_by_one = _module()
    for h, r, c in zip(hyps, refs, clusters):
        one_by_one.add(prediction=h, reference=r, cluster=c)
    assert one_by_one.compute(**settings) == once

    batches = _module()
    for start in range(0, 40, 7):
        batches.add_batch(predictions=hyps[start : start + 7], references=refs[start : start + 7], clusters=clusters[start : start + 7])
    assert batches.compute(**settings) == once

    mixed = _module()
    mixed.add_batch(predictions=hyps[:25], references=refs[:25], clusters=clusters[:25])
    assert mixed.compute(predictions=hyps[25:], references=refs[25:], clusters=clusters[25:], **settings) == once

    combined = evaluate.combine([_module()])
    for start in range(0, 40, 9):
        combined.add_batch(predictions=hyps[start : start + 9], references=refs[start : start + 9], clusters=clusters[start : start + 9])
    assert combined.compute(**settings) == {key: value for key, value in once.items()}

    two = evaluate.combine([_module(), _module()], force_prefix=True)
    two.add_batch(predictions=hyps, references=refs, clusters=None)
    plain = nlg_scores(hyps, refs, **settings)
    merged = two.compute(**settings)
    assert merged["nlg_0_bleu_4"] == merged["nlg_1_bleu_4"] == plain["bleu_4"]


def test_clusters_given_in_some_batches_only_are_refused():
    module = _module()
    module.add_batch(predictions=["a"], references=["a"], clusters=["p1"])
    module.add_batch(predictions=["b"], references=["b"])
    with pytest.raises(ValueError, match=r"clusters: row 1 has no value but other rows do"):
        module.compute(n_resamples=10)

"""Beyond Accuracy (Zafar et al. 2026): visual reliance under real / shuffled / blank images,
and hallucinated visual reasoning.

Conditions (§3.3): *real* (the question with its own image), *shuffled* (another image of the
same benchmark, never the sample's own) and *blank* (uniform gray). Each sample is answered under
every condition (paired design), so all metrics are means of per-sample indicators
(Algorithm 1), and one bootstrap resample of samples moves every metric together.

Per sample ``i`` with reference ``y_i`` and answers ``a_i^c`` (compared by
:mod:`shovir.metrics.answers`):

=====================  ================================================  ======================
key                    definition                                        paper
=====================  ================================================  ======================
``accuracy_<c>``       mean of ``1[a^c = y]``                            §3.4 ``Acc_c``
``vrs``                ``Acc_real - Acc_shuffle``                        §3.4, Alg. 1 ``VRS_i``
``blank_drop``         ``Acc_real - Acc_blank``                          §3.4, Alg. 1 ``BD_i``
``image_sensitivity``  ``P[a_real != a_shuffle]``                        §3.4, Alg. 1 ``IS_i``
``vbr``                ``P[correct_real = 1 and correct_shuffle = 0]``   §3.4
``vhr``                ``P[correct_real = 0 and correct_shuffle = 1]``   §3.4
``nvcr``               ``P[NVC = 1]``                                    §3.5
``hvrr``               ``P[NVC = 1 and a_real = a_shuffle]``             §3.5 Eq. (1)
``p_invariant_…``      ``P[a_real = a_shuffle | NVC = 1]``, pooled        §3.5, Table 4
``…_mean_over_…``      mean over benchmarks of the per-benchmark          Table 4 ("averaged
                       ``P[a_real = a_shuffle | NVC = 1]``                across benchmarks")
=====================  ================================================  ======================

``vrs = vbr - vhr`` holds exactly (both count the same discordant pairs).

Choices where the paper is silent or ambiguous:

* **HVRR.** Eq. (1) defines the joint probability ``P[NVC=1 ∧ a_real=a_shuffle]``; Algorithm 1
  aggregates ``Σ HVRR_i / Σ NVC_i``, the conditional. Tables 4-5 follow Eq. (1) (e.g. PathVQA
  baseline: NVCR 80 %, HVRR 51 %, Cond. 63.8 % = 51/80), so ``hvrr`` is the joint and the
  conditional is ``p_invariant_given_claim``.
* **Confidence intervals** (§3.6: bootstrap, 1,000 resamples, 95 %): percentile intervals
  (:func:`shovir.metrics.bootstrap.bootstrap_interval`) over samples -- or over ``clusters``
  (e.g. image or patient ids) when given -- with all metrics computed on the same resamples.
* **Permutation test** (§3.6, H0: VRS = 0 and BD = 0): the paired sign-flip test of the
  per-sample differences ``VRS_i`` / ``BD_i`` (swapping a sample's two conditions flips the
  sign of its difference), two-sided, ``(1 + k) / (1 + B)`` with ``B = n_permutations``
  (the paper does not give ``B``; default 10,000). ``n_permutations=0`` runs no test: the
  p-values are ``None`` (zero permutations would otherwise read as p = 1).
* **Table 4's conditional probability.** Table 4 averages the per-benchmark values of Table 5
  (Baseline: (63.8 + 40.0 + 52.2 + 62.1) / 4 = 54.5 %, whereas pooled HVRR / NVCR = 38 / 68 =
  55.9 %). :func:`hallucination_metrics` reports both: ``p_invariant_given_claim`` (pooled over
  every sample) and ``p_invariant_given_claim_mean_over_benchmarks`` (the unweighted mean over
  the ``benchmarks`` given of each benchmark's conditional; a benchmark without any claim has
  no conditional and is left out of the mean). Without ``benchmarks`` the input is one
  benchmark and the two are equal.
* **Image sensitivity** compares canonical answers (case, punctuation, yes/no variants and
  option letters folded), not raw strings, so "Yes." and "yes" are not a change.
* **Visual-claim detector** (§3.5): see :func:`detect_visual_claims`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Sequence

import numpy as np

from shovir.metrics import _checks
from shovir.metrics.answers import (
    NO_WORDS, YES_WORDS, _agreements, _canonical_references, _matches, agree_many, check_answers, per_item_options,
)
from shovir.metrics.bootstrap import NO_INTERVAL, Statistic, bootstrap_intervals, paired_permutation_pvalue

__all__ = [
    "CONDITIONS",
    "METRIC_KEYS",
    "VISUAL_LEXICON",
    "visual_reliance",
    "detect_visual_claims",
    "has_visual_claim",
    "hallucination_metrics",
]

CONDITIONS: tuple[str, ...] = ("real", "shuffled", "blank")
"""The image conditions of Beyond Accuracy §3.3."""

METRIC_KEYS: tuple[str, ...] = (
    "accuracy_real",
    "accuracy_shuffled",
    "accuracy_blank",
    "vrs",
    "blank_drop",
    "image_sensitivity",
    "vbr",
    "vhr",
)
"""The point-estimate keys of :func:`visual_reliance`, in output order (also the keys of ``ci``)."""

HALLUCINATION_KEYS: tuple[str, ...] = ("nvcr", "hvrr", "p_invariant_given_claim", "p_invariant_given_claim_mean_over_benchmarks")
__all__.append("HALLUCINATION_KEYS")

VISUAL_LEXICON: dict[str, tuple[str, ...]] = {
    # §3.5 (1): "presence: 'shows', 'visible'"
    "presence": (
        "show", "shows", "showing", "shown", "demonstrate", "demonstrates", "demonstrating", "demonstrated",
        "reveal", "reveals", "revealing", "revealed", "visible", "visualized", "visualised", "seen", "see",
        "observed", "noted", "evident", "apparent", "appears", "appear", "depicts", "depicted", "displays",
        "there is", "there are", "identified", "present", "presence",
    ),
    # "location: 'left', 'upper'"
    "location": (
        "left", "right", "upper", "lower", "middle", "bilateral", "bilaterally", "unilateral", "central",
        "peripheral", "apical", "basal", "basilar", "hilar", "perihilar", "medial", "lateral", "anterior",
        "posterior", "superior", "inferior", "proximal", "distal", "subpleural", "retrocardiac", "adjacent",
    ),
    # "appearance: 'irregular', 'spiculated'"
    "appearance": (
        "irregular", "spiculated", "smooth", "round", "rounded", "oval", "lobulated", "well defined",
        "ill defined", "circumscribed", "nodular", "patchy", "hazy", "opaque", "opacity", "opacities",
        "dense", "hyperdense", "hypodense", "hyperintense", "hypointense", "lucent", "lucency", "radiolucent",
        "radiopaque", "heterogeneous", "homogeneous", "enhancing", "calcified", "cystic", "focal", "ground glass",
        "bright", "dark", "stained", "eosinophilic", "basophilic", "pleomorphic", "hyperchromatic",
    ),
    # "severity: 'mild', 'extensive'"
    "severity": (
        "mild", "mildly", "moderate", "moderately", "severe", "severely", "extensive", "marked", "markedly",
        "minimal", "slight", "slightly", "subtle", "prominent", "massive", "large", "small", "tiny",
        "enlarged", "diffuse", "widespread",
    ),
}
"""Visual-observation cues by category (Beyond Accuracy §3.5; the paper lists two examples per
category, the rest is shovir's). Cues are matched as whole token sequences of the normalised
text (hyphens split words, so "ill-defined" is the cue "ill defined")."""

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?;])\s+|\n+")
_CUES: dict[tuple[str, ...], tuple[str, str]] = {}
for _category, _cues in VISUAL_LEXICON.items():
    for _cue in _cues:
        _CUES.setdefault(tuple(_cue.split()), (_category, _cue))
_CUE_LENGTHS = sorted({len(key) for key in _CUES}, reverse=True)
_CUE_HEADS = frozenset(key[0] for key in _CUES)
_WORD_CUES = frozenset(key[0] for key in _CUES if len(key) == 1)
_PHRASE_CUE_LENGTHS = [size for size in _CUE_LENGTHS if size > 1]  # longest first: "there is" before "there"
_ECHO_IGNORED = frozenset({"a", "an", "the"}) | YES_WORDS | NO_WORDS
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")  # _TOKEN on lower-cased ASCII text, where NFKC and casefold are identities


# -- input handling -------------------------------------------------------------------------


def _alignment(reference_ids: list[str], other_ids: list[str], field: str) -> np.ndarray:
    """Positions in ``other`` of each reference id; raises unless both cover the same ids."""
    position = {value: index for index, value in enumerate(other_ids)}
    missing = [value for value in reference_ids if value not in position]
    extra = sorted(set(other_ids) - set(reference_ids))
    if missing or extra:
        raise ValueError(
            f"{field}: does not cover the same samples as sample_ids: {len(missing)} missing "
            f"(e.g. {missing[:3]!r}), {len(extra)} extra (e.g. {extra[:3]!r})"
        )
    return np.array([position[value] for value in reference_ids], dtype=np.int64)


def _condition_answers(
    predictions: Sequence[str], field: str, n: int, sample_ids: list[str] | None, ids: Sequence[object] | None, ids_field: str
) -> list[str]:
    answers = check_answers(predictions, field)
    if ids is None:
        if len(answers) != n:
            raise ValueError(f"{field}: expected {n} answers, one per sample (as references), got {len(answers)}")
        return answers
    if sample_ids is None:
        raise ValueError(f"{ids_field}: given without sample_ids; pass the ids of the real condition too")
    other = _checks.id_list(ids, ids_field, len(answers), unique=True)
    order = _alignment(sample_ids, other, ids_field)
    return [answers[i] for i in order]


def _clusters(clusters: Sequence[object] | None, n: int) -> list[str] | None:
    return None if clusters is None else _checks.id_list(clusters, "clusters", n)





def _ratio(numerator: int, denominator: int) -> Statistic:
    def statistic(sums: np.ndarray) -> np.ndarray:
        return sums[:, numerator] / sums[:, denominator]

    return statistic


def _difference(first: int, second: int, denominator: int) -> Statistic:
    def statistic(sums: np.ndarray) -> np.ndarray:
        return (sums[:, first] - sums[:, second]) / sums[:, denominator]

    return statistic


# -- accuracy-based grounding metrics --------------------------------------------------------


def visual_reliance(
    predictions_real: Sequence[str],
    predictions_shuffled: Sequence[str],
    references: Sequence[str],
    predictions_blank: Sequence[str] | None = None,
    options: object = None,
    *,
    sample_ids: Sequence[object] | None = None,
    sample_ids_shuffled: Sequence[object] | None = None,
    sample_ids_blank: Sequence[object] | None = None,
    clusters: Sequence[object] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    n_permutations: int = 10000,
    seed: int = 0,
) -> dict:
    """Accuracy per condition, VRS, Blank Drop, Image Sensitivity, VBR and VHR with bootstrap
    CIs and permutation p-values (Beyond Accuracy §3.4, §3.6, Algorithm 1; definitions and
    choices in the module docstring).

    Inputs are answers (already extracted, see :func:`shovir.metrics.answers.extract_answer`):
    ``references`` and ``predictions_real`` define the samples, in order. The other conditions
    are aligned by position, or -- when ``sample_ids`` (for the real condition) and
    ``sample_ids_shuffled`` / ``sample_ids_blank`` are given -- joined on ids, raising if a
    condition does not cover exactly the same samples. ``options``: ``None``, one list shared by
    all samples, or one list (or ``None``) per sample. ``clusters``: optional cluster id per
    sample for a cluster bootstrap and cluster-level permutations.

    Returns a dict with exactly the keys :data:`METRIC_KEYS` (float, or ``None`` for the blank
    metrics when ``predictions_blank`` is absent), ``ci`` (each key → ``{"low", "high"}``, bounds
    ``None`` when undefined), ``p_values`` (``{"vrs", "blank_drop"}``, ``None`` without the blank
    condition or with ``n_permutations=0``) and ``n``.

    >>> out = visual_reliance(["yes", "no", "B", "yes"], ["yes", "yes", "A", "no"], ["yes", "no", "Coronal", "no"],
    ...                       options=[None, None, ["Axial", "Coronal"], None], n_resamples=200)
    >>> out["accuracy_real"], out["accuracy_shuffled"], out["vrs"], out["image_sensitivity"], out["vbr"], out["vhr"]
    (0.75, 0.5, 0.25, 0.75, 0.5, 0.25)
    >>> out["accuracy_blank"] is None and out["ci"]["blank_drop"] == {"low": None, "high": None} and out["p_values"]["blank_drop"] is None
    True
    """
    n_resamples, seed, confidence = _checks.resampling(n_resamples, seed, confidence)
    n_permutations = _checks.n_permutations(n_permutations)
    refs = check_answers(references, "references", allow_empty_text=False)
    n = len(refs)
    real = check_answers(predictions_real, "predictions_real")
    if len(real) != n:
        raise ValueError(f"predictions_real: expected {n} answers, one per reference, got {len(real)}")
    ids = None if sample_ids is None else _checks.id_list(sample_ids, "sample_ids", n, unique=True)
    shuffled = _condition_answers(predictions_shuffled, "predictions_shuffled", n, ids, sample_ids_shuffled, "sample_ids_shuffled")
    blank = None
    if predictions_blank is not None:
        blank = _condition_answers(predictions_blank, "predictions_blank", n, ids, sample_ids_blank, "sample_ids_blank")
    elif sample_ids_blank is not None:
        raise ValueError("sample_ids_blank: given without predictions_blank")
    groups = _clusters(clusters, n)
    opts = per_item_options(options, n)

    # the references' canonical forms and yes/no contexts serve every condition (match_many, agree_many)
    canon, yes_no = _canonical_references(refs, opts, "references")
    correct_real = _matches(real, canon, yes_no, opts)
    correct_shuffled = _matches(shuffled, canon, yes_no, opts)
    correct_blank = _matches(blank, canon, yes_no, opts) if blank is not None else np.zeros(n, bool)
    changed = ~_agreements(real, shuffled, opts, yes_no)

    # one row per sample: the indicators whose means are the metrics, and a 1 for the denominator
    units = np.column_stack(
        [
            correct_real,
            correct_shuffled,
            correct_blank,
            changed,
            correct_real & ~correct_shuffled,
            ~correct_real & correct_shuffled,
            np.ones(n, bool),
        ]
    ).astype(np.float64)
    statistics = {
        "accuracy_real": _ratio(0, 6),
        "accuracy_shuffled": _ratio(1, 6),
        "accuracy_blank": _ratio(2, 6),
        "vrs": _difference(0, 1, 6),
        "blank_drop": _difference(0, 2, 6),
        "image_sensitivity": _ratio(3, 6),
        "vbr": _ratio(4, 6),
        "vhr": _ratio(5, 6),
    }
    if blank is None:
        del statistics["accuracy_blank"], statistics["blank_drop"]
    intervals = bootstrap_intervals(statistics, units, groups, n_resamples, confidence, seed)
    out: dict = {key: intervals[key].estimate_or_none() if key in intervals else None for key in METRIC_KEYS}
    ci = {key: intervals[key].bounds() if key in intervals else dict(NO_INTERVAL) for key in METRIC_KEYS}
    test = n_permutations > 0  # 0: no test (p-values None), never the p = 1 of zero permutations
    p_values = {
        "vrs": float(paired_permutation_pvalue(units[:, 0] - units[:, 1], groups, n_permutations, seed)) if test else None,
        "blank_drop": (
            float(paired_permutation_pvalue(units[:, 0] - units[:, 2], groups, n_permutations, seed))
            if blank is not None and test
            else None
        ),
    }
    out["ci"] = ci
    out["p_values"] = p_values
    out["n"] = n
    return out


# -- visual claims and hallucinated visual reasoning -----------------------------------------


def _tokens(text: str) -> list[str]:
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _question_profile(question: str) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """What a statement may use without adding anything: the question's words with the ignored
    words (for echoes), and the question's consecutive word pairs (for shared phrases)."""
    tokens = _tokens(question)
    return frozenset(tokens) | _ECHO_IGNORED, frozenset(zip(tokens, tokens[1:]))


def _novel_cues(
    rationale: str, echo_words: frozenset[str], question_pairs: frozenset[tuple[str, str]], first_only: bool = False
) -> list[tuple[str, list[str], int, int]]:
    """Novel cue occurrences of ``rationale`` as (statement, tokens, start, size), in text order;
    with ``first_only`` at most one (``NVC_i`` needs no more). :func:`detect_visual_claims`
    states the rules.

    A word is covered by a shared phrase of 2 to ``max_ngram`` words exactly when it is covered
    by a shared word *pair*: every contiguous part of a shared phrase is a phrase of the question
    too. So shared pairs decide coverage, one set look-up per word."""
    found = []
    for statement in _SENTENCE_BREAK.split(rationale):
        tokens = _ASCII_TOKEN.findall(statement.lower()) if statement.isascii() else _tokens(statement)
        if echo_words.issuperset(tokens):
            continue  # empty, or an echo of the question: no new word, so no novel claim
        heads = [at for at, token in enumerate(tokens) if token in _CUE_HEADS]
        if not heads:
            continue
        length = len(tokens)
        shares_a_pair = not question_pairs.isdisjoint(zip(tokens, tokens[1:]))
        resume = 0  # a matched cue consumes its words: scanning resumes after it
        for start in heads:
            if start < resume:
                continue
            size = next((size for size in _PHRASE_CUE_LENGTHS
                         if start + size <= length and tuple(tokens[start : start + size]) in _CUES), 0)
            if not size:
                if tokens[start] not in _WORD_CUES:
                    continue
                size = 1
            resume = start + size
            if shares_a_pair and all(
                (at > 0 and (tokens[at - 1], tokens[at]) in question_pairs)
                or (at + 1 < length and (tokens[at], tokens[at + 1]) in question_pairs)
                for at in range(start, resume)
            ):
                continue  # every word of the cue is inside a phrase shared with the question
            found.append((statement, tokens, start, size))
            if first_only:
                return found
    return found


def detect_visual_claims(rationale: str, question: str, max_ngram: int = 5) -> list[dict[str, str]]:
    """Novel visual claims (NVCs) of a rationale (Beyond Accuracy §3.5 "Novel Claim Detection";
    Algorithm 1 ``DetectVisualClaims(r_real, x_text)``).

    A claim is an occurrence of a cue of :data:`VISUAL_LEXICON` (presence, location, appearance,
    severity) that is *novel*: not part of a phrase the rationale shares with the question.
    The paper "filter[s] out overlapping phrases up to 5 words long"; shovir reads this as: every
    run of 2 to ``max_ngram`` consecutive words of the rationale that also occurs in the question
    (after case folding and splitting on punctuation) is removed before cues are looked up.
    Single shared words are *not* removed: a rationale that independently asserts the asked
    property ("it has irregular margins" for "Is the lesion irregular?") makes a visual claim,
    whereas quoting the question ("I check for an irregular mass" for "Is there an irregular
    mass?") does not. A longer shared phrase covers no word that its shared word pairs do not
    cover, so the result is the same for every cap of 2 or more (``max_ngram`` is kept as the
    paper's bound, and checked). Negated observations
    ("no visible effusion") are claims too: they assert what the image shows.

    **Echoes of the question** (§3.5 (2), "adds information not present in the question"): a
    statement whose words are all words of the question -- in any order, ignoring articles and
    yes/no answer words (:data:`shovir.metrics.answers.YES_WORDS` / ``NO_WORDS``) -- restates
    the question or its answer and adds no observation, so none of its cues count. "There is a
    mass in the left lung." for "Is there a mass in the left lung?" is an echo (its shared phrases
    cover everything but the inverted "there is"); "There is a spiculated mass in the left lung."
    is not ("spiculated" is new).

    Returns one ``{"category", "cue", "statement"}`` dict per novel cue occurrence, in text order
    (``statement`` is the sentence that holds it); ``NVC = 1`` exactly when the list is non-empty.

    >>> claims = detect_visual_claims("I check for an irregular mass in the upper lobe. Its margins are spiculated.",
    ...                               "Is there an irregular mass in the upper lobe?")
    >>> [(c["category"], c["cue"], c["statement"]) for c in claims]
    [('appearance', 'spiculated', 'Its margins are spiculated.')]
    >>> detect_visual_claims("Is there a mass in the left lung? Yes.", "Is there a mass in the left lung?")
    []
    >>> detect_visual_claims("There is a mass in the left lung.", "Is there a mass in the left lung?")
    []
    >>> [c["cue"] for c in detect_visual_claims("There is a spiculated mass in the left lung.", "Is there a mass in the left lung?")]
    ['there is', 'spiculated']
    """
    rationale = check_answers([rationale], "rationale")[0]
    question = check_answers([question], "question")[0]
    if isinstance(max_ngram, bool) or not isinstance(max_ngram, int) or max_ngram < 2:
        raise ValueError(f"max_ngram must be >= 2 (phrases of 2 or more words), got {max_ngram!r}")
    claims: list[dict[str, str]] = []
    for statement, tokens, start, size in _novel_cues(rationale, *_question_profile(question)):
        category, cue = _CUES[tuple(tokens[start : start + size])]
        claims.append({"category": category, "cue": cue, "statement": statement.strip()})
    return claims


def has_visual_claim(rationale: str, question: str, max_ngram: int = 5) -> bool:
    """``NVC_i``: whether the rationale makes at least one novel visual claim (§3.5).

    >>> has_visual_claim("Mild cardiomegaly.", "Is the heart enlarged?"), has_visual_claim("Based on the question, yes.", "Is it?")
    (True, False)
    """
    return bool(detect_visual_claims(rationale, question, max_ngram))


def _claims_many(rationales: Sequence[str], questions: Sequence[str]) -> np.ndarray:
    """``NVC_i`` of checked, aligned rationales and questions: :func:`_claims_arrow` for large
    batches (in slices of 16,384 rows), else rationale by rationale (each distinct question
    profiled once)."""
    if len(rationales) >= _ARROW_MIN_ROWS and _ARROW_SAFE_LEXICON:
        claim = np.empty(len(rationales), dtype=bool)
        for start in range(0, len(rationales), _ARROW_CHUNK_ROWS):  # bounded memory: a few arrays per token
            end = start + _ARROW_CHUNK_ROWS
            claim[start:end] = _claims_arrow(rationales[start:end], questions[start:end])
        import pyarrow as pa

        pa.default_memory_pool().release_unused()  # Arrow keeps freed pages for itself; numpy comes next
        return claim
    profiles: dict[str, tuple[frozenset[str], frozenset[tuple[str, str]]]] = {}
    claim = np.zeros(len(rationales), dtype=bool)
    for index, (rationale, question) in enumerate(zip(rationales, questions)):
        profile = profiles.get(question)
        if profile is None:
            profile = profiles[question] = _question_profile(question)
        claim[index] = bool(_novel_cues(rationale, *profile, first_only=True))
    return claim


_ARROW_MIN_ROWS = 4096  # below this, Arrow's set-up costs more than the loop
_ARROW_CHUNK_ROWS = 1 << 14
# Column-wise detection reads a cue as 1 or 2 words and relies on no second word of a two-word
# cue starting a cue ("there is": "is" starts none), so a matched phrase never hides a cue the
# word-by-word scan would find. The lexicon is checked once here.
_ARROW_SAFE_LEXICON = max(_CUE_LENGTHS) <= 2 and not any(len(key) == 2 and key[1] in _CUE_HEADS for key in _CUES)
_BYTE_TOKEN = np.zeros(256, dtype=bool)  # _ASCII_TOKEN's characters, [a-z0-9]
_BYTE_TOKEN[[*range(ord("a"), ord("z") + 1), *range(ord("0"), ord("9") + 1)]] = True
_BYTE_STOP = np.zeros(256, dtype=bool)  # _SENTENCE_BREAK's look-behind, [.!?;]
_BYTE_STOP[[ord(c) for c in ".!?;"]] = True
_BYTE_SPACE = np.zeros(256, dtype=bool)  # Python's \s on ASCII: also \v and \x1c-\x1f
_BYTE_SPACE[[9, 10, 11, 12, 13, 32, 28, 29, 30, 31]] = True


def _ascii_tokens(texts: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Tokens of lower-cased ASCII texts (an Arrow large_string array), as :func:`_tokens` and
    :data:`_SENTENCE_BREAK` make them: per token its row, its statement (numbered across all
    rows) and its id in the returned list of distinct words. Bytes, not regexes: a statement
    breaks at a newline and at whitespace after . ! ? ; (one look-up table each)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[texts.offset : texts.offset + n + 1]
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]] if offsets[-1] > offsets[0] \
        else np.zeros(0, dtype=np.uint8)
    offsets = offsets - offsets[0]
    row_start = np.zeros(len(data) + 1, dtype=bool)
    row_start[offsets[:-1]] = True
    is_token = _BYTE_TOKEN[data]
    edge = np.empty(len(data) + 1, dtype=bool)  # a token starts or ends here (between bytes)
    edge[0], edge[-1] = True, True
    np.not_equal(is_token[1:], is_token[:-1], out=edge[1:-1])
    edge |= row_start
    bounds = np.flatnonzero(edge)
    bounds = bounds[bounds < len(data)]
    starts = bounds[is_token[bounds]]
    ends = np.append(bounds[1:], len(data))[is_token[bounds]]  # each token ends at the next edge
    breaks = data == 10
    breaks[1:] |= _BYTE_STOP[data[:-1]] & _BYTE_SPACE[data[1:]] & ~row_start[1:-1]
    statement_starts = np.flatnonzero(breaks | row_start[:-1])  # row starts count: statements never span rows
    per_statement = np.diff(np.append(np.searchsorted(starts, statement_starts), len(starts)))
    statement = np.repeat(np.arange(len(statement_starts)), per_statement)
    row = np.repeat(np.arange(n), np.diff(np.searchsorted(starts, offsets)))
    lengths = ends - starts
    token_offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=token_offsets[1:])
    words = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(token_offsets), pa.py_buffer(data[is_token]))
    encoded = pc.dictionary_encode(words)
    return row, statement, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary.to_pylist()


def _member(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``np.isin(values, keys)`` for non-negative keys: a dense table over a small key space,
    else a binary search of the sorted keys."""
    if not len(keys):
        return np.zeros(len(values), dtype=bool)
    if keys.max() < (1 << 24):
        table = np.zeros(int(keys.max()) + 2, dtype=bool)
        table[keys] = True
        return table[np.minimum(values, len(table) - 1)]
    keys = np.unique(keys)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return keys[at] == values


def _claims_arrow(rationales: Sequence[str], questions: Sequence[str]) -> np.ndarray:
    """``NVC_i`` column-wise, the same as :func:`_novel_cues` row by row (tested on random text).

    ASCII rationales are lower-cased by Arrow and cut into statements and words over their bytes
    (:func:`_ascii_tokens`); echoes, cues and words covered by pairs shared with the question are
    then array look-ups of (question, word) and (question, word pair) keys. Rationales with other
    characters take :func:`_novel_cues` (their tokens need NFKC and case folding)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(rationales)
    claim = np.zeros(n, dtype=bool)
    texts = pa.array(rationales, type=pa.large_string())
    asked = pc.dictionary_encode(pa.array(questions, type=pa.large_string()))
    question_of_row = asked.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    distinct_questions = asked.dictionary.to_pylist()
    ascii_rows = pc.string_is_ascii(texts).to_numpy(zero_copy_only=False)
    def row_by_row(rows: np.ndarray) -> None:
        for row in rows:
            claim[row] = bool(_novel_cues(rationales[row], *_question_profile(questions[row]), first_only=True))

    row_by_row(np.flatnonzero(~ascii_rows))
    fast_rows = np.flatnonzero(ascii_rows)
    if not len(fast_rows):
        return claim

    row, statement, token, words = _ascii_tokens(pc.ascii_lower(texts.filter(pa.array(ascii_rows))))
    word_id = {word: index for index, word in enumerate(words)}
    size = len(words)
    question = question_of_row[fast_rows][row]

    n_questions = len(distinct_questions)
    if n_questions * size * size >= 1 << 62:  # pair keys would overflow int64
        row_by_row(fast_rows)
        return claim
    word_keys, pair_keys = [], []
    for index, text in enumerate(distinct_questions):
        known = [word_id.get(word, -1) for word in _tokens(text)]  # a word no rationale has matches nothing
        word_keys += [index * size + w for w in known if w >= 0]
        pair_keys += [(index * size + a) * size + b for a, b in zip(known, known[1:]) if a >= 0 and b >= 0]
    word_keys = np.array(word_keys, dtype=np.int64)
    pair_keys = np.array(pair_keys, dtype=np.int64)

    def table(vocabulary: frozenset[str]) -> np.ndarray:
        flags = np.zeros(size, dtype=bool)
        flags[[word_id[word] for word in vocabulary if word in word_id]] = True
        return flags

    phrase_keys = np.array([word_id[a] * size + word_id[b] for a, b in (key for key in _CUES if len(key) == 2)
                            if a in word_id and b in word_id], dtype=np.int64)
    in_question = _member(question * size + token, word_keys)
    # an echo: every word of the statement is a question word or an ignored word
    disallowed = np.bincount(statement, weights=~(in_question | table(_ECHO_IGNORED)[token]), minlength=int(statement.max(initial=0)) + 1)
    echo = disallowed[statement] == 0
    same_statement = statement[1:] == statement[:-1]
    phrase = np.zeros(len(token), dtype=bool)
    at = np.flatnonzero(same_statement & table(frozenset(key[0] for key in _CUES if len(key) == 2))[token[:-1]])
    phrase[at[_member(token[at] * size + token[at + 1], phrase_keys)]] = True
    at = np.flatnonzero(same_statement & in_question[:-1] & in_question[1:])  # a shared pair has two question words
    shared_pair = np.zeros(len(token) - 1 if len(token) else 0, dtype=bool)
    shared_pair[at[_member((question[at] * size + token[at]) * size + token[at + 1], pair_keys)]] = True
    covered = np.zeros(len(token), dtype=bool)
    covered[1:] |= shared_pair  # the pair to the left is shared
    covered[:-1] |= shared_pair  # the pair to the right is shared
    covered_next = np.zeros(len(token), dtype=bool)
    covered_next[:-1] = covered[1:]
    word_cue = table(_WORD_CUES)[token] & ~phrase  # the longer cue wins
    novel = ((word_cue & ~covered) | (phrase & ~(covered & covered_next))) & ~echo
    claim[fast_rows] = np.bincount(row, weights=novel, minlength=len(fast_rows)) > 0
    return claim


def hallucination_metrics(
    rationales: Sequence[str],
    questions: Sequence[str],
    predictions_real: Sequence[str],
    predictions_shuffled: Sequence[str],
    references: Sequence[str] | None = None,
    options: object = None,
    *,
    sample_ids: Sequence[object] | None = None,
    sample_ids_shuffled: Sequence[object] | None = None,
    clusters: Sequence[object] | None = None,
    benchmarks: Sequence[str] | None = None,
    max_ngram: int = 5,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """NVCR, HVRR and P(invariant | claim) with bootstrap CIs (Beyond Accuracy §3.5 Eq. (1),
    Table 4, §3.6; the HVRR choice is explained in the module docstring).

    ``rationales`` are the real-condition rationales (Algorithm 1 ``r_i^real``; use
    :func:`shovir.metrics.answers.extract_rationale`), aligned with ``questions``,
    ``predictions_real`` and, when given, ``references`` / ``sample_ids`` / ``clusters`` /
    ``benchmarks``. ``predictions_shuffled`` is aligned by position or joined on
    ``sample_ids_shuffled``. Invariance ``a_real = a_shuffle`` compares canonical answers
    (references, when given, decide whether an item is yes/no).

    ``benchmarks`` (one name per sample, e.g. ``"VQA-RAD"``) gives Table 4's average over
    benchmarks: ``p_invariant_given_claim_mean_over_benchmarks`` is the unweighted mean of the
    per-benchmark conditionals (Table 4 = mean of Table 5's rows), ``p_invariant_given_claim``
    stays the pooled conditional (module docstring). Without ``benchmarks`` every sample is one
    benchmark and both are equal. Intervals resample samples (or ``clusters``) across all
    benchmarks, every key on the same draws.

    Returns :data:`HALLUCINATION_KEYS` (``None`` when no rationale makes a claim), ``ci`` (same
    keys → ``{"low", "high"}``), ``n``, ``n_claims`` (samples with NVC = 1), ``n_benchmarks`` and
    ``per_benchmark`` (benchmark → ``{"nvcr", "hvrr", "p_invariant_given_claim", "n",
    "n_claims"}``; empty without ``benchmarks``).

    >>> out = hallucination_metrics(
    ...     ["A spiculated mass in the left lobe.", "Cannot tell.", "Mild effusion.", "Large opacity."],
    ...     ["Is there a mass?", "Is it normal?", "Is there effusion?", "What is seen?"],
    ...     ["yes", "yes", "yes", "opacity"], ["yes", "no", "no", "Opacity."], n_resamples=200)
    >>> out["nvcr"], out["hvrr"], out["p_invariant_given_claim"], out["n_claims"]
    (0.75, 0.5, 0.6666666666666666, 3)

    Two benchmarks: A has 1 invariant answer among 1 claim (1.0), B 1 among 2 (0.5). Pooled
    2 / 3, the mean over benchmarks (1.0 + 0.5) / 2 = 0.75:

    >>> out = hallucination_metrics(["Mild effusion.", "Small mass.", "Large opacity."], ["Q?"] * 3,
    ...                             ["yes", "yes", "no"], ["yes", "yes", "yes"], benchmarks=["A", "B", "B"], n_resamples=0)
    >>> round(out["p_invariant_given_claim"], 4), out["p_invariant_given_claim_mean_over_benchmarks"], out["per_benchmark"]["B"]["n_claims"]
    (0.6667, 0.75, 2)
    """
    n_resamples, seed, confidence = _checks.resampling(n_resamples, seed, confidence)
    real = check_answers(predictions_real, "predictions_real")
    n = len(real)
    texts = check_answers(rationales, "rationales")
    asked = check_answers(questions, "questions")
    for field, values in (("rationales", texts), ("questions", asked)):
        if len(values) != n:
            raise ValueError(f"{field}: expected {n} items, one per sample (as predictions_real), got {len(values)}")
    refs = None
    if references is not None:
        refs = check_answers(references, "references", allow_empty_text=False)
        if len(refs) != n:
            raise ValueError(f"references: expected {n} answers, one per sample, got {len(refs)}")
    ids = None if sample_ids is None else _checks.id_list(sample_ids, "sample_ids", n, unique=True)
    shuffled = _condition_answers(predictions_shuffled, "predictions_shuffled", n, ids, sample_ids_shuffled, "sample_ids_shuffled")
    groups = _clusters(clusters, n)
    names = [""] * n if benchmarks is None else _checks.id_list(benchmarks, "benchmarks", n)
    opts = per_item_options(options, n)
    if isinstance(max_ngram, bool) or not isinstance(max_ngram, int) or max_ngram < 2:
        raise ValueError(f"max_ngram must be >= 2 (phrases of 2 or more words), got {max_ngram!r}")

    claim = _claims_many(texts, asked)
    invariant = agree_many(real, shuffled, opts, refs, ("predictions_real", "predictions_shuffled"))
    order = list(dict.fromkeys(names))  # benchmarks in order of first appearance
    member = np.array([order.index(b) for b in names]) if len(order) > 1 else np.zeros(n, dtype=np.int64)
    onehot = member[:, None] == np.arange(len(order))[None, :]
    b = len(order)
    # columns: claim, claim & invariant, 1, then per benchmark: claim_b, (claim & invariant)_b, 1_b
    units = np.column_stack([claim, claim & invariant, np.ones(n, bool), onehot & claim[:, None],
                             onehot & (claim & invariant)[:, None], onehot]).astype(np.float64)

    def mean_over_benchmarks(sums: np.ndarray) -> np.ndarray:
        per = sums[:, 3 + b : 3 + 2 * b] / sums[:, 3 : 3 + b]
        defined = ~np.isnan(per)
        count = defined.sum(1)
        return np.where(count > 0, np.where(defined, per, 0).sum(1) / np.maximum(count, 1), np.nan)

    statistics = {"nvcr": _ratio(0, 2), "hvrr": _ratio(1, 2), "p_invariant_given_claim": _ratio(1, 0),
                  "p_invariant_given_claim_mean_over_benchmarks": mean_over_benchmarks}
    intervals = bootstrap_intervals(statistics, units, groups, n_resamples, confidence, seed)
    out: dict = {key: intervals[key].estimate_or_none() for key in HALLUCINATION_KEYS}
    ci = {key: intervals[key].bounds() for key in HALLUCINATION_KEYS}
    out["ci"] = ci
    out["n"] = n
    out["n_claims"] = int(claim.sum())
    out["n_benchmarks"] = b
    per_benchmark = {}
    if benchmarks is not None:
        totals = units.sum(0)
        for j, name in enumerate(order):
            size, claims, hallucinated = totals[3 + 2 * b + j], totals[3 + j], totals[3 + b + j]
            per_benchmark[name] = {"nvcr": float(claims / size), "hvrr": float(hallucinated / size),
                                   "p_invariant_given_claim": float(hallucinated / claims) if claims else None,
                                   "n": int(size), "n_claims": int(claims)}
    out["per_benchmark"] = per_benchmark
    return out

"""Text-overlap metrics of ShoViR Table 1: BLEU-1, BLEU-4 and ROUGE-L, on one 0–1 scale.

**BLEU as published.** Papers print BLEU from three different implementations, which disagree
by 20–25 % relative on the same reports; ``bleu_implementation`` picks one and the result
names it in ``bleu_signature`` (the sacrebleu convention, Post 2018):

==================  ===========================================================  ===================
implementation      definition                                                   used by
==================  ===========================================================  ===================
``"sacrebleu"``     ``sacrebleu.BLEU()`` corpus BLEU: 13a tokens (segment        ShoViR authors with
(default)           ``rstrip``-ed), ``exp`` smoothing; BLEU-1 is                 ``--bootstrap-ci``
                    ``BLEU(max_ngram_order=1)``                                  (reference code §6.2)
``"hf"``            evaluate's ``bleu`` module: the tensorflow/nmt               ShoViR authors
                    ``compute_bleu`` on evaluate's ``tokenizer_13a`` (no         without bootstrap
                    ``rstrip``), no smoothing, shortest reference length;        (§6.2, 0–1 scale)
                    BLEU-1 is ``max_order=1`` (equal to ``precisions[0] · BP``)
``"pycocoevalcap"`` ``pycocoevalcap.bleu.Bleu(4)``: whitespace tokens, closest     RadEval, R2Gen-style
                    reference length, no smoothing (its ``tiny = 1e-15`` and       report generation
                    ``small = 1e-9`` guards), BLEU-n = ``score[n-1]``             papers
==================  ===========================================================  ===================

All three are corpus BLEU (Papineni et al. 2002, Eq. "BLEU = BP · exp(Σ w_n log p_n)") over the
same sufficient statistics (hypothesis length, reference length, clipped n-gram matches and
n-gram totals per report); they differ in tokenisation and in how they treat zero counts.
shovir computes the statistics once, with its own vectorised counter (below), and applies
each implementation's formula exactly; the tests compare every implementation with the
installed reference package (sacrebleu, pycocoevalcap, nltk) and with hand-computed cases.

**ROUGE-L** is the mean per-report F-measure of ``rouge_score`` (Lin 2004) without stemming:
its tokeniser (lower case, runs of ``[a-z0-9]``), the LCS length, ``P = LCS/|hyp|``,
``R = LCS/|ref|``, ``F = 2PR/(P+R)``.

The ShoViR authors reported BLEU on 0–100 with a bootstrap and on 0–1 without (reference code
§9, defect 12); here every score is on 0–1.

**Speed.** Every report is split on whitespace in Arrow (C++), each *distinct* word is
tokenised once by the implementation's own tokeniser, and the tokens of a report pair are
compared as bit masks: bit ``i`` of ``M[j]`` says token ``j`` of the longer text equals token
``i`` of the shorter one. Clipped n-gram matches come from ANDs of shifted masks (an n-gram of
one text occurs where ``n`` consecutive diagonal bits are set), and the LCS of ROUGE-L from the
bit-parallel recurrence ``V ← (V + (V & M[j])) | (V & ~M[j])`` (Crochemore et al. 2001;
Hyyrö 2004): LCS = number of zero bits of ``V``. Rows are processed in chunks of 16,384
reports, each compared in sub-chunks sorted by length, so memory stays bounded;
``SHOVIR_NLG_THREADS=N`` (``0``: every usable core) works on N chunks at once in threads, with
the same numbers (default 1, so that parallel jobs do not oversubscribe shared cores). Reports whose characters fall outside printable ASCII, or that carry
13a's line-level markup (``<skipped>``, ``-\\n``, ``&`` entities), are tokenised per report
with the reference tokeniser itself, so the fast path never changes a token.

The corpus BLEU interval resamples the per-report sufficient statistics and recomputes BLEU
from the resampled sums in one vectorised pass (the same BLEU as the implementation on every
resampled corpus, without re-tokenising).
"""

from __future__ import annotations

import math
import os
import re
import threading
from typing import Any, Callable, Sequence

import numpy as np

from shovir.metrics import _checks
from shovir.metrics.bootstrap import NO_INTERVAL, bootstrap_interval

__all__ = [
    "BLEU_IMPLEMENTATIONS",
    "nlg_scores",
    "bleu_from_statistics",
    "bleu_score",
    "bleu_signature",
    "corpus_statistics",
    "check_texts",
]

BLEU_IMPLEMENTATIONS: tuple[str, ...] = ("sacrebleu", "hf", "pycocoevalcap")
"""The BLEU implementations :func:`nlg_scores` reproduces (see the module docstring)."""

MAX_ORDER = 4
_TINY, _SMALL = 1e-15, 1e-9  # pycocoevalcap's guards against log(0) and 0/0
_CHUNK_ROWS = 16384  # rows tokenised together (Arrow split, one dictionary of words)
_MASK_BYTES = 1 << 24  # bytes of the boolean comparison tensor of one sub-chunk


def _require(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"text metrics need {module.split('.')[0]}: pip install 'shovir[scorers]'") from error


# -- input checks ---------------------------------------------------------------------------------


def _describe(value: object) -> str:
    if isinstance(value, float) and value != value:
        return "NaN"
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '…' if len(text) > 40 else text}"


def check_texts(field: str, texts: object, allow_empty: bool = False, offset: int = 0) -> Any:
    """Return ``texts`` if it is a sequence of report strings, else raise a ``ValueError`` that
    names ``field``, the first offending row and the fix. A bare string, bytes, a token list or
    a number is refused before anything (numpy, Arrow) could turn it into text. A pyarrow string
    array passes as it is (the evaluate module hands its column over without copying).

    >>> check_texts("predictions", ["no effusion", "small effusion"])
    ['no effusion', 'small effusion']
    >>> check_texts("predictions", ["no acute findings", 7])
    Traceback (most recent call last):
    ...
    ValueError: predictions[1]: expected a report string, got int 7; pass every report as a str (decode bytes, join token lists with spaces, drop or fill missing reports)
    >>> check_texts("references", "no acute findings")
    Traceback (most recent call last):
    ...
    ValueError: references: expected a list of report strings, one per sample, got a single str; wrap one report in a list: ["..."]
    """
    fix = "pass every report as a str (decode bytes, join token lists with spaces, drop or fill missing reports)"
    if isinstance(texts, (str, bytes)):
        raise ValueError(
            f"{field}: expected a list of report strings, one per sample, got a single {type(texts).__name__}; "
            'wrap one report in a list: ["..."]'
        )
    pa = _arrow()
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise ValueError(f"{field}: expected an Arrow string column, got {texts.type}; {fix}")
        if texts.null_count:
            row = int(np.flatnonzero(texts.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"{field}[{row + offset}]: expected a report string, got None; {fix}")
        if not allow_empty and len(texts) == 0:
            raise ValueError(f"{field}: empty input; pass at least one report")
        return texts
    if isinstance(texts, np.ndarray):
        if texts.ndim != 1:
            raise ValueError(f"{field}: expected a 1-d list of report strings, got an array of shape {texts.shape}; {fix}")
        if texts.dtype.kind == "U":
            texts = texts.tolist()
    if not hasattr(texts, "__len__") or not hasattr(texts, "__iter__") or isinstance(texts, dict):
        raise ValueError(f"{field}: expected a list of report strings, got {type(texts).__name__}")
    if not allow_empty and len(texts) == 0:
        raise ValueError(f"{field}: empty input; pass at least one report")
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{field}[{row + offset}]: expected a report string, got {_describe(text)}; {fix}")
    return texts


def _check_int(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{field}: expected an integer >= {minimum}, got {_describe(value)}")
    if value < minimum:
        raise ValueError(f"{field}: expected an integer >= {minimum}, got {value}")
    return int(value)


def _check_options(n_resamples: object, seed: object, confidence: object, bleu_implementation: object) -> None:
    _check_int("n_resamples", n_resamples, 0)
    _check_int("seed", seed, 0)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), e.g. 0.95, got {_describe(confidence)}")
    if bleu_implementation not in BLEU_IMPLEMENTATIONS:
        raise ValueError(f"bleu_implementation: expected one of {', '.join(map(repr, BLEU_IMPLEMENTATIONS))}, got {bleu_implementation!r}")


# -- tokenisers -----------------------------------------------------------------------------------


def _arrow() -> Any:
    return _require("pyarrow")


_TOKENIZERS: dict[str, Any] = {}


def _sacrebleu_tokenizer(name: str) -> Any:
    if name not in _TOKENIZERS:
        _TOKENIZERS["13a"] = _require("sacrebleu.tokenizers.tokenizer_13a").Tokenizer13a()
        _TOKENIZERS["re"] = _require("sacrebleu.tokenizers.tokenizer_re").TokenizerRegexp()
    return _TOKENIZERS[name]


class _Tokenisation:
    """One tokeniser: how a whole report becomes tokens (the reference tokeniser, used for the
    reports the fast path must not touch), how one whitespace-free word does (the fast path),
    and whether some reports must not take the fast path (``unsafe``, see :class:`_Words`)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.unsafe: bool
        if kind in ("13a", "13a-rstrip"):
            line, post = _sacrebleu_tokenizer("13a"), _sacrebleu_tokenizer("re")
            # sacrebleu tokenises sent.rstrip() (BLEU._preprocess_segment); evaluate's bleu does not
            if kind == "13a-rstrip":
                self.line: Callable[[str], list[str]] = lambda text: line(text.rstrip()).split()
            else:
                self.line = lambda text: line(text).split()
            self.word: Callable[[str], list[str]] = lambda word: post(f" {word} ").split()
            self.unsafe = True
        elif kind == "whitespace":  # pycocoevalcap's precook: s.split()
            self.line = str.split
            self.word = lambda word: [word] if word else []
            self.unsafe = True
        elif kind == "rouge":
            # rouge-score lower-cases and keeps runs of [a-z0-9]; whitespace of any kind only
            # separates tokens, so an ASCII-whitespace split then the word tokeniser is exact
            tokenize = _require("rouge_score.tokenize").tokenize
            self.line = lambda text: tokenize(text, None)
            self.word = self.line
            self.unsafe = False
        else:  # pragma: no cover - internal
            raise ValueError(kind)
        self.vocabulary: dict[str, int] = {}
        self.words: dict[str, tuple[int, ...]] = {}
        self.unsafe_words: dict[str, bool] = {}  # word -> whether it sends its report to the slow path
        self.lock = threading.Lock()  # chunks may be tokenised in parallel threads

    def ids(self, tokens: Sequence[str]) -> list[int]:
        vocabulary = self.vocabulary
        return [vocabulary.setdefault(token, len(vocabulary)) for token in tokens]

    def word_ids(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of each distinct word: (number of tokens per word, concatenated ids)."""
        with self.lock:
            return self._word_ids(words)

    def _word_ids(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        cache, lengths, flat = self.words, np.empty(len(words), dtype=np.int64), []
        for index, word in enumerate(words):
            ids = cache.get(word)
            if ids is None:
                ids = cache[word] = tuple(self.ids(self.word(word)))
            lengths[index] = len(ids)
            flat.extend(ids)
        return lengths, np.asarray(flat, dtype=np.int64)

    def texts(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (flat) and offsets of reports tokenised one by one by the reference tokeniser."""
        with self.lock:
            ids = [self.ids(self.line(text)) for text in texts]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(row) for row in ids], out=offsets[1:])
        flat = np.fromiter((token for row in ids for token in row), dtype=np.int64, count=int(offsets[-1]))
        return flat, offsets


_UNSAFE_CHAR = re.compile(r"[^\x09-\x0d\x20-\x7e]")  # non-ASCII, or \x1c-\x1f (whitespace to Python only)


class _Words:
    """The whitespace-separated words of a chunk of reports, dictionary-encoded once (Arrow).

    A report is *unsafe* for a tokenisation when splitting it on ASCII whitespace could differ
    from what the reference tokeniser does with the whole report: it has a character outside
    printable ASCII and ASCII whitespace (Python's ``str.split`` also splits on \x1c-\x1f and
    Unicode spaces, Arrow's ASCII split does not, so such characters stay inside a word and are
    seen there), or, for 13a, the line-level markup ``<skipped>``, ``&`` entities (inside
    words) or ``-\n`` (a hyphen before a line break: every report with a word ending in ``-``
    takes the reference tokeniser, whatever whitespace follows). Each distinct word is checked
    once per call."""

    def __init__(self, texts: Any) -> None:
        compute = _require("pyarrow.compute")
        self.texts = texts
        words = compute.ascii_split_whitespace(texts)
        offsets = words.offsets.to_numpy()
        self.offsets = (offsets - offsets[0]).astype(np.int64)
        flat = compute.list_flatten(words)
        if len(flat):
            encoded = compute.dictionary_encode(flat)
            self.codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)
            self.dictionary: list[str] = encoded.dictionary.to_pylist()
        else:
            self.codes, self.dictionary = np.zeros(0, np.intp), []
        self._unsafe: dict[str, np.ndarray] = {}

    def unsafe(self, tokenisation: _Tokenisation) -> np.ndarray:
        """Which reports must take the reference tokeniser (see the class docstring)."""
        if tokenisation.kind not in self._unsafe:
            markup = tokenisation.kind != "whitespace"
            seen = tokenisation.unsafe_words
            flags = np.zeros(len(self.dictionary), dtype=bool)
            for index, word in enumerate(self.dictionary):
                flag = seen.get(word)
                if flag is None:
                    flag = seen[word] = bool(_UNSAFE_CHAR.search(word)) or (
                        markup and ("&" in word or "<skipped>" in word or word.endswith("-")))
                flags[index] = flag
            rows = np.zeros(len(self.offsets) - 1, dtype=bool)
            if flags.any():
                hits = np.flatnonzero(flags[self.codes])
                rows[np.searchsorted(self.offsets, hits, side="right") - 1] = True
            self._unsafe[tokenisation.kind] = rows
        return self._unsafe[tokenisation.kind]

    def tokens(self, tokenisation: _Tokenisation) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (flat) and per-report offsets under ``tokenisation``."""
        lengths, flat = tokenisation.word_ids(self.dictionary)
        codes = self.codes
        flat = flat.astype(np.int32)
        if len(lengths) and (lengths == 1).all():
            ids, offsets = flat[codes], self.offsets
        else:
            width = int(lengths.max(initial=0))
            table = np.full((len(lengths), max(width, 1)), -1, dtype=np.int32)
            word = np.repeat(np.arange(len(lengths)), lengths)
            table[word, np.arange(len(flat)) - (np.cumsum(lengths) - lengths)[word]] = flat
            ids = table[codes].ravel()
            ids = ids[ids >= 0]
            offsets = np.concatenate([[0], np.cumsum(lengths[codes])])[self.offsets]
        if tokenisation.unsafe:
            slow = np.flatnonzero(self.unsafe(tokenisation))
            if len(slow):
                slow_ids, slow_offsets = tokenisation.texts(self.texts.take(_arrow().array(slow)).to_pylist())
                ids, offsets = _replace_rows(ids, offsets, slow, slow_ids, slow_offsets)
        return ids, offsets


def _replace_rows(ids: np.ndarray, offsets: np.ndarray, rows: np.ndarray, new_ids: np.ndarray, new_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replace the token lists of ``rows`` by ``new_ids`` / ``new_offsets``."""
    lengths = np.diff(offsets)
    keep = np.ones(len(lengths), dtype=bool)
    keep[rows] = False
    lengths[rows] = np.diff(new_offsets)
    merged_offsets = np.concatenate([[0], np.cumsum(lengths)])
    merged = np.empty(int(merged_offsets[-1]), dtype=np.int64)
    old_row = np.repeat(np.arange(len(keep)), np.diff(offsets))
    kept = keep[old_row]
    merged[(np.arange(len(ids)) - offsets[old_row] + merged_offsets[old_row])[kept]] = ids[kept]
    new_lengths = np.diff(new_offsets)
    merged[np.repeat(merged_offsets[rows] - new_offsets[:-1], new_lengths) + np.arange(len(new_ids))] = new_ids
    return merged, merged_offsets


# -- pairwise counting on bit masks --------------------------------------------------------------


def _shift_right(masks: np.ndarray, bits: int) -> np.ndarray:
    """``masks >> bits`` for multi-word little-endian bit sets along the last axis."""
    if bits == 0:
        return masks
    out = masks >> np.uint64(bits)
    if masks.shape[-1] > 1:
        out[..., :-1] |= masks[..., 1:] << np.uint64(64 - bits)
    return out


def _any(masks: np.ndarray) -> np.ndarray:
    """Whether each multi-word bit set (last axis) is nonzero."""
    out = masks[..., 0] != 0
    for w in range(1, masks.shape[-1]):
        out |= masks[..., w] != 0
    return out


def _popcount(masks: np.ndarray) -> np.ndarray:
    """Number of set bits of each multi-word bit set (last axis), as int64."""
    out = np.bitwise_count(masks[..., 0]).astype(np.int64)
    for w in range(1, masks.shape[-1]):
        out += np.bitwise_count(masks[..., w])
    return out


def _lowest_bit(masks: np.ndarray) -> np.ndarray:
    """Index of the lowest set bit of each (nonzero) multi-word bit set (last axis)."""
    word = masks[..., -1]
    base = np.full(word.shape, 64 * (masks.shape[-1] - 1), dtype=np.int64)
    for w in range(masks.shape[-1] - 2, -1, -1):
        here = masks[..., w] != 0
        word = np.where(here, masks[..., w], word)
        base[here] = 64 * w
    low = word & (~word + np.uint64(1))
    return base + np.bitwise_count(low - np.uint64(1))


def _pair_masks(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit masks ``M[r, j]``: bit ``i`` set where ``b[r, i] == a[r, j]`` (shape (rows, len_a, words))."""
    return np.packbits(a[:, :, None] == b[:, None, :], axis=-1, bitorder="little").view("<u8")


def _clipped_matches(masks: np.ndarray, max_order: int) -> np.ndarray:
    """Clipped n-gram matches per row, n = 1..max_order: Σ over distinct n-grams of min(count in
    one text, count in the other) — symmetric, so either text may index the masks.

    Bit ``i`` of the order-n mask of position ``j`` is set where the n-gram at ``i`` of one text
    equals the n-gram at ``j`` of the other (``M_n[j] = M_{n-1}[j] & (M[j+n-1] >> (n-1))``); equal
    nonzero masks mean equal n-grams, and so does an equal lowest set bit, the n-gram's key: the
    n-gram adds min(positions with that key, bits set in its mask). Only positions that matched at
    order n-1 can match at order n, so the work shrinks with n."""
    rows, length, words = masks.shape
    bins = 64 * words
    out = np.zeros((rows, max_order), dtype=np.int64)
    single = masks[..., 0] if words == 1 else None
    row, position = np.nonzero(single if single is not None else _any(masks))
    current = single[row, position] if single is not None else masks[row, position]
    last = np.int64(length - 1)
    for order in range(1, max_order + 1):
        if order > 1:
            following = np.minimum(position + (order - 1), last)
            if single is not None:
                step = single[row, following] >> np.uint64(order - 1)
                step[position + (order - 1) > last] = 0
                current = current & step
                alive = current != 0
            else:
                step = _shift_right(masks[row, following], order - 1)
                step[position + (order - 1) > last] = 0
                current = current & step
                alive = _any(current)
            row, position, current = row[alive], position[alive], current[alive]
        if not len(row):
            break
        if single is not None:
            available = np.bitwise_count(current)
            key = row * 64 + np.bitwise_count((current & (~current + np.uint64(1))) - np.uint64(1))
        else:
            available = _popcount(current)
            key = row * bins + _lowest_bit(current)
        occurrences = np.bincount(key, minlength=rows * bins)
        present = np.zeros(rows * bins, dtype=available.dtype)
        present[key] = available
        out[:, order - 1] = np.minimum(occurrences, present).reshape(rows, bins).sum(axis=1)
    return out


def _lcs_lengths(masks: np.ndarray) -> np.ndarray:
    """LCS length per row by the bit-parallel recurrence over the positions of ``masks``."""
    rows, length, words = masks.shape
    v = np.full((rows, words), np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    if words == 1:
        v = v[:, 0]
        for j in range(length):
            m = masks[:, j, 0]
            v = (v + (v & m)) | (v & ~m)
        return 64 - np.bitwise_count(v).astype(np.int64)
    for j in range(length):
        m = masks[:, j]
        u = v & m
        carry = np.zeros(rows, dtype=np.uint64)
        total = np.empty_like(v)
        for w in range(words):
            s = v[:, w] + u[:, w]
            s2 = s + carry
            carry = ((s < v[:, w]) | (s2 < s)).astype(np.uint64)
            total[:, w] = s2
        v = total | (v & ~m)
    return 64 * words - _popcount(v)


def _gather(ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int, fill: int) -> np.ndarray:
    """Rows ``ids[start : start + length]`` padded with ``fill`` to ``width`` columns."""
    column = np.arange(width)
    index = starts[:, None] + column[None, :]
    out = ids[np.minimum(index, len(ids) - 1)]
    out[column[None, :] >= lengths[:, None]] = fill
    return out


def _local_ids(hyp: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
    """Relabel the token ids of a chunk densely, in the narrowest integer type that holds them."""
    top = int(max(hyp.max(initial=-1), ref.max(initial=-1))) + 1
    if top >= np.iinfo(np.int16).max:
        present = np.zeros(top, dtype=bool)
        present[hyp] = present[ref] = True
        dense = np.cumsum(present) - 1
        hyp, ref, top = dense[hyp], dense[ref], int(present.sum())
    dtype = np.int16 if top < np.iinfo(np.int16).max else np.int32
    return hyp, ref, dtype


def _pairwise(hyp: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray], what: str, max_order: int = MAX_ORDER) -> np.ndarray:
    """Clipped n-gram matches (``what="ngrams"``, shape (n, max_order)) or LCS lengths
    (``"lcs"``, shape (n,)) of each (hypothesis, reference) token-id pair."""
    (h_ids, h_off), (r_ids, r_off) = hyp, ref
    h_len, r_len = np.diff(h_off), np.diff(r_off)
    n = len(h_len)
    out = np.zeros((n, max_order) if what == "ngrams" else n, dtype=np.int64)
    long_len, short_len = np.maximum(h_len, r_len), np.minimum(h_len, r_len)
    order = np.argsort(long_len, kind="stable")
    order = order[short_len[order] > 0]
    if not len(order):
        return out
    h_ids, r_ids, dtype = _local_ids(h_ids, r_ids)
    # one flat id array for both sides, so that each row can take either side as "a"
    ids = np.concatenate([h_ids, r_ids, [-1]]).astype(dtype)
    swap = h_len < r_len
    a_start = np.where(swap, r_off[:-1] + len(h_ids), h_off[:-1])
    b_start = np.where(swap, h_off[:-1], r_off[:-1] + len(h_ids))
    start = 0
    while start < len(order):
        # rows sorted by the longer length; the comparison tensor of a sub-chunk holds
        # rows x longest x 64·words booleans: take as many rows as fit the budget
        longest = int(long_len[order[start]])
        size = max(1, _MASK_BYTES // (longest * 64 * -(-longest // 64)))
        while True:
            stop = min(len(order), start + size)
            longest = int(long_len[order[stop - 1]])
            if size == 1 or (stop - start) * longest * 64 * -(-longest // 64) <= _MASK_BYTES:
                break
            size //= 2
        rows = order[start:stop]
        words = -(-int(short_len[rows].max()) // 64)
        a = _gather(ids, a_start[rows], long_len[rows], longest, -1)
        b = _gather(ids, b_start[rows], short_len[rows], 64 * words, -2)
        masks = _pair_masks(a, b)
        out[rows] = _clipped_matches(masks, max_order) if what == "ngrams" else _lcs_lengths(masks)
        start = stop
    return out


# -- sufficient statistics -----------------------------------------------------------------------

_BLEU_TOKENS = {"sacrebleu": "13a-rstrip", "hf": "13a", "pycocoevalcap": "whitespace"}


def _chunks(texts: Any, size: int) -> Any:
    """Arrow string arrays of ``size`` reports (Python strings are converted chunk by chunk, an
    Arrow column is sliced without copying more than one chunk)."""
    pa = _arrow()
    for start in range(0, len(texts), size):
        chunk = texts[start : start + size]
        if isinstance(chunk, pa.ChunkedArray):
            chunk = chunk.combine_chunks() if chunk.num_chunks != 1 else chunk.chunk(0)
        if not isinstance(chunk, pa.Array):
            try:
                chunk = pa.array(chunk, type=pa.large_string())
            except (pa.ArrowException, UnicodeError):  # e.g. lone surrogates: not UTF-8
                chunk = list(chunk)
        yield chunk


def _chunk_tokens(chunk: Any, tokenisations: Sequence[_Tokenisation]) -> list[tuple[np.ndarray, np.ndarray]]:
    if isinstance(chunk, list):  # not representable in Arrow: the reference tokenisers, report by report
        return [tokenisation.texts(chunk) for tokenisation in tokenisations]
    words = _Words(chunk)
    return [words.tokens(tokenisation) for tokenisation in tokenisations]


def corpus_statistics(
    predictions: Sequence[str], references: Sequence[str], bleu_implementation: str = "sacrebleu"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-report BLEU sufficient statistics and ROUGE-L F-measures.

    Returns ``(bleu, rouge)``: ``bleu`` (n, 10) float64 in sacrebleu's layout ``sys_len, ref_len,
    correct_1..4, total_1..4`` with the implementation's tokens (``total_n = max(0, sys_len - n + 1)``;
    with one reference, sacrebleu's and pycocoevalcap's closest and evaluate's shortest reference
    length are all its length), and ``rouge`` (n,) the rouge-score ROUGE-L F of each report.

    >>> bleu, rouge = corpus_statistics(["the heart is enlarged ."], ["the heart size is enlarged ."])
    >>> bleu.astype(int).tolist(), rouge.round(4).tolist()
    ([[5, 6, 5, 3, 1, 0, 5, 4, 3, 2]], [0.8889])
    """
    tokenisations = (_Tokenisation(_BLEU_TOKENS[bleu_implementation]), _Tokenisation("rouge"))
    n = len(predictions)
    bleu = np.zeros((n, 2 + 2 * MAX_ORDER), dtype=np.float64)
    rouge = np.zeros(n, dtype=np.float64)

    def chunk(start: int, hyp_chunk: Any, ref_chunk: Any) -> None:
        stop = start + len(hyp_chunk)
        (hyp, hyp_rouge), (ref, ref_rouge) = _chunk_tokens(hyp_chunk, tokenisations), _chunk_tokens(ref_chunk, tokenisations)
        h_len, r_len = np.diff(hyp[1]), np.diff(ref[1])
        block = bleu[start:stop]
        block[:, 0], block[:, 1] = h_len, r_len
        block[:, 2 : 2 + MAX_ORDER] = _pairwise(hyp, ref, "ngrams")
        block[:, 2 + MAX_ORDER :] = np.maximum(0, h_len[:, None] - np.arange(MAX_ORDER)[None, :])
        h_len, r_len = np.diff(hyp_rouge[1]), np.diff(ref_rouge[1])
        lcs = _pairwise(hyp_rouge, ref_rouge, "lcs").astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            precision, recall = lcs / h_len, lcs / r_len
            f = 2 * precision * recall / (precision + recall)
        rouge[start:stop] = np.where(lcs > 0, f, 0.0)

    starts = range(0, n, _CHUNK_ROWS)
    pairs = zip(starts, _chunks(predictions, _CHUNK_ROWS), _chunks(references, _CHUNK_ROWS))
    workers = min(_workers(), len(starts))
    if workers <= 1:
        for start, hyp_chunk, ref_chunk in pairs:
            chunk(start, hyp_chunk, ref_chunk)
    else:
        # chunks are independent (numpy and Arrow release the GIL; the tokenisers' shared
        # vocabularies are locked); at most ``workers`` chunks are in flight, bounding memory
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        with ThreadPoolExecutor(workers) as pool:
            pending: set[Any] = set()
            for start, hyp_chunk, ref_chunk in pairs:
                if len(pending) >= workers:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()
                pending.add(pool.submit(chunk, start, hyp_chunk, ref_chunk))
            for future in pending:
                future.result()
    return bleu, rouge


def _workers() -> int:
    """Threads for :func:`corpus_statistics`: ``SHOVIR_NLG_THREADS`` (default 1; ``0`` = the usable
    cores, at most 8). Chunks are independent and the numbers do not depend on the thread count;
    the default stays at one thread so that parallel jobs (accelerate ranks, a SLURM array) do not
    oversubscribe the cores they share."""
    configured = os.environ.get("SHOVIR_NLG_THREADS", "1").strip() or "1"
    try:
        threads = int(configured)
    except ValueError:
        raise ValueError(f"SHOVIR_NLG_THREADS: expected an integer (0 = all cores), got {configured!r}") from None
    if threads > 0:
        return threads
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def _bleu_statistics(predictions: Sequence[str], references: Sequence[str], max_order: int) -> np.ndarray:
    """sacrebleu's ``_extract_corpus_statistics`` layout for ``max_order`` (kept for callers)."""
    bleu, _ = corpus_statistics(predictions, references, "sacrebleu")
    return np.concatenate([bleu[:, :2], bleu[:, 2 : 2 + max_order], bleu[:, 2 + MAX_ORDER : 2 + MAX_ORDER + max_order]], axis=1)


# -- BLEU formulas --------------------------------------------------------------------------------


def _columns(stats: np.ndarray, max_order: int, layout_order: int) -> tuple[np.ndarray, ...]:
    return (stats[:, 0], stats[:, 1], stats[:, 2 : 2 + max_order], stats[:, 2 + layout_order : 2 + layout_order + max_order])


def bleu_from_statistics(statistics: np.ndarray, max_order: int, implementation: str = "sacrebleu") -> np.ndarray:
    """Corpus BLEU (0–1) from summed sufficient statistics, one row per corpus (resample).

    Columns: ``sys_len, ref_len, correct_1..N, total_1..N`` (sacrebleu's layout) with
    ``N = max_order`` or, when there are ``2 + 2·4`` columns, the full 4-order layout of
    :func:`corpus_statistics`. Implements, vectorised over rows, ``sacrebleu.BLEU.compute_bleu``
    with ``smooth_method="exp"`` (``"sacrebleu"``), tensorflow/nmt ``compute_bleu`` without
    smoothing (``"hf"``) or pycocoevalcap's ``BleuScorer.compute_score`` (``"pycocoevalcap"``).

    >>> bleu_from_statistics(np.array([[6, 6, 5, 3, 1, 0, 6, 5, 4, 3]], float), 4).round(6).tolist()
    [0.379918]
    >>> bleu_from_statistics(np.array([[6, 6, 5, 3, 1, 0, 6, 5, 4, 3]], float), 4, "hf").tolist()
    [0.0]
    """
    stats = np.atleast_2d(np.asarray(statistics, dtype=np.float64))
    layout = MAX_ORDER if stats.shape[1] == 2 + 2 * MAX_ORDER else max_order
    sys_len, ref_len, correct, total = _columns(stats, max_order, layout)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if implementation == "sacrebleu":
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
        if implementation == "hf":
            precision = np.where(total > 0, correct / np.where(total > 0, total, 1), 0.0)
            log_sum = np.zeros(stats.shape[0])
            for n in range(max_order):
                log_sum = log_sum + (1.0 / max_order) * np.log(precision[:, n])
            geo_mean = np.where(precision.min(axis=1) > 0, np.exp(log_sum), 0.0)
            ratio = sys_len / np.where(ref_len > 0, ref_len, 1)
            brevity = np.where((ref_len == 0) | (sys_len == 0), 0.0, np.where(ratio > 1.0, 1.0, np.exp(1 - 1.0 / ratio)))
            return geo_mean * brevity
        if implementation == "pycocoevalcap":
            product = np.ones(stats.shape[0])
            for n in range(max_order):
                product = product * ((correct[:, n] + _TINY) / (total[:, n] + _SMALL))
            score = product ** (1.0 / max_order)
            ratio = (sys_len + _TINY) / (ref_len + _SMALL)
            return np.where(ratio < 1, score * np.exp(1 - 1 / ratio), score)
    raise ValueError(f"implementation: expected one of {', '.join(map(repr, BLEU_IMPLEMENTATIONS))}, got {implementation!r}")


def bleu_score(statistics: Sequence[float], max_order: int, implementation: str = "sacrebleu") -> float:
    """Corpus BLEU (0–1) from one row of summed statistics. For ``"hf"`` and ``"pycocoevalcap"``
    the arithmetic is the library's own, in the same order, so the number is the library's to the
    last bit; sacrebleu computes on 0–100, and its ``score / 100`` agrees to within 1e-15.

    >>> bleu_score([5, 6, 5, 3, 1, 0, 5, 4, 3, 2], 1, "hf"), round(bleu_score([5, 6, 5, 3, 1, 0, 5, 4, 3, 2], 1), 4)
    (0.8187307530779819, 0.8187)
    >>> bleu_score([5, 6, 5, 3, 1, 0, 5, 4, 3, 2], 4, "hf")  # no 4-gram matches, no smoothing
    0.0
    """
    stats = [float(v) for v in statistics]
    layout = MAX_ORDER if len(stats) == 2 + 2 * MAX_ORDER else max_order
    sys_len, ref_len = stats[0], stats[1]
    correct = [int(v) for v in stats[2 : 2 + max_order]]
    total = [int(v) for v in stats[2 + layout : 2 + layout + max_order]]
    if implementation == "sacrebleu":
        # sacrebleu works on 0-100 (``100 * BP * exp(mean log(100 p_n))``); on 0-1 directly, an
        # exact match scores 1.0 rather than 1.0000000000000004, within 1e-15 of score / 100
        row = np.array([[sys_len, ref_len, *correct, *total]], dtype=np.float64)
        return float(bleu_from_statistics(row, max_order, "sacrebleu")[0])
    if implementation == "hf":
        precisions = [correct[i] / total[i] if total[i] > 0 else 0.0 for i in range(max_order)]
        geo_mean = math.exp(sum((1.0 / max_order) * math.log(p) for p in precisions)) if min(precisions) > 0 else 0
        if ref_len == 0 or sys_len == 0:
            brevity = 0.0
        else:
            ratio = float(sys_len) / ref_len
            brevity = 1.0 if ratio > 1.0 else math.exp(1 - 1.0 / ratio)
        return float(geo_mean * brevity)
    if implementation == "pycocoevalcap":
        product = 1.0
        for i in range(max_order):
            product *= float(correct[i] + _TINY) / (total[i] + _SMALL)
        score = product ** (1.0 / max_order)
        ratio = (sys_len + _TINY) / (ref_len + _SMALL)
        return float(score * math.exp(1 - 1 / ratio) if ratio < 1 else score)
    raise ValueError(f"implementation: expected one of {', '.join(map(repr, BLEU_IMPLEMENTATIONS))}, got {implementation!r}")


def bleu_signature(implementation: str = "sacrebleu") -> str:
    """The settings behind the BLEU numbers, as a sacrebleu-style signature.

    >>> bleu_signature("pycocoevalcap")
    'bleu:pycocoevalcap|nrefs:1|case:mixed|tok:whitespace|smooth:none|reflen:closest|orders:1,4|scale:0-1'
    """
    if implementation == "sacrebleu":
        version = getattr(_require("sacrebleu"), "__version__", "unknown")
        return f"bleu:sacrebleu|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|orders:1,4|scale:0-1|version:{version}"
    if implementation == "hf":
        return "bleu:hf-evaluate|nrefs:1|case:mixed|tok:13a|smooth:none|reflen:shortest|orders:1,4|scale:0-1|impl:tensorflow-nmt"
    if implementation == "pycocoevalcap":
        return "bleu:pycocoevalcap|nrefs:1|case:mixed|tok:whitespace|smooth:none|reflen:closest|orders:1,4|scale:0-1"
    raise ValueError(f"bleu_implementation: expected one of {', '.join(map(repr, BLEU_IMPLEMENTATIONS))}, got {implementation!r}")


def rouge_signature() -> str:
    """The ROUGE-L settings, as a signature (rouge-score's version when it is installed).

    >>> rouge_signature().startswith("rouge:rouge-score|type:rougeL|stem:no|agg:mean-f")
    True
    """
    try:
        from importlib.metadata import version

        installed = version("rouge-score")
    except Exception:  # pragma: no cover - metadata missing
        installed = "unknown"
    return f"rouge:rouge-score|type:rougeL|stem:no|agg:mean-f|scale:0-1|version:{installed}"


# -- the metric -----------------------------------------------------------------------------------


def nlg_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    *,
    bleu_implementation: str = "sacrebleu",
    confidence: float = 0.95,
) -> dict[str, Any]:
    """BLEU-1, BLEU-4 (corpus) and ROUGE-L (mean F) of generated versus reference reports, 0–1
    (ShoViR Table 1 text metrics; BLEU: Papineni et al. 2002 §2.1–2.3; ROUGE-L: Lin 2004 §3).

    ``bleu_implementation`` reproduces ``"sacrebleu"`` (default), evaluate's ``"hf"`` bleu or
    ``"pycocoevalcap"`` (see the module docstring); ``bleu_signature`` and ``rouge_signature``
    say which settings produced the numbers. With ``n_resamples > 0`` the ``ci`` entries are
    percentile bootstrap intervals over reports, or over ``clusters`` (e.g. patient ids).

    >>> out = nlg_scores(["the heart is enlarged"], ["the heart is enlarged"])
    >>> out["bleu_1"], out["bleu_4"], out["rouge_l"]
    (1.0, 1.0, 1.0)
    >>> nlg_scores(["the heart is enlarged ."], ["the heart size is enlarged ."], bleu_implementation="hf")["bleu_4"]
    0.0
    """
    _check_options(n_resamples, seed, confidence, bleu_implementation)
    predictions = check_texts("predictions", predictions)
    references = check_texts("references", references)
    if len(references) != len(predictions):
        raise ValueError(
            f"references: expected {len(predictions)} reports, one per prediction, got {len(references)}; "
            "pair each generated report with its reference"
        )
    groups = None if clusters is None else _checks.id_list(clusters, "clusters", len(predictions))
    statistics, rouge = corpus_statistics(predictions, references, bleu_implementation)
    totals = statistics.sum(0)
    result: dict[str, Any] = {"n": len(predictions), "ci": {}}
    for name, order in (("bleu_1", 1), ("bleu_4", 4)):
        result[name] = bleu_score(totals, order, bleu_implementation)
        interval = None
        if n_resamples > 0:
            interval = bootstrap_interval(lambda s, o=order: bleu_from_statistics(s, o, bleu_implementation), statistics, groups,
                                          n_resamples, confidence, seed)
        result["ci"][name] = dict(NO_INTERVAL) if interval is None else interval.bounds()
    result["rouge_l"] = float(rouge.mean())
    interval = None
    if n_resamples > 0:
        interval = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], np.stack([rouge, np.ones_like(rouge)], 1), groups,
                                      n_resamples, confidence, seed)
    result["ci"]["rouge_l"] = dict(NO_INTERVAL) if interval is None else interval.bounds()
    result["bleu_signature"] = bleu_signature(bleu_implementation)
    result["rouge_signature"] = rouge_signature()
    return {key: result[key] for key in ("bleu_1", "bleu_4", "rouge_l", "n", "ci", "bleu_signature", "rouge_signature")}


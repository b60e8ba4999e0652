"""The rule-based labeler on the hand-checked evaluation set ``tests/data/labeler_eval_sentences.jsonl``.

Every line of the set is one sentence (or a short report) in the style of public chest X-ray
reports — MIMIC-CXR / IU X-ray / CheXpert findings and impressions: normal studies, negated lists,
hedges, comparisons with priors, devices, post-operative changes, typos and de-identification
placeholders ("XXXX", "___") — with its expected 14 codes, written by hand from the CheXpert
labeler's phrase conventions (docs/labeler_conventions.md), and a one-line reason. The labeler
was never run to produce them. One test case per sentence, named by its id, so a failure names
the sentence and shows the labeler's explanation.

Format, one JSON object per line::

    {"id": "neglist-001", "text": "...", "codes": {"Pleural Effusion": 2, "No Finding": 1}, "reason": "..."}

``codes`` lists every non-blank code by class name (blank classes are left out; No Finding is
listed only when it is 1), or holds the full 14-code list in :data:`shovir.labels.CLASSES` order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shovir.labelers.rule_based import RuleBasedLabeler
from shovir.labels import CLASSES, NUM_CLASSES, codes_from_mentions

EVAL_SET = Path(__file__).resolve().parent / "data" / "labeler_eval_sentences.jsonl"
PATHOLOGIES = CLASSES[:CLASSES.index("Support Devices")]  # the classes that rule out No Finding


def load_eval_set(path: Path = EVAL_SET) -> list[dict]:
    """The rows of the evaluation set, each with ``codes`` expanded to the full 14-code list."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        codes = row["codes"]
        row["codes"] = list(codes) if isinstance(codes, list) else codes_from_mentions(codes)
        row["line"] = number
        rows.append(row)
    return rows


ROWS = load_eval_set()


def test_eval_set_is_large_well_formed_and_covers_every_class() -> None:
    assert len(ROWS) >= 400
    ids = [row["id"] for row in ROWS]
    texts = [row["text"] for row in ROWS]
    assert len(set(ids)) == len(ids), "duplicate ids"
    assert len(set(texts)) == len(texts), "duplicate sentences"
    for row in ROWS:
        where = f"line {row['line']} ({row['id']})"
        assert set(row) == {"id", "text", "codes", "reason", "line"}, where
        assert row["text"].strip() and row["reason"].strip() and "\n" not in row["reason"], where
        codes = row["codes"]
        assert len(codes) == NUM_CLASSES and all(code in (0, 1, 2, 3) for code in codes), where
        # the CheXpert No Finding rule: 1 only when no pathology is positive or uncertain; never 2 or 3
        affirmed = any(codes[CLASSES.index(name)] in (1, 3) for name in PATHOLOGIES)
        assert codes[-1] in (0, 1) and not (affirmed and codes[-1] == 1), where
    for c, name in enumerate(CLASSES[:-1]):
        seen = {row["codes"][c] for row in ROWS}
        assert {1, 2, 3} <= seen or (name == "Support Devices" and {1, 2} <= seen), f"{name}: codes {seen}"
    assert sum(row["codes"][-1] == 1 for row in ROWS) >= 100


@pytest.fixture(scope="module")
def labeler() -> RuleBasedLabeler:
    return RuleBasedLabeler()


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_sentence(labeler: RuleBasedLabeler, row: dict) -> None:
    got = labeler.label(row["text"])
    want = row["codes"]
    if got != want:
        def named(codes: list[int]) -> dict[str, int]:
            return {CLASSES[i]: c for i, c in enumerate(codes) if c}

        explanation = "\n".join(f"    {d}" for d in labeler.explain(row["text"]))
        pytest.fail(f"{row['id']}: {row['text']!r}\n  reason: {row['reason']}\n  got  {named(got)}\n"
                    f"  want {named(want)}\n  explanation:\n{explanation}")


def test_batch_agrees_with_one_by_one(labeler: RuleBasedLabeler) -> None:
    batch = labeler([row["text"] for row in ROWS]).tolist()
    assert batch == [labeler.label(row["text"]) for row in ROWS]

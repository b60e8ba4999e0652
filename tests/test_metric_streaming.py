"""Every evaluate module gives the same result through ``compute``, ``add`` (row by row),
``add_batch`` (uneven batches) and ``evaluate.combine`` -- every per-sample input included:
target classes, blank answers, margins, options, clusters, ids, benchmarks (issue 8, item 1).

Each case also checks the module against the ``shovir.metrics`` function it wraps, and uses
inputs whose optional columns change the result (so a dropped column cannot go unnoticed).
"""

from __future__ import annotations

import numpy as np
import pytest

evaluate = pytest.importorskip("evaluate")

from shovir import metrics as M  # noqa: E402
from shovir.evaluate_modules import modules_root  # noqa: E402
from shovir.labelers import get_labeler  # noqa: E402

ROOT = modules_root()
N = 9
BATCHES = [(0, 1), (1, 5), (5, 6), (6, N)]  # uneven, one of a single row
RNG = np.random.default_rng(7)
CODES = RNG.choice(4, size=(3, N, 14), p=[0.4, 0.35, 0.15, 0.1]).tolist()
TARGETS = ["Cardiomegaly", "Edema", "Pleural Effusion"] * 3
CLUSTERS = ["p1", "p1", "p2", "p3", "p3", "p3", "p4", "p5", "p5"]
IDS = [f"s{i}" for i in range(N)]


def _load(name: str):
    return evaluate.load(str(ROOT / name))


def _row(columns: dict, index: int) -> dict:
    return {name: values[index] for name, values in columns.items()}


def _batch(columns: dict, start: int, stop: int) -> dict:
    return {name: values[start:stop] for name, values in columns.items()}


def _all_paths(name: str, columns: dict, settings: dict) -> dict:
    """compute, add row by row and add_batch in uneven batches: the same result; returns it."""
    expected = _load(name).compute(**columns, **settings)
    module = _load(name)
    for index in range(N):
        module.add(**_row(columns, index))
    assert module.compute(**settings) == expected, "add"
    module = _load(name)
    for start, stop in BATCHES:
        module.add_batch(**_batch(columns, start, stop))
    assert module.compute(**settings) == expected, "add_batch"
    # the instance is reusable: a second computation starts from nothing
    module.add_batch(**columns)
    assert module.compute(**settings) == expected, "reuse"
    return expected


CLINICAL = {
    "chexbert_f1": (dict(predictions=CODES[0], references=CODES[1], clusters=CLUSTERS),
                    lambda c, **s: M.chexbert_f1(c["references"], c["predictions"], clusters=c["clusters"], **s)),
    "delta_fn": (dict(references=CODES[0], baseline_predictions=CODES[1], predictions=CODES[2], clusters=CLUSTERS,
                      sample_ids=IDS, noise_sample_ids=IDS),
                 lambda c, **s: M.delta_fn(c["references"], c["baseline_predictions"], c["predictions"], clusters=c["clusters"],
                                           sample_ids=c["sample_ids"], noise_sample_ids=c["noise_sample_ids"], **s)),
    "flip_rate": (dict(references=CODES[0], control_predictions=CODES[1], predictions=CODES[2], target_classes=TARGETS,
                       clusters=CLUSTERS, sample_ids=IDS, control_sample_ids=IDS),
                  lambda c, **s: M.flip_rate(c["references"], c["control_predictions"], c["predictions"], c["target_classes"],
                                             clusters=c["clusters"], sample_ids=IDS, control_sample_ids=IDS, **s)),
    "occlusion_delta": (dict(references=CODES[0], control_predictions=CODES[1], predictions=CODES[2], target_classes=TARGETS,
                             clusters=CLUSTERS, sample_ids=IDS, control_sample_ids=IDS),
                        lambda c, **s: M.occlusion_delta(c["references"], c["control_predictions"], c["predictions"],
                                                         c["target_classes"], clusters=c["clusters"], sample_ids=IDS,
                                                         control_sample_ids=IDS, **s)),
}
CLINICAL_SETTINGS = dict(n_resamples=40, seed=3, uncertain="positive")


@pytest.mark.parametrize("name", list(CLINICAL))
def test_clinical_modules_stream_every_input(name):
    columns, function = CLINICAL[name]
    result = _all_paths(name, columns, CLINICAL_SETTINGS)
    assert result == function(columns, **CLINICAL_SETTINGS)
    assert any(v["low"] is not None for v in result["ci"].values())  # the clustered interval was computed


def test_flip_rate_without_its_optional_inputs_streams_too():
    columns = dict(references=CODES[0], control_predictions=CODES[1], predictions=CODES[2])
    result = _all_paths("flip_rate", columns, {})
    assert result == M.flip_rate(CODES[0], CODES[1], CODES[2])
    # and the target classes matter on these inputs: a dropped column could not hide
    assert result["denominators"] != M.flip_rate(CODES[0], CODES[1], CODES[2], TARGETS)["denominators"]


def test_the_issue_s_flip_rate_add_batch_with_target_classes():
    cardiomegaly, negated = [0, 1] + [0] * 12, [0, 2] + [0] * 12
    flip_rate = _load("flip_rate")
    flip_rate.add_batch(references=[cardiomegaly] * 2, control_predictions=[cardiomegaly] * 2, predictions=[negated, cardiomegaly],
                        target_classes=["Cardiomegaly", "Cardiomegaly"])
    out = flip_rate.compute()
    assert out["flip_rate"] == 0.5 and out["denominators"] == {"Cardiomegaly": 2}


def test_combine_flip_rate_and_occlusion_delta_keeps_target_classes_and_clusters():
    columns, _ = CLINICAL["flip_rate"]
    flip = M.flip_rate(CODES[0], CODES[1], CODES[2], TARGETS, clusters=CLUSTERS, **CLINICAL_SETTINGS)
    delta = M.occlusion_delta(CODES[0], CODES[1], CODES[2], TARGETS, clusters=CLUSTERS, **CLINICAL_SETTINGS)
    one_shot = evaluate.combine([_load("flip_rate"), _load("occlusion_delta")]).compute(**columns, **CLINICAL_SETTINGS)
    for add in ("add", "add_batch"):
        combined = evaluate.combine([_load("flip_rate"), _load("occlusion_delta")])
        if add == "add":
            for index in range(N):
                combined.add(**_row(columns, index))
        else:
            for start, stop in BATCHES:
                combined.add_batch(**_batch(columns, start, stop))
        out = combined.compute(**CLINICAL_SETTINGS)
        assert out == one_shot
        assert out["flip_rate"] == flip["flip_rate"] and out["denominators"] == flip["denominators"]
        assert out["flip_rate_ci"] == flip["ci"] and out["occlusion_delta_ci"] == delta["ci"]
        assert out["delta"] == delta["delta"]


def test_combine_chexbert_f1_and_delta_fn():
    columns, _ = CLINICAL["delta_fn"]
    combined = evaluate.combine([_load("chexbert_f1"), _load("delta_fn")])
    for start, stop in BATCHES:
        combined.add_batch(**_batch(columns, start, stop))
    out = combined.compute(**CLINICAL_SETTINGS)
    chexbert = M.chexbert_f1(CODES[0], CODES[2], clusters=CLUSTERS, **CLINICAL_SETTINGS)
    assert out["f1_14"] == chexbert["f1_14"] and out["chexbert_f1_ci"] == chexbert["ci"]
    assert out["f1_14_micro"] == M.delta_fn(CODES[0], CODES[1], CODES[2], **CLINICAL_SETTINGS)["f1_14_micro"]


REPORTS = ["Small left effusion.", "No effusion.", "Mild cardiomegaly.", "The heart is normal in size.",
           "Possible pneumonia.", "No acute cardiopulmonary process.", "Moderate pulmonary edema.",
           "Left lower lobe atelectasis.", "Right pneumothorax."]


def test_report_texts_stream_and_equal_their_labels():
    references = list(reversed(REPORTS))
    codes = get_labeler("rule")
    expected = M.chexbert_f1(codes(references), codes(REPORTS))
    columns = dict(predictions=REPORTS, references=references)
    assert _all_paths("chexbert_f1", columns, {}) == expected
    # texts and codes may differ between inputs (flip_rate: dataset labels vs generated reports)
    flip = _load("flip_rate")
    for start, stop in BATCHES:
        flip.add_batch(references=CODES[0][start:stop], control_predictions=REPORTS[start:stop],
                       predictions=references[start:stop], target_classes=TARGETS[start:stop])
    assert flip.compute() == M.flip_rate(CODES[0], codes(REPORTS), codes(references), TARGETS)
    # a labeler object with the interface, given at load time, works through add
    module = evaluate.load(str(ROOT / "chexbert_f1"), labeler=codes)
    for index in range(N):
        module.add(prediction=REPORTS[index], reference=references[index])
    assert module.compute() == expected


def test_one_labeler_per_computation():
    module = _load("chexbert_f1")
    module.add_batch(predictions=REPORTS[:2], references=REPORTS[2:4])
    with pytest.raises(ValueError, match="labeler: the rows were labelled by 'rule'"):
        module.compute(labeler=lambda reports: np.zeros((len(reports), 14), dtype=np.int8))


VQA_REAL = ["yes", "no", "B", "left lung", "yes", "no", "Axial", "yes", "no"]
VQA_SHUF = ["yes", "yes", "A", "right lung", "no", "no", "Coronal", "Yes.", "yes"]
VQA_BLANK = ["no", "no", "B", "left lung", "yes", "yes", "Axial", "no", "no"]
VQA_REFS = ["yes", "no", "Coronal", "left lung", "no", "no", "Axial", "yes", "yes"]
VQA_OPTS = [None, None, ["Axial", "Coronal"], None, None, None, ["Axial", "Coronal"], None, None]
SHUFFLED_ORDER = [3, 0, 8, 1, 2, 7, 4, 6, 5]


def _shuffled_by_id(values):
    return [values[i] for i in SHUFFLED_ORDER]


def test_visual_reliance_streams_blank_answers_options_ids_and_clusters():
    columns = dict(predictions_real=VQA_REAL, predictions_shuffled=_shuffled_by_id(VQA_SHUF), references=VQA_REFS,
                   predictions_blank=VQA_BLANK, options=VQA_OPTS, sample_ids=IDS, sample_ids_shuffled=_shuffled_by_id(IDS),
                   sample_ids_blank=IDS, clusters=CLUSTERS)
    settings = dict(n_resamples=50, n_permutations=99, seed=1, confidence=0.9)
    result = _all_paths("visual_reliance", columns, settings)
    assert result == M.visual_reliance(VQA_REAL, VQA_SHUF, VQA_REFS, VQA_BLANK, VQA_OPTS, clusters=CLUSTERS, **settings)
    assert result["accuracy_blank"] is not None and result["p_values"]["blank_drop"] is not None


RATIONALES = ["A spiculated mass is visible.", "The answer follows.", "Severe edema on the left.", "Patchy opacity.",
              "Cannot say.", "Mild effusion.", "There is a mass in the left lung.", "Large opacity.", "No idea."]
QUESTIONS = ["Is there a mass?", "Is it benign?", "Is there edema?", "What is seen?", "Is it normal?", "Is there effusion?",
             "Is there a mass in the left lung?", "What is seen?", "Is it normal?"]
BENCHMARKS = ["PathVQA", "SLAKE", "SLAKE", "VQA-RAD", "PathVQA", "VQA-RAD", "SLAKE", "PathVQA", "VQA-RAD"]


def test_hvrr_streams_references_benchmarks_options_ids_and_clusters():
    columns = dict(rationales=RATIONALES, questions=QUESTIONS, predictions_real=VQA_REAL,
                   predictions_shuffled=_shuffled_by_id(VQA_SHUF), references=VQA_REFS, options=VQA_OPTS, sample_ids=IDS,
                   sample_ids_shuffled=_shuffled_by_id(IDS), clusters=CLUSTERS, benchmarks=BENCHMARKS)
    settings = dict(n_resamples=50, seed=2, max_ngram=4)
    result = _all_paths("hvrr", columns, settings)
    assert result == M.hallucination_metrics(RATIONALES, QUESTIONS, VQA_REAL, VQA_SHUF, VQA_REFS, VQA_OPTS, clusters=CLUSTERS,
                                             benchmarks=BENCHMARKS, **settings)
    assert result["n_benchmarks"] == 3 and set(result["per_benchmark"]) == {"PathVQA", "SLAKE", "VQA-RAD"}


def test_combine_visual_reliance_and_hvrr():
    columns = dict(rationales=RATIONALES, questions=QUESTIONS, predictions_real=VQA_REAL, predictions_shuffled=VQA_SHUF,
                   references=VQA_REFS, predictions_blank=VQA_BLANK, options=VQA_OPTS, sample_ids=None,
                   sample_ids_shuffled=None, sample_ids_blank=None, clusters=CLUSTERS, benchmarks=None)
    combined = evaluate.combine([_load("visual_reliance"), _load("hvrr")])
    for start, stop in BATCHES:
        combined.add_batch(**{k: (None if v is None else v[start:stop]) for k, v in columns.items()})
    out = combined.compute(n_resamples=30, seed=4)
    reliance = M.visual_reliance(VQA_REAL, VQA_SHUF, VQA_REFS, VQA_BLANK, VQA_OPTS, clusters=CLUSTERS, n_resamples=30, seed=4)
    hallucination = M.hallucination_metrics(RATIONALES, QUESTIONS, VQA_REAL, VQA_SHUF, VQA_REFS, VQA_OPTS, clusters=CLUSTERS,
                                            n_resamples=30, seed=4)
    assert out["vrs"] == reliance["vrs"] and out["visual_reliance_ci"] == reliance["ci"]
    assert out["hvrr"] == hallucination["hvrr"] and out["hvrr_ci"] == hallucination["ci"]


SWAP = dict(
    original_answers=["yes", "no", "yes", "no", "yes", "no", "yes", "no"],
    swapped_answers=["yes", "no", "Yes.", "yes", "no", "no", "no", "yes"],
    arms=["with_report"] * 4 + ["without_report"] * 4,
    trial_ids=["t1", "t2", "t3", "t4"] * 2,
    patient_ids=["p1", "p1", "p2", "p3"] * 2,
    margins_original=[2.0, -1.0, 1.0, -0.5, 1.5, -2.0, 0.5, -1.0],
    margins_swapped=[1.0, -1.25, 0.25, 0.5, -1.0, -1.0, -0.5, 1.0],
    options=[["yes", "no"]] * 8,
)


def test_swap_sensitivity_streams_margins_and_options():
    rows = SWAP
    settings = dict(n_resamples=60, seed=5, confidence=0.8, margin_threshold=0.6)
    expected = _load("swap_sensitivity").compute(**rows, **settings)
    module = _load("swap_sensitivity")
    for index in range(8):
        module.add(**_row(rows, index))
    assert module.compute(**settings) == expected
    module = _load("swap_sensitivity")
    for start, stop in [(0, 3), (3, 4), (4, 8)]:
        module.add_batch(**_batch(rows, start, stop))
    assert module.compute(**settings) == expected
    function = M.swap_sensitivity(**rows, **settings)
    assert expected == function and expected["mean_abs_margin_change_with_report"] is not None
    combined = evaluate.combine({"first": _load("swap_sensitivity"), "second": _load("swap_sensitivity")})
    combined.add_batch(**rows)
    out = combined.compute(**settings)
    assert out["first_flip_rate_without_report"] == out["second_flip_rate_without_report"] == function["flip_rate_without_report"]
    assert out["first_ci"] == function["ci"]


def test_an_optional_input_given_in_some_batches_only_is_named():
    module = _load("visual_reliance")
    module.add_batch(predictions_real=["yes"], predictions_shuffled=["no"], references=["yes"], predictions_blank=["no"])
    module.add_batch(predictions_real=["no"], predictions_shuffled=["no"], references=["yes"])
    with pytest.raises(ValueError, match=r"predictions_blank: row 1 has no value but other rows do"):
        module.compute(n_resamples=0, n_permutations=0)
    module = _load("flip_rate")
    module.add(reference=[0, 1] + [0] * 12, control_predictions=[0, 1] + [0] * 12, prediction=[0] * 14, target_classes="Edema")
    module.add(reference=[0, 1] + [0] * 12, control_predictions=[0, 1] + [0] * 12, prediction=[0] * 14)
    with pytest.raises(ValueError, match=r"target_classes: row 1 has no value"):
        module.compute()


def test_batches_larger_than_a_write_slice_stream_absent_inputs_and_shared_options(monkeypatch):
    from shovir.metrics import _checks

    monkeypatch.setattr(_checks, "_WRITE_ROWS", 4)  # N = 9 rows: three slices, the last of one row
    settings = dict(n_resamples=20, n_permutations=19, seed=6)
    shared = ["yes", "no"]  # option letters: "A" is "yes"
    real = ["A", "no", "yes", "B", "yes", "no", "A", "yes", "no"]
    shuffled = ["yes", "B", "A", "no", "no", "no", "yes", "Yes.", "B"]
    references = ["yes", "no", "yes", "no", "no", "no", "yes", "yes", "yes"]
    columns = dict(predictions_real=real, predictions_shuffled=shuffled, references=references, options=shared)
    expected = M.visual_reliance(real, shuffled, references, options=shared, **settings)
    assert expected["accuracy_blank"] is None and expected != M.visual_reliance(real, shuffled, references, **settings)
    assert _load("visual_reliance").compute(**columns, **settings) == expected
    module = _load("visual_reliance")
    for start, stop in BATCHES:  # one list of strings: the options of every row of the batch
        module.add_batch(**_batch({k: v for k, v in columns.items() if k != "options"}, start, stop), options=shared)
    assert module.compute(**settings) == expected
    for index in range(N):
        module.add(**_row({k: v for k, v in columns.items() if k != "options"}, index), options=shared)
    assert module.compute(**settings) == expected
    swap = {key: value for key, value in SWAP.items() if not key.startswith("margins")}
    out = _load("swap_sensitivity").compute(**swap, n_resamples=30, seed=1)
    assert out == M.swap_sensitivity(**swap, n_resamples=30, seed=1) and out["mean_abs_margin_change_with_report"] is None


def test_string_columns_read_back_one_str_per_distinct_value():
    import pyarrow as pa

    from shovir.metrics._checks import StreamingModule

    values = ["t1", "t2", None, "t1", "t3", "t2"] * 50
    column = pa.chunked_array([pa.array(values[i : i + 7], pa.string()) for i in range(0, len(values), 7)])
    out = StreamingModule._pylist(column)
    assert len(out) == len(values) and list(out) == values and out[1:5] == values[1:5] and out[-1] == "t2"
    assert len({id(value) for value in out if value is not None}) == 3  # each distinct id is one str
    distinct = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c"])])
    assert StreamingModule._pylist(distinct) == ["a", "b", "c"]  # all distinct: the dictionary, a list
    assert StreamingModule._pylist(pa.chunked_array([pa.array([0.5, -1.0])])) == [0.5, -1.0]
    assert StreamingModule._pylist(None) is None


def test_options_read_back_as_one_shared_list_when_every_row_has_it():
    import pyarrow as pa

    from shovir.metrics._checks import StreamingModule

    def column(rows):
        return pa.chunked_array([pa.array(rows[:2], pa.list_(pa.string())), pa.array(rows[2:], pa.list_(pa.string()))])

    assert StreamingModule._options(column([["yes", "no"]] * 5)) == ["yes", "no"]
    mixed = StreamingModule._options(column([["a", "b"], None, ["a", "b"], ["c", "d"], ["a", "b"]]))
    assert mixed == [["a", "b"], None, ["a", "b"], ["c", "d"], ["a", "b"]] and mixed[0] is mixed[4]
    assert StreamingModule._options(column([None] * 3)) is None
    assert StreamingModule._options(column([[]] * 3)) is None  # empty lists are open questions, as per_item_options reads them

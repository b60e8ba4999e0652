"""CheXbert labeler on a tiny random BERT built at test time (no weights, no network).

The fake ``chexbert.pth`` has the original layout: ``{"epoch", "model_state_dict",
"optimizer_state_dict"}`` with ``module.bert.*`` and ``module.linear_heads.N.*`` keys, saved in
torch's legacy (pre-1.6) serialisation like the 2020 checkpoint.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from shovir import labels as L  # noqa: E402
from shovir.labelers import get_labeler  # noqa: E402
from shovir.labelers.chexbert import (  # noqa: E402
    BERT_ENV,
    CHECKPOINT_ENV,
    CheXbertLabeler,
    chexbert_token_ids,
    clean_report,
)

# vocab index = position in this list
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",  # 0-4
    "no", "acute", "cardio", "##pul", "##monary",  # 5-9
    "process", ".", "small", "left", "pleural",  # 10-14
    "eff", "##usion", "heart", "size", "is",  # 15-19
    "normal", ",", "mild", "edema", "possible",  # 20-24
    "pneumonia", "tube", "a", "b", "right",  # 25-29
]
ID = {token: index for index, token in enumerate(VOCAB)}
HIDDEN = 32

REPORTS = [
    "No acute cardiopulmonary process.",
    " Small left\n\n pleural   effusion, ",
    "",
    "Possible pneumonia. Mild edema.",
    "heart size is normal",
    "right pleural effusion. tube. " * 12,
    "XYZ unknown words",
    "edema",
    "a b a b a b",
]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-bert-base-uncased")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512,
    )
    config.save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    return folder


def _fake_state_dict(bert_dir: Path, seed: int = 0) -> "OrderedDict[str, torch.Tensor]":
    """CheXbert's key layout, built without shovir's model class."""
    torch.manual_seed(seed)
    config = transformers.BertConfig.from_pretrained(str(bert_dir))
    bert = transformers.BertModel(config)  # with pooler, as bert_labeler's BertModel
    state: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in bert.state_dict().items():
        state[f"module.bert.{key}"] = value.clone()
    generator = torch.Generator().manual_seed(seed + 1)
    for head in range(14):
        outputs = 4 if head < 13 else 2
        state[f"module.linear_heads.{head}.weight"] = torch.randn(outputs, HIDDEN, generator=generator) * 2.0
        state[f"module.linear_heads.{head}.bias"] = torch.randn(outputs, generator=generator)
    return state


def _save_checkpoint(path: Path, state: dict, legacy: bool = True) -> Path:
    parameters = [torch.nn.Parameter(v.float().clone()) for k, v in state.items() if v.is_floating_point()][:3]
    optimizer = torch.optim.Adam(parameters)
    sum(p.sum() for p in parameters).backward()
    optimizer.step()
    payload = {"epoch": 1, "model_state_dict": state, "optimizer_state_dict": optimizer.state_dict()}
    torch.save(payload, path, _use_new_zipfile_serialization=not legacy)
    return path


@pytest.fixture(scope="module")
def checkpoint(bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save_checkpoint(tmp_path_factory.mktemp("ckpt") / "chexbert.pth", _fake_state_dict(bert_dir))


@pytest.fixture(scope="module")
def labeler(checkpoint: Path, bert_dir: Path) -> CheXbertLabeler:
    return CheXbertLabeler(checkpoint, bert_dir, device="cpu", batch_size=4)


# -- tokenisation -------------------------------------------------------------------------------


def test_token_ids_match_the_original_procedure_by_hand(labeler: CheXbertLabeler):
    cls, sep, unk = ID["[CLS]"], ID["[SEP]"], ID["[UNK]"]
    assert labeler.token_ids(["No acute cardiopulmonary process."]) == [
        [cls, ID["no"], ID["acute"], ID["cardio"], ID["##pul"], ID["##monary"], ID["process"], ID["."], sep]
    ]
    # strip, newlines -> spaces, collapsed whitespace, lower-casing, punctuation split, word pieces
    assert labeler.token_ids([" Small left\n\n pleural   Effusion, "]) == [
        [cls, ID["small"], ID["left"], ID["pleural"], ID["eff"], ID["##usion"], ID[","], sep]
    ]
    assert labeler.token_ids(["XYZ edema"]) == [[cls, unk, ID["edema"], sep]]
    # empty and whitespace-only reports -> [CLS, SEP]
    assert labeler.token_ids(["", "  \n \t "]) == [[cls, sep], [cls, sep]]


@pytest.mark.parametrize("n_words, expected_len", [(509, 511), (510, 512), (511, 512), (700, 512)])
def test_512_cut_keeps_first_511_ids_then_sep(labeler: CheXbertLabeler, n_words: int, expected_len: int):
    ids = labeler.token_ids(["edema " * n_words])[0]
    assert len(ids) == expected_len
    assert ids[0] == ID["[CLS]"] and ids[-1] == ID["[SEP]"]
    assert ids[1:-1] == [ID["edema"]] * (expected_len - 2)


def test_cut_happens_after_wordpiece_split(labeler: CheXbertLabeler):
    # [CLS] edema + 256 two-piece words = 515 ids; the first 511 end inside a word
    ids = labeler.token_ids(["edema " + "effusion " * 256])[0]
    assert len(ids) == 512
    assert ids[1:6] == [ID["edema"], ID["eff"], ID["##usion"], ID["eff"], ID["##usion"]]
    assert ids[-3:] == [ID["##usion"], ID["eff"], ID["[SEP]"]]


def test_fast_and_python_tokenizers_agree(checkpoint: Path, bert_dir: Path, labeler: CheXbertLabeler):
    fast = CheXbertLabeler(checkpoint, bert_dir, device="cpu", fast_tokenizer=True)
    texts = REPORTS + ["Café CAFÉ", "a\u200bb", "心 heart", "x" * 150, "no [SEP] edema"]
    assert fast.token_ids(texts) == labeler.token_ids(texts)


def test_clean_report_and_function_form(labeler: CheXbertLabeler):
    assert clean_report("\tA\r\nB  C\n") == "A B C"
    assert chexbert_token_ids("edema edema edema", labeler.tokenizer, max_length=4) == [
        ID["[CLS]"], ID["edema"], ID["edema"], ID["[SEP]"]
    ]


def test_reports_must_be_strings(labeler: CheXbertLabeler):
    with pytest.raises(ValueError, match=r"reports\[1\]: expected a string, got float"):
        labeler(["edema", float("nan")])
    with pytest.raises(ValueError, match="single string"):
        labeler("edema")


# -- model --------------------------------------------------------------------------------------


def test_output_shape_dtype_and_code_ranges(labeler: CheXbertLabeler):
    codes = labeler(REPORTS)
    assert codes.shape == (len(REPORTS), 14) and codes.dtype == np.int8
    assert set(np.unique(codes[:, :13])) <= {0, 1, 2, 3}
    assert set(np.unique(codes[:, 13])) <= {0, 1}
    L.validate_codes(codes)
    assert len(set(codes.ravel().tolist())) == 4  # the fixture exercises every code


def test_batched_equals_one_at_a_time(labeler: CheXbertLabeler):
    batched = labeler(REPORTS)
    single = np.concatenate([labeler([report]) for report in REPORTS])
    np.testing.assert_array_equal(batched, single)
    batched_logits = labeler.logits(REPORTS)
    single_logits = [labeler.logits([report]) for report in REPORTS]
    for head in range(14):
        stacked = np.concatenate([logits[head] for logits in single_logits])
        np.testing.assert_allclose(batched_logits[head], stacked, atol=1e-5)


def test_codes_equal_argmax_of_heads_computed_from_the_state_dict(labeler: CheXbertLabeler, checkpoint: Path, bert_dir: Path):
    state = torch.load(checkpoint, weights_only=True)["model_state_dict"]
    config = transformers.BertConfig.from_pretrained(str(bert_dir))
    bert = transformers.BertModel(config).eval()
    bert.load_state_dict({k[len("module.bert."):]: v for k, v in state.items() if k.startswith("module.bert.")})
    report = "Possible pneumonia. Mild edema."
    ids = torch.tensor([labeler.token_ids([report])[0]])
    with torch.no_grad():
        cls = bert(input_ids=ids).last_hidden_state[0, 0]
    expected = [
        int(torch.argmax(state[f"module.linear_heads.{h}.weight"] @ cls + state[f"module.linear_heads.{h}.bias"]))
        for h in range(14)
    ]
    assert labeler([report])[0].tolist() == expected


def test_env_vars_and_registry(checkpoint: Path, bert_dir: Path, monkeypatch: pytest.MonkeyPatch, labeler: CheXbertLabeler):
    monkeypatch.setenv(CHECKPOINT_ENV, str(checkpoint))
    monkeypatch.setenv(BERT_ENV, str(bert_dir))
    from_env = get_labeler("chexbert", device="cpu")
    assert from_env.name == "chexbert"
    np.testing.assert_array_equal(from_env(REPORTS[:3]), labeler(REPORTS[:3]))


def test_missing_configuration_names_the_fix(monkeypatch: pytest.MonkeyPatch, bert_dir: Path, checkpoint: Path, tmp_path: Path):
    monkeypatch.delenv(CHECKPOINT_ENV, raising=False)
    monkeypatch.delenv(BERT_ENV, raising=False)
    with pytest.raises(ValueError, match=f"set {CHECKPOINT_ENV} or pass checkpoint="):
        CheXbertLabeler(bert_dir=bert_dir)
    with pytest.raises(ValueError, match=f"set {BERT_ENV} or pass bert_dir="):
        CheXbertLabeler(checkpoint)
    with pytest.raises(FileNotFoundError, match="does not exist; set SHOVIR_CHEXBERT_CHECKPOINT"):
        CheXbertLabeler(tmp_path / "nope.pth", bert_dir)
    with pytest.raises(FileNotFoundError, match="lacks config.json, vocab.txt"):
        CheXbertLabeler(checkpoint, tmp_path)


# -- strict loading -----------------------------------------------------------------------------


def test_missing_and_unexpected_keys_are_listed(bert_dir: Path, tmp_path: Path):
    state = _fake_state_dict(bert_dir)
    del state["module.linear_heads.13.bias"]
    state["module.extra_head.weight"] = torch.zeros(2, HIDDEN)
    path = _save_checkpoint(tmp_path / "bad.pth", state)
    with pytest.raises(ValueError) as info:
        CheXbertLabeler(path, bert_dir, device="cpu")
    message = str(info.value)
    assert "missing keys: linear_heads.13.bias" in message
    assert "unexpected keys: extra_head.weight" in message


def test_shape_mismatch_is_an_error(bert_dir: Path, tmp_path: Path):
    state = _fake_state_dict(bert_dir)
    state["module.linear_heads.13.weight"] = torch.zeros(4, HIDDEN)  # No Finding head is two-way
    with pytest.raises(ValueError, match=r"linear_heads.13.weight: checkpoint \(4, 32\) vs model \(2, 32\)"):
        CheXbertLabeler(_save_checkpoint(tmp_path / "shape.pth", state), bert_dir, device="cpu")


def test_old_transformers_buffers_are_tolerated_only_with_default_values(bert_dir: Path, tmp_path: Path, labeler: CheXbertLabeler):
    state = _fake_state_dict(bert_dir)
    state["module.bert.embeddings.position_ids"] = torch.arange(512).unsqueeze(0)
    state["module.bert.embeddings.token_type_ids"] = torch.zeros(1, 512, dtype=torch.long)
    tolerant = CheXbertLabeler(_save_checkpoint(tmp_path / "old.pth", state, legacy=False), bert_dir, device="cpu")
    np.testing.assert_array_equal(tolerant(REPORTS), labeler(REPORTS))
    state["module.bert.embeddings.position_ids"] = torch.arange(512).flip(0).unsqueeze(0)
    with pytest.raises(ValueError, match="position_ids' differs from its default"):
        CheXbertLabeler(_save_checkpoint(tmp_path / "odd.pth", state), bert_dir, device="cpu")


def test_unprefixed_state_dict_and_safetensors(bert_dir: Path, tmp_path: Path, labeler: CheXbertLabeler):
    from safetensors.torch import save_file

    state = {k[len("module."):]: v.contiguous() for k, v in _fake_state_dict(bert_dir).items()}
    save_file(state, str(tmp_path / "chexbert.safetensors"))
    plain = CheXbertLabeler(tmp_path / "chexbert.safetensors", bert_dir, device="cpu")
    np.testing.assert_array_equal(plain(REPORTS), labeler(REPORTS))


class _NotAWeight:
    pass


def test_arbitrary_pickles_are_refused(bert_dir: Path, tmp_path: Path):
    path = tmp_path / "evil.pth"
    torch.save({"model_state_dict": _fake_state_dict(bert_dir), "extra": _NotAWeight()}, path)
    with pytest.raises(ValueError, match=r"weights_only=True.*never unpickles"):
        CheXbertLabeler(path, bert_dir, device="cpu")


def test_label_order_and_rrg_mapping_as_documented():
    """hf_stack_offline §8: f1chexbert's 14 target names, its 5-subset, and ``mode="rrg"``
    (blank -> 0, positive -> 1, negative -> 0, uncertain -> 1); runs without f1chexbert."""
    documented = (
        "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
        "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
        "Fracture", "Support Devices", "No Finding",
    )
    assert L.CLASSES == documented
    assert L.TOP5 == ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")
    rrg = {0: 0, 1: 1, 2: 0, 3: 1}
    for code, expected in rrg.items():
        assert L.binarize([[code] * 13 + [min(code, 1)]], uncertain="positive")[0, 0] == expected


def test_model_class_keys_are_chexberts(labeler: CheXbertLabeler, checkpoint: Path):
    from shovir.labelers import chexbert

    model = chexbert.CheXbertModel(labeler.model.bert.config)
    saved = torch.load(checkpoint, weights_only=True)["model_state_dict"]
    assert sorted(model.state_dict()) == sorted(k[len("module."):] for k in saved)


# -- parity with f1chexbert 0.0.2 ---------------------------------------------------------------


class _V4TokenizerView:
    """What f1chexbert's ``tokenize`` needs from a transformers-4 slow BertTokenizer:
    ``encode_plus(list_of_wordpieces)`` = ``[CLS] + convert_tokens_to_ids(pieces) + [SEP]``."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.cls_token_id = tokenizer.cls_token_id
        self.sep_token_id = tokenizer.sep_token_id

    def tokenize(self, text):
        return self._tokenizer.tokenize(text)

    def encode_plus(self, pieces):
        assert isinstance(pieces, list)
        return {"input_ids": [self.cls_token_id, *self._tokenizer.convert_tokens_to_ids(pieces), self.sep_token_id]}


@pytest.fixture()
def f1chexbert_scorer(monkeypatch: pytest.MonkeyPatch, checkpoint: Path, bert_dir: Path, labeler: CheXbertLabeler, tmp_path: Path):
    """A real ``f1chexbert.F1CheXbert`` built offline: its cache dir holds our fake checkpoint,
    ``bert-base-uncased`` resolves to the tiny folder, and sklearn>=1.8's ``_check_targets`` is
    adapted (hf_stack_offline §8)."""
    fc = pytest.importorskip("f1chexbert.f1chexbert")
    from sklearn.metrics._classification import _check_targets

    (tmp_path / "chexbert.pth").symlink_to(checkpoint)
    (tmp_path / "bert").symlink_to(bert_dir)
    bert_model = transformers.BertModel(transformers.BertConfig.from_pretrained(str(bert_dir)))
    bert_model.save_pretrained(tmp_path / "bert-weights")  # bert_labeler(pretrain_path=...) wants weights
    view = _V4TokenizerView(labeler.tokenizer)
    monkeypatch.setattr(fc, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fc.BertTokenizer, "from_pretrained", classmethod(lambda cls, name, **kw: view))
    monkeypatch.setattr(
        fc.AutoConfig, "from_pretrained", classmethod(lambda cls, name, **kw: transformers.BertConfig.from_pretrained(str(bert_dir)))
    )
    monkeypatch.setattr(fc, "_check_targets", lambda a, b: (lambda r: r if len(r) == 3 else (r[0], r[-3], r[-2]))(_check_targets(a, b)))
    return fc.F1CheXbert(device="cpu")


def test_label_order_and_top5_match_f1chexbert(f1chexbert_scorer):
    assert tuple(f1chexbert_scorer.target_names) == L.CLASSES
    assert tuple(f1chexbert_scorer.target_names_5) == L.TOP5
    assert [L.CLASSES[i] for i in f1chexbert_scorer.target_names_5_index] == list(L.TOP5)


def test_logits_and_rrg_labels_match_f1chexbert(f1chexbert_scorer, labeler: CheXbertLabeler):
    ours = labeler.logits(REPORTS)
    codes = labeler(REPORTS)
    for i, report in enumerate(REPORTS):
        ids = torch.tensor([labeler.token_ids([report])[0]])
        with torch.no_grad():
            theirs = f1chexbert_scorer.model(ids, torch.ones_like(ids, dtype=torch.float))
        for head in range(14):
            np.testing.assert_allclose(theirs[head][0].numpy(), ours[head][i], atol=1e-5)
        # f1chexbert's "rrg" mode = positive or uncertain -> 1 = binarize(uncertain="positive")
        assert f1chexbert_scorer.get_label(report, mode="rrg") == L.binarize(codes[i : i + 1], uncertain="positive")[0].tolist()
    assert (codes == L.UNCERTAIN).any() and (codes == L.POSITIVE).any()


@pytest.mark.filterwarnings("ignore:.*is ill-defined:UserWarning")
def test_f1chexbert_micro_f1_equals_sklearn_on_binarised_codes(f1chexbert_scorer, labeler: CheXbertLabeler):
    from sklearn.metrics import f1_score

    refs = REPORTS
    hyps = REPORTS[3:] + REPORTS[:3]
    _, _, report_14, report_5 = f1chexbert_scorer(hyps, refs)
    y_true = L.binarize(labeler([r.strip() for r in refs]), uncertain="positive")
    y_pred = L.binarize(labeler([h.strip() for h in hyps]), uncertain="positive")
    top5 = [L.class_index(name) for name in L.TOP5]
    assert report_14["micro avg"]["f1-score"] == pytest.approx(f1_score(y_true, y_pred, average="micro", zero_division=0))
    assert report_5["micro avg"]["f1-score"] == pytest.approx(
        f1_score(y_true[:, top5], y_pred[:, top5], average="micro", zero_division=0)
    )
    assert report_14["macro avg"]["f1-score"] == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))


def test_empty_list_gives_an_empty_array(labeler: CheXbertLabeler):
    codes = labeler([])
    assert codes.shape == (0, 14) and codes.dtype == np.int8


def test_progress_bar_does_not_change_output(labeler: CheXbertLabeler):
    np.testing.assert_array_equal(labeler(REPORTS, progress=True), labeler(REPORTS))

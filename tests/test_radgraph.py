"""F1-RadGraph: reward arithmetic by hand, the transformers-5 shim, and a tiny random DyGIE model
built at test time in radgraph's own layout (``config.json``, ``vocabulary/``, ``weights.th``).

Tests that need the ``radgraph`` package skip when it is absent; the arithmetic and the scorer
plumbing (with a fake annotator) run without it.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from shovir.labelers.radgraph import (
    CACHE_DIR_ENV,
    ENCODER_ENV,
    RadGraphScorer,
    apply_transformers5_shim,
    f1_radgraph,
    radgraph_rewards,
)


def _entity(tokens: str, label: str, *relations: tuple[str, str]) -> dict:
    return {"tokens": tokens, "label": label, "relations": [list(r) for r in relations]}


def _graph(*entities: dict) -> dict:
    return {"entities": {str(i + 1): e for i, e in enumerate(entities)}}


# Hypothesis: "mild pulmonary Edema , left pleural effusion"
HYP = _graph(
    _entity("Edema", "OBS-DP", ("located_at", "2"), ("modify", "3")),  # 1
    _entity("pulmonary", "ANAT-DP"),  # 2
    _entity("mild", "OBS-DP"),  # 3
    _entity("effusion", "OBS-DP", ("located_at", "5")),  # 4
    _entity("pleural", "ANAT-DP"),  # 5
)
# Reference: "edema in the lungs , small pleural effusion , no pneumothorax"
REF = _graph(
    _entity("edema", "OBS-DP", ("located_at", "2")),  # 1
    _entity("pulmonary", "ANAT-DP"),  # 2
    _entity("effusion", "OBS-DP", ("located_at", "4")),  # 3
    _entity("pleural", "ANAT-DP"),  # 4
    _entity("pneumothorax", "OBS-DA"),  # 5
)


def _f1(common: int, n_hyp: int, n_ref: int) -> float:
    p, r = common / n_hyp, common / n_ref
    return 2 * p * r / (p + r) if p + r else 0.0


def test_reward_arithmetic_by_hand():
    rewards = radgraph_rewards(HYP, REF)
    # simple: hyp {Edema, pulmonary, mild, effusion, pleural} vs ref {edema, pulmonary, effusion,
    # pleural, pneumothorax}: case-sensitive, so "Edema" != "edema" -> 3 common of 5 and 5
    assert rewards["simple"] == pytest.approx(_f1(3, 5, 5))
    # partial: hyp {(Edema,T), pulmonary, mild, (effusion,T), pleural}
    #          ref {(edema,T), pulmonary, (effusion,T), pleural, pneumothorax} -> 3 common
    assert rewards["partial"] == pytest.approx(_f1(3, 5, 5))
    # complete: hyp {edema-located_at-pulmonary, edema-modify-mild, pulmonary, mild,
    #                effusion-located_at-pleural, pleural} (lower-cased relation tuples)
    #           ref {edema-located_at-pulmonary, pulmonary, effusion-located_at-pleural, pleural,
    #                pneumothorax} -> 4 common of 6 and 5
    assert rewards["complete"] == pytest.approx(_f1(4, 6, 5))


def test_partial_distinguishes_related_from_unrelated_entities():
    hyp = _graph(_entity("effusion", "OBS-DP"), _entity("pleural", "ANAT-DP"))
    ref = _graph(_entity("effusion", "OBS-DP", ("located_at", "2")), _entity("pleural", "ANAT-DP"))
    assert radgraph_rewards(hyp, ref) == {"simple": 1.0, "partial": 0.5, "complete": 0.5}
    assert radgraph_rewards(ref, ref) == {"simple": 1.0, "partial": 1.0, "complete": 1.0}


def test_duplicates_are_sets_and_no_entities_scores_zero():
    hyp = _graph(_entity("edema", "OBS-DP"), _entity("edema", "OBS-DP"))
    ref = _graph(_entity("edema", "OBS-DP"), _entity("effusion", "OBS-DP"))
    assert radgraph_rewards(hyp, ref)["simple"] == pytest.approx(_f1(1, 1, 2))
    assert radgraph_rewards(_graph(), ref) == {"simple": 0.0, "partial": 0.0, "complete": 0.0}
    assert radgraph_rewards(ref, _graph()) == {"simple": 0.0, "partial": 0.0, "complete": 0.0}


def _random_graph(rng: random.Random) -> dict:
    words = ["edema", "Edema", "effusion", "pleural", "left", "lung", "mild", "opacity"]
    labels = ["OBS-DP", "OBS-DA", "OBS-U", "ANAT-DP"]
    n = rng.randint(0, 5)
    entities = []
    for _ in range(n):
        relations = [(rng.choice(["located_at", "modify", "suggestive_of"]), str(rng.randint(1, n))) for _ in range(rng.randint(0, 2))]
        entities.append(_entity(rng.choice(words), rng.choice(labels), *relations))
    return _graph(*entities)


def test_arithmetic_equals_radgraph_0_1_18():
    rewards_module = pytest.importorskip("radgraph.rewards")
    rng = random.Random(7)
    for _ in range(300):
        hyp, ref = _random_graph(rng), _random_graph(rng)
        expected = rewards_module.compute_reward(hyp, ref, "all")
        ours = radgraph_rewards(hyp, ref)
        assert (ours["simple"], ours["partial"], ours["complete"]) == pytest.approx(expected)


# -- scorer with a fake annotator -----------------------------------------------------------------


class FakeAnnotator:
    """Hand-written graphs by text; records what it is asked to annotate."""

    def __init__(self, graphs: dict[str, dict]):
        self.graphs = graphs
        self.calls: list[list[str]] = []

    def __call__(self, reports: list[str]) -> list[dict]:
        self.calls.append(list(reports))
        return [self.graphs[r] for r in reports]


def test_scorer_pairs_empties_levels_and_dedup():
    fake = FakeAnnotator({"hyp": HYP, "ref": REF, "same": REF, "none": _graph()})
    scorer = RadGraphScorer(annotator=fake, batch_size=2)
    hyps = ["hyp", "", "same", "hyp", "none", "   "]
    refs = ["ref", "ref", "ref", "ref", "ref", "ref"]
    result = scorer(hyps, refs)
    expected_partial = [_f1(3, 5, 5), 0.0, 1.0, _f1(3, 5, 5), 0.0, 0.0]
    assert result["reward_level"] == "partial"
    assert result["rewards"] == pytest.approx(expected_partial)
    assert result["mean"] == pytest.approx(sum(expected_partial) / 6)
    assert result["levels"]["complete"]["rewards"][0] == pytest.approx(_f1(4, 6, 5))
    assert result["n_pairs"] == 6 and result["n_empty"] == 2
    assert sorted(itertools.chain.from_iterable(fake.calls)) == ["hyp", "none", "ref", "same"]  # each text once
    assert all(len(call) <= 2 for call in fake.calls)
    json.dumps(result)  # plain types


def test_progress_and_chunking_do_not_change_scores():
    fake = FakeAnnotator({"hyp": HYP, "ref": REF, "same": REF})
    hyps, refs = ["hyp", "same", "hyp"], ["ref", "ref", "same"]
    one = RadGraphScorer(annotator=fake, batch_size=1, progress=True)(hyps, refs)
    many = RadGraphScorer(annotator=fake, batch_size=64)(hyps, refs)
    assert one == many


def test_reward_level_choice_and_function_form():
    fake = FakeAnnotator({"hyp": HYP, "ref": REF})
    simple = f1_radgraph(["hyp"], ["ref"], annotator=fake, reward_level="simple")
    assert simple["reward_level"] == "simple" and simple["mean"] == pytest.approx(_f1(3, 5, 5))
    assert set(simple) == {"reward_level", "mean", "rewards", "levels", "n_pairs", "n_empty"}


def test_scorer_input_errors():
    scorer = RadGraphScorer(annotator=FakeAnnotator({}))
    with pytest.raises(ValueError, match="same length"):
        scorer(["a"], ["a", "b"])
    with pytest.raises(ValueError, match=r"refs\[1\]: expected a string, got NoneType"):
        scorer(["a", "b"], ["a", None])
    with pytest.raises(ValueError, match="reward_level"):
        RadGraphScorer(annotator=FakeAnnotator({}), reward_level="all")
    with pytest.raises(ValueError, match="model_type"):
        RadGraphScorer(annotator=FakeAnnotator({}), model_type="chexbert")
    broken = RadGraphScorer(annotator=lambda reports: [])
    with pytest.raises(RuntimeError, match="0 annotations for 2 reports"):
        broken(["a"], ["b"])


# -- the radgraph package: shim and a tiny DyGIE model -------------------------------------------

WORDS = (
    "no acute cardiopulmonary process abnormality moderate hiatal hernia mild pulmonary edema "
    "the heart is normal left pleural effusion . , tube a b"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS)) + ["card", "##io", "##graphy"]


def _tiny_bert(folder: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    ).save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}), encoding="utf-8"
    )
    return folder


def _dygie_config(encoder_name: str) -> dict:
    bert = {"type": "pretrained_transformer_mismatched", "model_name": encoder_name, "max_length": 512}
    return {
        "dataset_reader": {"type": "dygie", "token_indexers": {"bert": dict(bert)}, "max_span_width": 3},
        "model": {
            "type": "dygie",
            "embedder": {"token_embedders": {"bert": dict(bert)}},
            "initializer": {},
            "module_initializer": {},
            "loss_weights": {"ner": 0.2, "relation": 1.0, "coref": 0.0, "events": 0.0},
            "feature_size": 4,
            "max_span_width": 3,
            "target_task": "relation",
            "feedforward_params": {"num_layers": 1, "hidden_dims": 8, "dropout": 0.0},
            "modules": {
                "coref": {"spans_per_word": 0.3, "max_antecedents": 10, "coref_prop": 0},
                "ner": {},
                "relation": {"spans_per_word": 0.5},
                "events": {"trigger_spans_per_word": 0.3, "argument_spans_per_word": 0.8,
                           "loss_weights": {"trigger": 0.2, "arguments": 1.0}},
            },
        },
    }


@pytest.fixture(scope="module")
def tiny_radgraph(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A random DyGIE model in radgraph's extracted-archive layout, built with the package's classes
    exactly as ``radgraph.RadGraph.__init__`` builds it."""
    pytest.importorskip("radgraph")
    import torch
    from dotmap import DotMap
    from radgraph.allennlp.data import Vocabulary
    from radgraph.allennlp.modules import text_field_embedders, token_embedders
    from radgraph.dygie.models import dygie

    root = tmp_path_factory.mktemp("radgraph")
    encoder = _tiny_bert(root / "tiny-bert")
    model_dir = root / "cache" / "radgraph"
    (model_dir / "vocabulary").mkdir(parents=True)
    (model_dir / "vocabulary" / "non_padded_namespaces.txt").write_text("*tags\n*labels\n")
    (model_dir / "vocabulary" / "radgraph__ner_labels.txt").write_text("\nANAT-DP\nOBS-DP\nOBS-U\nOBS-DA\n")
    (model_dir / "vocabulary" / "radgraph__relation_labels.txt").write_text("located_at\nmodify\nsuggestive_of\n")
    (model_dir / "config.json").write_text(json.dumps(_dygie_config(str(encoder))), encoding="utf-8")

    apply_transformers5_shim()
    config = DotMap(json.loads((model_dir / "config.json").read_text()))
    vocab = Vocabulary.from_files(str(model_dir / "vocabulary"), None, None)
    embedder = text_field_embedders.BasicTextFieldEmbedder(
        {"bert": token_embedders.PretrainedTransformerMismatchedEmbedder(model_name=str(encoder), max_length=512)}
    )
    model_kwargs = config.model
    for name in ["type", "embedder", "initializer", "module_initializer"]:
        del model_kwargs[name]
    torch.manual_seed(0)
    model = dygie.DyGIE(vocab=vocab, embedder=embedder, **model_kwargs)
    torch.save(model.state_dict(), model_dir / "weights.th")
    return {"root": root, "cache": root / "cache", "model_dir": model_dir, "encoder": encoder}


HYPS = [
    "No acute cardiopulmonary process.",
    "Moderate hiatal hernia, mild pulmonary edema.",
    "the heart is normal",
    "",
    "left pleural effusion . tube",
]
REFS = [
    "no acute cardiopulmonary abnormality",
    "mild pulmonary edema",
    "the heart is normal",
    "left pleural effusion",
    "left pleural effusion",
]


def test_shim_is_idempotent_and_scoped(tiny_radgraph):
    import transformers
    from radgraph.allennlp.common import cached_transformers

    assert apply_transformers5_shim() is False  # already applied by the fixture
    assert getattr(cached_transformers.get_tokenizer, "_shovir_transformers5_shim") is True
    if int(transformers.__version__.split(".")[0]) >= 5:
        # transformers' classes are untouched; only the instances the vendored allennlp builds
        assert not hasattr(transformers.PreTrainedTokenizerBase, "encode_plus")
        assert not hasattr(transformers.BertTokenizer, "build_inputs_with_special_tokens")
        assert not hasattr(transformers.AutoTokenizer.from_pretrained(str(tiny_radgraph["encoder"])), "encode_plus")


def test_shim_makes_the_vendored_tokenizer_path_work(tiny_radgraph):
    from radgraph.allennlp.common import cached_transformers
    from radgraph.allennlp.data import Token, Vocabulary
    from radgraph.allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer

    ids = {token: i for i, token in enumerate(VOCAB)}
    encoder = str(tiny_radgraph["encoder"])
    tokenizer = cached_transformers.get_tokenizer(encoder)
    assert tokenizer.encode_plus("pleural effusion", add_special_tokens=False)["input_ids"] == [ids["pleural"], ids["effusion"]]
    assert tokenizer.build_inputs_with_special_tokens([7, 8]) == [ids["[CLS]"], 7, 8, ids["[SEP]"]]
    assert tokenizer.build_inputs_with_special_tokens([7], [8]) == [ids["[CLS]"], 7, ids["[SEP]"], 8, ids["[SEP]"]]

    words = [Token(w) for w in ["Mild", "cardiography", "edema", "."]]
    indexer = PretrainedTransformerMismatchedIndexer(model_name=encoder)
    out = indexer.tokens_to_indices(words, Vocabulary())
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    pieces = [ids["mild"], ids["card"], ids["##io"], ids["##graphy"], ids["edema"], ids["."]]
    assert out["token_ids"] == [cls, *pieces, sep]
    assert out["offsets"] == [(1, 1), (2, 4), (5, 5), (6, 6)]  # word -> its word pieces
    # with max_length, the indexer folds the pieces into segments with build_inputs_with_special_tokens
    folded = PretrainedTransformerMismatchedIndexer(model_name=encoder, max_length=5).tokens_to_indices(words, Vocabulary())
    assert folded["token_ids"] == [cls, *pieces[:3], sep, cls, *pieces[3:], sep]
    assert folded["segment_concat_mask"] == [True] * 10


def test_without_the_shim_transformers5_breaks_the_package(tiny_radgraph):
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers < 5 still has encode_plus")
    code = (
        "from radgraph.allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer as I\n"
        f"I(model_name={str(tiny_radgraph['encoder'])!r})\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "encode_plus" in run.stderr


def test_scorer_matches_the_package_end_to_end(tiny_radgraph):
    radgraph = pytest.importorskip("radgraph")
    scorer = RadGraphScorer(model_cache_dir=tiny_radgraph["cache"], device="cpu", batch_size=3)
    result = scorer(HYPS, REFS)
    package = radgraph.F1RadGraph(reward_level="all", model_type="radgraph", model_cache_dir=str(tiny_radgraph["cache"]), cuda=-1)
    means, rewards, _, _ = package(refs=REFS, hyps=HYPS)
    for level, expected_mean, expected_rewards in zip(("simple", "partial", "complete"), means, rewards):
        assert result["levels"][level]["rewards"] == pytest.approx(expected_rewards)
        assert result["levels"][level]["mean"] == pytest.approx(expected_mean)
    assert result["mean"] == pytest.approx(means[1])  # partial
    assert result["n_empty"] == 1
    assert 0.0 < result["mean"] < 1.0 and result["rewards"][2] == pytest.approx(1.0)  # identical reports score 1
    # annotations are the package's, and the same text annotates the same way in any chunk
    annotations = scorer.annotate(["mild pulmonary edema", "left pleural effusion", "mild pulmonary edema"])
    assert annotations[0] == annotations[2] and annotations[0]["entities"]


def test_model_dir_may_be_the_extracted_folder_and_env_var(tiny_radgraph, monkeypatch: pytest.MonkeyPatch):
    direct = RadGraphScorer(model_cache_dir=tiny_radgraph["model_dir"], device="cpu")
    monkeypatch.setenv(CACHE_DIR_ENV, str(tiny_radgraph["cache"]))
    from_env = RadGraphScorer(device="cpu")
    assert direct(HYPS, REFS) == from_env(HYPS, REFS)


def test_hub_named_encoder_is_redirected_to_a_local_folder(tiny_radgraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    model_dir = tmp_path / "radgraph"
    model_dir.mkdir()
    config_text = json.dumps(_dygie_config("some-org/not-downloaded-bert"))
    (model_dir / "config.json").write_text(config_text, encoding="utf-8")
    (model_dir / "vocabulary").symlink_to(tiny_radgraph["model_dir"] / "vocabulary")
    (model_dir / "weights.th").symlink_to(tiny_radgraph["model_dir"] / "weights.th")
    monkeypatch.delenv(ENCODER_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=rf"'some-org/not-downloaded-bert'.*set {ENCODER_ENV} or pass encoder="):
        RadGraphScorer(model_cache_dir=tmp_path, device="cpu", tokenizer_cache_dir=str(tmp_path / "hf"))
    redirected = RadGraphScorer(model_cache_dir=tmp_path, encoder=tiny_radgraph["encoder"], device="cpu")
    reference = RadGraphScorer(model_cache_dir=tiny_radgraph["cache"], device="cpu")
    assert redirected(HYPS, REFS) == reference(HYPS, REFS)
    assert (model_dir / "config.json").read_text(encoding="utf-8") == config_text  # user's file untouched


def test_missing_weights_never_download(tmp_path: Path):
    pytest.importorskip("radgraph")
    (tmp_path / "radgraph").mkdir()
    (tmp_path / "radgraph" / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"lacks vocabulary, weights.th.*set SHOVIR_RADGRAPH_CACHE_DIR or pass model_cache_dir="):
        RadGraphScorer(model_cache_dir=tmp_path, device="cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["radgraph"]  # nothing fetched or extracted

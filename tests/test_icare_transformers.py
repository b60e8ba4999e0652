"""The transformers backend with a tiny random causal LM built at test time (no weights are
downloaded): it answers every call, its gibberish is counted as parse failures and never crashes
ICARE or GREEN, a prompt too long for ``max_length`` fails its call with the reason, and batching
does not change a reply."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from shovir.icare import Call, Green, Icare, TransformersBackend, get_backend  # noqa: E402
from shovir.icare.prompts import GREEN_CHAT_TEMPLATE, answer_prompt  # noqa: E402

CORPUS = ["A B C D Answer : Yes No", "[Matched Findings] : 1 . effusion", "Radiology report : Small left pleural effusion .",
          "** 1 : Is there an effusion ? ** A ) Yes B ) No C ) Maybe D ) Large"]


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-causal-lm")
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=["<pad>", "<unk>", "<s>", "</s>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                        model_input_names=["input_ids", "attention_mask"])
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_icare_on_a_tiny_random_lm_counts_parse_failures_and_never_crashes(tiny_lm):
    backend = get_backend("transformers", model=tiny_lm, max_length=200, batch_size=3, device="cpu")
    with Icare(backend, n_questions=2, max_attempts=2) as evaluator:
        out = evaluator.evaluate({"a": "Small left pleural effusion.", "b": "No acute process."},
                                 {"a": "No effusion.", "b": "No acute process."}, n_resamples=0)
    # random weights write no readable question: every reply is counted, nothing is scored, nothing raised
    assert out["icare_gt"] is None and out["icare_gen"] is None and out["icare_avg"] is None
    assert out["counts"]["gt"]["yielded"] == 0 and out["counts"]["gt"]["attempts"] == 2  # one attempt per distinct text
    assert out["calls"]["made"] == 3 and out["calls"]["failed"] == 0  # three distinct report texts
    assert backend.usage()["requests"] == 3 and backend.usage()["completion_tokens"] > 0


def test_answers_from_the_tiny_lm_are_strings_read_as_letters_or_failures(tiny_lm):
    backend = TransformersBackend(tiny_lm, max_length=256, batch_size=4, device="cpu")
    options = ["Yes", "No", "Maybe", "Large"]
    calls = [Call("answer", answer_prompt(f"Is there an effusion {i}?", options, "Small left pleural effusion."), 10, 123)
             for i in range(5)]
    batched = backend.complete(calls)
    single = [backend.complete([call])[0] for call in calls]
    assert [r.text for r in batched] == [r.text for r in single]  # left padding: batching never changes a reply
    assert all(r.ok and isinstance(r.text, str) for r in batched)
    too_long = backend.complete([Call("answer", "word " * 400, 10)])[0]
    assert not too_long.ok and "max_length=256" in too_long.error and backend.usage()["failed"] == 1


def test_green_on_the_tiny_lm_with_the_authors_chat_template(tiny_lm):
    evaluator = Green("transformers", {"model": tiny_lm, "max_length": 1024, "device": "cpu"}, max_tokens=24)
    try:
        assert evaluator.backend.chat_template == GREEN_CHAT_TEMPLATE and evaluator.backend.batch_size == 8
        rendered = evaluator.backend.render(Call("green", "PROMPT", 24))
        assert rendered.startswith("<|user|>\nPROMPT</s>\n") and rendered.endswith("<|assistant|>\n")
        out = evaluator.evaluate(["Small left pleural effusion."], ["No effusion."], n_resamples=0)
    finally:
        evaluator.close()
    # gibberish has no section: scored 0 by the authors' rule, and counted as unparsed
    assert out["n"] == 1 and out["unparsed"] == 1 and out["green"] == 0.0 and out["failed"] == 0


def test_a_missing_checkpoint_fails_before_any_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing was downloaded"):
        TransformersBackend(str(tmp_path / "no-such-model"))
    with pytest.raises(ValueError, match="model is required"):
        TransformersBackend()
    with pytest.raises(ValueError, match="trust_remote_code must be True or False"):
        TransformersBackend(str(tmp_path), trust_remote_code="yes")


def test_every_answer_of_the_tiny_lm_is_accounted_for(tiny_lm):
    from shovir.icare import Backend, Reply

    lm = TransformersBackend(tiny_lm, max_length=256, batch_size=8, device="cpu")

    class WriterThenLM(Backend):
        """Hand-written questions; the tiny LM answers them (a letter, or gibberish counted as a failure)."""

        name = "writer+lm"

        def identity(self):
            return {"backend": self.name, "lm": lm.identity()}

        def complete(self, calls, on_reply=None):
            answers = iter(lm.complete([c for c in calls if c.kind == "answer"]))
            mcq = "1: Is there an effusion?\nA) Yes\nB) No\nC) Maybe\nD) Large\nAnswer: A"
            return [Reply(mcq) if c.kind == "mcq" else next(answers) for c in calls]

    out = Icare(WriterThenLM(), n_questions=1).evaluate({"a": "Small left pleural effusion."}, {"a": "No effusion."},
                                                        n_resamples=0)
    gt = out["counts"]["gt"]
    assert gt["yielded"] == 1 and gt["kept"] + gt["lost_to_failures"] + gt["filtered_wrong_with_report"] \
        + gt["filtered_right_without_report"] == 1
    assert out["questions"]["gt"] + out["answer_failures"]["gt"] == gt["kept"]  # every kept question accounted for

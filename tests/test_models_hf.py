"""Model adapters: the generic image-text-to-text adapter on a tiny random LLaVA built offline, the
reasoning split, and the research-code adapters' install errors and authors' defaults."""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import types

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from shovir.models import MODELS, Message, get_model  # noqa: E402
from shovir.models import cxrmate as cxrmate_module  # noqa: E402
from shovir.models import libra as libra_module  # noqa: E402
from shovir.models import radialog as radialog_module  # noqa: E402
from shovir.models.chexagent import CheXagent2  # noqa: E402
from shovir.models.cxrmate import CXRMate  # noqa: E402
from shovir.models.decoding import Decoding, SeededRowSampler, row_seed, split_reasoning  # noqa: E402
from shovir.models.hf import ImageTextToTextAdapter  # noqa: E402
from shovir.models.libra import LibraV1, LlavaRad  # noqa: E402
from shovir.models.loading import LoadOptions  # noqa: E402
from shovir.models.maira import Maira2  # noqa: E402
from shovir.models.medgemma import MedGemma  # noqa: E402
from shovir.models.nv_reason import NVReasonCXR  # noqa: E402
from shovir.models.radialog import RaDialog  # noqa: E402
from shovir.models.testing import build_tiny_llava  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("tiny-llava")
    build_tiny_llava(folder)
    return str(folder)


def _gray(seed: int, size=(40, 48)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size, dtype=np.uint8), mode="L")


def _messages() -> list[Message]:
    wide = Image.fromarray(np.random.default_rng(9).integers(0, 4096, (36, 30), dtype=np.uint16))  # 16-bit grayscale
    return [
        Message(images=[_gray(1)], prompt="The heart size is normal."),
        Message(images=[_gray(2, (64, 50))], prompt="Is there an effusion ?"),
        Message(images=[wide], prompt="There is a small left pleural effusion .", report="No acute process."),
        Message(images=[_gray(4)]),  # the adapter's default prompt
    ]


def _adapter(tiny: str, **options) -> ImageTextToTextAdapter:
    options.setdefault("prompt", "No acute cardiopulmonary process.")
    options.setdefault("max_new_tokens", 8)
    options.setdefault("device", "cpu")
    return ImageTextToTextAdapter(tiny, **options)


# --------------------------------------------------------------------------- generic adapter


def test_batched_greedy_equals_one_at_a_time_in_order(tiny):
    messages = _messages()
    batched = _adapter(tiny, batch_size=4).generate(messages)
    single = _adapter(tiny, batch_size=1)
    one_by_one = [single.generate([m])[0] for m in messages]
    assert len(batched) == len(messages)
    assert [g.text for g in batched] == [g.text for g in one_by_one]
    assert [g.text for g in batched] == [g.text for g in single.generate(messages)]  # several batches of one
    assert all(g.scores is None and g.reasoning is None for g in batched)
    assert any(g.text for g in batched)
    assert single.generate([]) == []


def test_sampling_needs_a_seed_and_is_reproducible(tiny):
    with pytest.raises(ValueError, match="seed"):
        _adapter(tiny, do_sample=True)
    messages = _messages()[:3]
    state = torch.get_rng_state()
    first = _adapter(tiny, do_sample=True, seed=11, max_new_tokens=12).generate(messages)
    again = _adapter(tiny, do_sample=True, seed=11, max_new_tokens=12).generate(messages)
    assert [g.text for g in first] == [g.text for g in again]
    assert torch.equal(state, torch.get_rng_state())  # the caller's random state is untouched
    others = [_adapter(tiny, do_sample=True, seed=s, max_new_tokens=12).generate(messages) for s in (12, 13, 14)]
    assert any([g.text for g in other] != [g.text for g in first] for other in others)
    config = _adapter(tiny, do_sample=True, seed=11).config()["decoding"]
    assert config["do_sample"] is True and config["seed"] == 11
    assert _adapter(tiny, seed=11).config()["decoding"]["seed"] is None  # greedy ignores the seed


# --------------------------------------------------------------------------- sampling, seeded per message


def _six_messages() -> list[Message]:
    prompts = ["The heart size is normal.", "Is there an effusion ?", "There is a small left pleural effusion .",
               None, "yes no", "Radiology report : Is there an effusion ?"]
    return [Message(images=[_gray(20 + i, (40 + 3 * i, 48))], prompt=p) for i, p in enumerate(prompts)]


def _sampled(tiny: str, messages: list[Message], **options) -> list[str]:
    adapter = _adapter(tiny, do_sample=True, seed=7, temperature=1.5, max_new_tokens=12, **options)
    return [g.text for g in adapter.generate(messages)]


def test_sampled_text_depends_only_on_the_seed_and_the_message(tiny):
    messages = _six_messages()
    alone = _sampled(tiny, messages, batch_size=1)
    assert len(set(alone)) == len(alone)  # enough entropy that a mixed-up draw would show
    assert _sampled(tiny, messages, batch_size=4) == alone
    order = [3, 0, 5, 1, 4, 2]
    assert _sampled(tiny, [messages[i] for i in order], batch_size=4) == [alone[i] for i in order]

    reseeded = list(messages)
    reseeded[2] = dataclasses.replace(messages[2], seed=123)
    changed = _sampled(tiny, reseeded, batch_size=4)
    assert changed[2] != alone[2]
    assert changed[:2] + changed[3:] == alone[:2] + alone[3:]
    assert _sampled(tiny, reseeded, batch_size=1) == changed

    # The comparisons above can fail: drawing every row from one seeded global generator (what
    # generate(do_sample=True) does, and what the former per-batch scheme did after seeding torch
    # from a hash of the batch) gives a message other tokens when its batch changes.
    adapter = _adapter(tiny, max_new_tokens=12).load()

    def one_global_stream(batch: list[Message]) -> list[str]:
        inputs = adapter._inputs(batch, 0)
        with torch.random.fork_rng():
            torch.manual_seed(7)
            out = adapter.model.generate(**inputs, do_sample=True, temperature=1.5, max_new_tokens=12,
                                         pad_token_id=adapter.processor.tokenizer.pad_token_id)
        return adapter.processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    assert [one_global_stream([m])[0] for m in messages[:4]] != one_global_stream(messages[:4])


def test_message_seed_leaves_greedy_output_and_config_alone(tiny):
    messages = _six_messages()
    greedy = _adapter(tiny, batch_size=4)
    plain = [g.text for g in greedy.generate(messages)]
    seeded = [dataclasses.replace(m, seed=1000 + i) for i, m in enumerate(messages)]
    assert [g.text for g in greedy.generate(seeded)] == plain
    assert greedy.config()["decoding"]["seed"] is None and "sampling" not in greedy.config()["decoding"]
    sampling = _adapter(tiny, do_sample=True, seed=7).config()["decoding"]
    assert sampling["seed"] == 7 and sampling["sampling"] == "per-message Gumbel-max"
    with pytest.raises(ValueError, match=r"messages\[1\]\.seed must be an integer or None"):
        greedy.generate([messages[0], dataclasses.replace(messages[1], seed="3")])


def test_row_seed_uses_the_message_seed_else_its_content():
    image = _gray(1)
    a, b = Message(images=[image], prompt="x"), Message(images=[image], prompt="y")
    assert row_seed(7, a) == row_seed(7, Message(images=[image.copy()], prompt="x"))
    assert len({row_seed(7, a), row_seed(7, b), row_seed(8, a)}) == 3
    assert row_seed(7, dataclasses.replace(a, seed=5)) == row_seed(7, dataclasses.replace(b, seed=5))


def test_sampler_draws_from_the_warped_distribution():
    probabilities = torch.tensor([0.2, 0.3, 0.5])
    sampler = SeededRowSampler([11])
    scores = probabilities.log().unsqueeze(0)
    draws = torch.tensor([int(sampler(None, scores).argmax()) for _ in range(4000)])
    frequencies = torch.bincount(draws, minlength=3).float() / len(draws)
    assert torch.allclose(frequencies, probabilities, atol=0.03)
    assert isinstance(sampler, transformers.LogitsProcessor)
    greedy_like = SeededRowSampler([1, 2], top_k=1)  # top-k = 1 leaves one token to draw
    assert greedy_like(None, torch.tensor([[0.1, 2.0, 0.3], [5.0, 0.0, 0.0]])).argmax(-1).tolist() == [1, 0]
    with pytest.raises(ValueError, match="one row per message"):
        SeededRowSampler([1, 2])(None, torch.zeros(3, 4))


def test_sampling_settings_refused_or_taken_from_the_checkpoint():
    with pytest.raises(ValueError, match="num_beams=3: beam search cannot be combined"):
        Decoding(max_new_tokens=5, do_sample=True, seed=1, num_beams=3)
    decoding = Decoding(max_new_tokens=5, do_sample=True, seed=1, temperature=0.5)
    checkpoint = transformers.GenerationConfig(top_k=64, top_p=0.95, temperature=0.1)
    assert decoding.warping(checkpoint) == {"temperature": 0.5, "top_k": 64, "top_p": 0.95}
    with pytest.raises(ValueError, match=r"generation_config\.min_p=0\.05 .*do_sample=False"):
        decoding.warping(transformers.GenerationConfig(min_p=0.05))
    with pytest.raises(ValueError, match="pass the batch's messages"):
        decoding.generate_kwargs()
    kwargs = decoding.generate_kwargs([Message(images=[_gray(1)])] * 2)
    assert kwargs["do_sample"] is False and "temperature" not in kwargs
    (sampler,) = kwargs["logits_processor"]
    assert isinstance(sampler, SeededRowSampler) and len(sampler.seeds) == 2


def test_chexagent_and_libra_pass_the_seeded_sampler_to_generate(monkeypatch):
    calls = []

    class FakeTokenizer:
        pad_token_id, eos_token_id = 0, 1

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [3] * max(1, len(text.split()))}

        def from_list_format(self, items):
            return items[-1]["text"]

        def apply_chat_template(self, conversation, add_generation_prompt, tokenize):
            return [5, 6, 7]

        def decode(self, ids, skip_special_tokens=False):
            return " ".join(str(int(t)) for t in ids)

        def batch_decode(self, rows, skip_special_tokens):
            return [self.decode(row) for row in rows]

    class FakeModel:
        device, dtype = torch.device("cpu"), torch.float32
        config = types.SimpleNamespace(mm_use_im_start_end=False)

        def generate(self, input_ids, **kwargs):
            calls.append(kwargs)
            return torch.cat([input_ids, torch.full((input_ids.shape[0], 1), 9)], dim=1)

    messages = [Message(images=[_gray(i)], prompt=f"Describe {i}.") for i in range(3)]
    chexagent = CheXagent2(trust_remote_code=True, do_sample=True, seed=4, temperature=None, top_p=None, batch_size=2)
    chexagent.tokenizer, chexagent.model, chexagent._loaded = FakeTokenizer(), FakeModel(), True
    chexagent.generate(messages)

    class Conversation:
        roles, sep_style, sep, sep2 = ("USER", "ASSISTANT"), "single", "###", None

        def copy(self):
            self.turns = []
            return self

        def append_message(self, role, text):
            self.turns.append(f"{role}: {text or ''}")

        def get_prompt(self):
            return " ".join(self.turns)

    fake_libra = types.SimpleNamespace(
        conv_templates={"libra_v1": Conversation(), "v1": Conversation()}, SeparatorStyle=types.SimpleNamespace(),
        DEFAULT_IMAGE_TOKEN="<image>", IMAGE_TOKEN_INDEX=-200,
        tokenizer_image_token=lambda prompt, tokenizer, index, return_tensors: torch.tensor([5, 6, 7]),
        process_images=lambda images, processor, config: torch.zeros(len(images), 3, 4, 4),
    )
    monkeypatch.setattr(libra_module, "require", lambda module, install: fake_libra)
    libra = LibraV1(do_sample=True, seed=4, batch_size=2)
    libra.tokenizer, libra.model, libra.image_processor, libra._loaded = FakeTokenizer(), FakeModel(), None, True
    libra.generate(messages)

    assert len(calls) == 4  # two batches each
    for kwargs, rows in zip(calls, [2, 1, 2, 1]):
        (sampler,) = kwargs["logits_processor"]
        assert isinstance(sampler, SeededRowSampler) and len(sampler.seeds) == rows
        assert kwargs["do_sample"] is False and "temperature" not in kwargs
    assert calls[2]["logits_processor"][0].seeds == [row_seed(4, m) for m in messages[:2]]
    assert [w.temperature for w in calls[2]["logits_processor"][0].warpers[:1]] == [0.2]  # the authors' Libra value


def test_option_scores_are_first_token_log_softmax(tiny):
    adapter = _adapter(tiny)
    messages = [
        Message(images=[_gray(5)], prompt="Is there an effusion ?", options=["yes", "no"]),
        Message(images=[_gray(6, (30, 70))], prompt="The heart size is normal. Is there an effusion ?",
                report="There is a small left pleural effusion.", options=["no", "yes"]),
        Message(images=[_gray(7)], prompt="The heart size is normal."),
    ]
    generations = adapter.generate(messages)
    processor = transformers.AutoProcessor.from_pretrained(tiny)
    model = transformers.AutoModelForImageTextToText.from_pretrained(tiny).eval()
    for message, generation in zip(messages[:2], generations[:2]):
        text = "<image> " + (f"Radiology report:\n{message.report}\n\n" if message.report else "") + message.prompt + " "
        inputs = processor(text=[text], images=[message.images[0].convert("RGB")], return_tensors="pt")
        with torch.no_grad():
            logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), dim=-1)
        expected = {o: float(logprobs[processor.tokenizer.convert_tokens_to_ids(o)]) for o in message.options}
        assert generation.scores.keys() == expected.keys()
        for option in expected:
            assert generation.scores[option] == pytest.approx(expected[option], abs=1e-5)
    assert generations[2].scores is None
    with pytest.raises(ValueError, match="share their first token"):
        adapter.generate([Message(images=[_gray(8)], prompt="x", options=["yes", "yes no"])])
    with pytest.raises(ValueError, match=r"messages\[0\]\.options has duplicates"):
        adapter.generate([Message(images=[_gray(8)], prompt="x", options=["yes", "yes"])])


def test_report_goes_in_the_user_turn_before_the_question(tiny):
    adapter = _adapter(tiny, system_prompt="The heart size is normal.")
    message = Message(images=[_gray(1)], prompt="Is there an effusion ?", report="Small left effusion.")
    rendered = adapter.render_prompt(message)
    block = "Radiology report:\nSmall left effusion.\n\nIs there an effusion ?"
    assert block in rendered
    assert rendered.index("The heart size is normal.") < rendered.index("<image>") < rendered.index(block)
    assert "Radiology report" not in adapter.render_prompt(Message(images=[_gray(1)], prompt="Is there an effusion ?"))
    text_first = _adapter(tiny, image_first=False).render_prompt(message)
    assert text_first.index(block) < text_first.index("<image>")
    with pytest.raises(ValueError, match="report_template"):
        _adapter(tiny, report_template="{question} only")


def test_trust_remote_code_is_not_passed_unless_asked(tiny, monkeypatch):
    calls = []
    for cls in (transformers.AutoProcessor, transformers.AutoModelForImageTextToText):
        original = cls.from_pretrained

        def recording(*args, _original=original, _name=cls.__name__, **kwargs):
            calls.append((_name, kwargs))
            return _original(*args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", recording)
    _adapter(tiny).load()
    assert len(calls) == 2
    assert all("trust_remote_code" not in kwargs and kwargs["local_files_only"] is True for _, kwargs in calls)
    calls.clear()
    _adapter(tiny, trust_remote_code=True).load()
    assert [kwargs["trust_remote_code"] for _, kwargs in calls] == [True, True]


def test_missing_checkpoint_fails_clearly_without_downloading(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    called = []
    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", lambda *a, **k: called.append(a))
    with pytest.raises(FileNotFoundError, match="no such folder .*nothing was downloaded"):
        ImageTextToTextAdapter(str(tmp_path / "missing-model"), prompt="x")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        ImageTextToTextAdapter("./not/here", prompt="x")
    assert called == []
    monkeypatch.undo()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    adapter = ImageTextToTextAdapter("shovir-tests/not-a-cached-model", prompt="x", device="cpu")
    with pytest.raises(OSError, match="hf download shovir-tests/not-a-cached-model"):
        adapter.load()


def test_bad_messages_name_the_index(tiny):
    adapter = _adapter(tiny)
    with pytest.raises(ValueError, match=r"messages\[1\]\.images"):
        adapter.generate([Message(images=[_gray(1)]), Message(images=[])])
    with pytest.raises(ValueError, match=r"messages\[0\]\.images\[0\] must be a PIL image"):
        adapter.generate([Message(images=[np.zeros((4, 4))])])
    with pytest.raises(ValueError, match=r"messages\[0\]\.prompt is None"):
        ImageTextToTextAdapter(tiny, device="cpu").generate([Message(images=[_gray(1)])])


def test_hf_keeps_its_former_names():
    from shovir.models import decoding as decoding_module
    from shovir.models import hf
    from shovir.models import images as images_module
    from shovir.models import loading as loading_module
    from shovir.models import pretrained as pretrained_module

    homes = {"MedGemma": MedGemma, "NVReasonCXR": NVReasonCXR, "ImageTextToTextAdapter": ImageTextToTextAdapter}
    for module in (decoding_module, images_module, loading_module, pretrained_module):
        homes.update({name: getattr(module, name) for name in module.__all__})
    for name in hf.__all__:
        assert getattr(hf, name) is homes[name], name
    assert {"REPORT_TEMPLATE", "Decoding", "PretrainedAdapter", "compose_text", "to_8bit", "to_rgb", "truncate_at",
            "resolve_checkpoint", "local_snapshot", "canonical_dtype", "torch_dtype", "left_pad",
            "stop_on_strings", "split_reasoning"} <= set(hf.__all__)


def test_load_options_validate_once_with_the_former_messages(tiny):
    options = LoadOptions(tiny, dtype="fp16", attn_implementation="eager", revision="abc123")
    assert (options.path, options.is_local, options.dtype) == (tiny, True, "float16")
    assert options.model_kwargs() == {"local_files_only": True, "revision": "abc123", "dtype": torch.float16,
                                      "attn_implementation": "eager"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.dtype = "float32"
    for bad, message in (({"trust_remote_code": "yes"}, "trust_remote_code must be True or False"),
                         ({"local_files_only": 1}, "local_files_only must be True or False"),
                         ({"device": "cpu", "device_map": "auto"}, "pass either device or device_map, not both"),
                         ({"attn_implementation": 3}, "attn_implementation must be a string or None")):
        with pytest.raises(ValueError, match=message):
            _adapter(tiny, **bad)
    adapter = _adapter(tiny, dtype="bf16", revision="abc123")
    assert isinstance(adapter.loading, LoadOptions) and adapter.loading.revision == "abc123"
    assert (adapter.checkpoint, adapter.checkpoint_name, adapter.dtype) == (tiny, tiny, "bfloat16")
    with pytest.raises(ValueError, match="NoDefault: pass checkpoint=<local folder or Hub id>"):
        type("NoDefault", (MedGemma,), {"default_checkpoint": None}).load_options(None)


def test_registry_builds_the_generic_adapter(tiny):
    adapter = get_model("hf-image-text-to-text", checkpoint=tiny, prompt="x", device="cpu")
    assert isinstance(adapter, ImageTextToTextAdapter) and adapter.config()["checkpoint"] == tiny
    for name in ("hf-image-text-to-text", "medgemma", "nv-reason-cxr", "chexagent-2", "cxrmate", "libra-v1",
                 "llava-rad", "maira-2", "radialog"):
        module_name, class_name = MODELS[name].split(":")
        assert isinstance(getattr(importlib.import_module(module_name), class_name), type)


# --------------------------------------------------------------------------- MedGemma, NV-Reason


def test_medgemma_layout_and_authors_defaults():
    adapter = MedGemma()
    config = adapter.config()
    assert config["checkpoint"] == "google/medgemma-1.5-4b-it" and config["prompt"] == "Describe this X-ray."
    assert config["decoding"] == {"max_new_tokens": 450, "max_length": None, "do_sample": False, "temperature": None,
                                  "top_p": None, "top_k": None, "num_beams": 1, "use_cache": False, "seed": None}
    assert config["dtype"] == "bfloat16" and config["attn_implementation"] == "sdpa"
    assert config["user_instruction"] == "Analyze this image."
    turns = adapter.conversation(Message(images=[_gray(1)], report="Small effusion."))
    assert turns[0] == {"role": "system", "content": [{"type": "text", "text": "Describe this X-ray."}]}
    user = turns[1]["content"]
    assert [c["type"] for c in user] == ["text", "image"] and user[1]["image"].mode == "RGB"
    assert user[0]["text"] == "Radiology report:\nSmall effusion.\n\nAnalyze this image."
    assert adapter.config_hash() != MedGemma(prompt="Describe the findings.").config_hash()


def test_nv_reason_defaults_layout_and_reasoning_split():
    adapter = NVReasonCXR()
    config = adapter.config()
    assert config["checkpoint"] == "nvidia/NV-Reason-CXR-3B"
    assert config["prompt"] == "Find abnormalities and support devices."
    assert config["decoding"]["max_new_tokens"] == 2048 and config["decoding"]["do_sample"] is False
    assert config["decoding"]["use_cache"] is True and config["dtype"] == "bfloat16"
    user = adapter.conversation(Message(images=[_gray(1)]))[0]["content"]
    assert [c["type"] for c in user] == ["image", "text"]
    assert user[1]["text"] == "Find abnormalities and support devices."
    generation = adapter._finish(
        "<think>\nThe cardiac silhouette is enlarged.\nNo pneumothorax.\n</think>\n<answer>Cardiomegaly, Support Devices</answer>",
        None,
    )
    assert generation.text == "Cardiomegaly, Support Devices"
    assert generation.reasoning == "The cardiac silhouette is enlarged.\nNo pneumothorax."
    assert split_reasoning("Normal chest.") == ("Normal chest.", None)
    assert split_reasoning("<think>Cut off by the token lim") == ("", "Cut off by the token lim")
    assert split_reasoning("pre-opened trace</think>\nEffusion.") == ("Effusion.", "pre-opened trace")
    assert split_reasoning("<think>a</think>Edema.<think>b</think>") == ("Edema.", "a\n\nb")
    assert split_reasoning("<think></think><answer>No Finding") == ("No Finding", "")


# --------------------------------------------------------------------------- research-code adapters


def test_missing_research_code_raises_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setitem(sys.modules, "libra", None)
    monkeypatch.setitem(sys.modules, "LLAVA_Biovil", None)
    with pytest.raises(ImportError, match="pip install torchvision"):
        CXRMate(trust_remote_code=True)
    for cls in (LibraV1, LlavaRad):
        with pytest.raises(ImportError, match=r"pip install git\+https://github.com/X-iZhang/Libra.git"):
            cls()
    with pytest.raises(ImportError, match="RaDialog-interactive-radiology-report-generation .*repo_dir"):
        RaDialog(checkpoint="shovir-tests/not-cached-radialog")


def test_remote_code_models_require_explicit_trust(monkeypatch):
    monkeypatch.setattr(cxrmate_module, "require", lambda module, install: types.SimpleNamespace())
    for cls in (CheXagent2, Maira2, CXRMate):
        with pytest.raises(ValueError, match="pass trust_remote_code as True"):
            cls()


def _fake_require(**attributes):
    fake = types.SimpleNamespace(**attributes)
    return lambda module, install: fake


def test_authors_defaults_in_config(monkeypatch, tmp_path):
    chexagent = CheXagent2(trust_remote_code=True).config()
    assert chexagent["checkpoint"] == "StanfordAIMI/CheXagent-2-3b-srrg-findings"
    assert chexagent["prompt"] == "Structured Radiology Report Generation for Findings Section"
    assert chexagent["system_message"] == "You are a helpful assistant."
    assert chexagent["dtype"] == "bfloat16"
    assert chexagent["decoding"] == {"max_new_tokens": 512, "max_length": None, "do_sample": False,
                                         "temperature": 1.0, "top_p": 1.0, "top_k": None, "num_beams": 1,
                                         "use_cache": True, "seed": None}

    maira = Maira2(trust_remote_code=True).config()
    assert (maira["checkpoint"], maira["prompt"], maira["technique"], maira["comparison"]) == ("microsoft/maira-2", "", "", "")
    assert maira["decoding"]["max_new_tokens"] == 450 and maira["decoding"]["do_sample"] is False
    assert maira["dtype"] == "bfloat16" and maira["get_grounding"] is False

    monkeypatch.setattr(cxrmate_module, "require", _fake_require())
    cxrmate = CXRMate(trust_remote_code=True).config()
    assert cxrmate["checkpoint"] == "aehrc/cxrmate-rrg24" and cxrmate["prompt"] is None
    assert cxrmate["dtype"] == "float32" and cxrmate["bad_words"] == ["[NF]", "[NI]"]
    assert cxrmate["decoding"]["max_length"] == 512 and cxrmate["decoding"]["num_beams"] == 1
    assert CXRMate(trust_remote_code=True, dtype="bf16").config()["dtype"] == "bfloat16"

    monkeypatch.setattr(libra_module, "require", _fake_require(conv_templates={"libra_v1": 0, "v1": 0}))
    libra = LibraV1().config()
    assert libra["checkpoint"] == "X-iZhang/libra-v1.0-7b" and libra["conv_mode"] == "libra_v1"
    assert libra["prompt"] == "Provide a detailed description of the findings in the radiology image."
    assert libra["decoding"]["max_new_tokens"] == 300 and libra["decoding"]["do_sample"] is False
    with pytest.raises(ValueError, match="seed"):
        LibraV1(do_sample=True)
    sampled = LibraV1(do_sample=True, seed=3).config()["decoding"]
    assert (sampled["do_sample"], sampled["temperature"], sampled["seed"]) == (True, 0.2, 3)
    rad = LlavaRad().config()
    assert rad["checkpoint"] == "X-iZhang/libra-llava-rad" and rad["conv_mode"] == "v1"
    assert rad["prompt"] == "Describe the findings in the radiology image."
    assert rad["decoding"]["max_new_tokens"] == 300 and rad["decoding"]["use_cache"] is True
    with pytest.raises(ValueError, match="conv_mode"):
        LlavaRad(conv_mode="nonexistent")

    monkeypatch.setattr(sys, "path", list(sys.path))  # RaDialog puts repo_dir on sys.path
    repo = tmp_path / "radialog"
    repo.mkdir()
    (repo / "utils.py").write_text("def create_chest_xray_transform_for_inference(size, center_crop_size):\n    return None\n")
    monkeypatch.setattr(radialog_module, "require", _fake_require())
    radialog = RaDialog(repo_dir=repo).config()
    assert radialog["checkpoint"] == "Chantal/RaDialog-interactive-radiology-report-generation"
    assert radialog["prompt"].startswith("You are to act as a radiologist and write the finding section")
    assert radialog["model_base"] == "liuhaotian/llava-v1.5-7b" and radialog["classifier_threshold"] == 0.5
    assert radialog["classifier_checkpoint"] == "ChexpertClassifier.ckpt"
    assert radialog["decoding"]["max_new_tokens"] == 300 and radialog["decoding"]["do_sample"] is False
    with pytest.raises(FileNotFoundError, match="classifier_checkpoint"):
        RaDialog(repo_dir=repo, classifier_checkpoint=tmp_path / "missing.ckpt")
    assert getattr(sys.modules.get("utils"), "__file__", None) != str(repo / "utils.py")  # no global `utils` import


def test_chexagent_writes_lossless_png_and_always_cleans_up(monkeypatch):
    seen = []

    class FakeTokenizer:
        pad_token_id, eos_token_id = 0, 1

        def from_list_format(self, items):
            path = items[0]["image"]
            with Image.open(path) as image:
                seen.append((path, image.format, image.mode, np.asarray(image).copy()))
            return f"<img>{path}</img>{items[-1]['text']}"

        def apply_chat_template(self, conversation, add_generation_prompt, tokenize):
            return {"input_ids": [5] * (3 + len(conversation[1]["value"]) % 4)}

        def batch_decode(self, rows, skip_special_tokens):
            return [" ".join(str(int(t)) for t in row) for row in rows]

    class FakeModel:
        device = torch.device("cpu")

        def generate(self, input_ids, attention_mask, pad_token_id, **kwargs):
            current = seen[-input_ids.shape[0]:]  # this batch's files live during generate
            assert all(os.path.exists(path) for path, *_ in current)
            new = torch.arange(input_ids.shape[0]).unsqueeze(1) + 7
            return torch.cat([input_ids, new], dim=1)

    adapter = CheXagent2(trust_remote_code=True, batch_size=2)
    adapter.tokenizer, adapter.model, adapter._loaded = FakeTokenizer(), FakeModel(), True
    images = [_gray(1), _gray(2), Image.fromarray(np.arange(12, dtype=np.uint16).reshape(3, 4) * 1000)]
    generations = adapter.generate([Message(images=[im]) for im in images])
    assert [g.text for g in generations] == ["7", "8", "7"]
    assert [(fmt, mode) for _, fmt, mode, _ in seen] == [("PNG", "L")] * 3
    assert np.array_equal(seen[0][3], np.asarray(images[0])) and np.array_equal(seen[1][3], np.asarray(images[1]))
    assert not any(os.path.exists(os.path.dirname(path)) for path, *_ in seen)

    class Exploding(FakeModel):
        def generate(self, *args, **kwargs):
            raise RuntimeError("boom")

    seen.clear()
    adapter.model = Exploding()
    with pytest.raises(RuntimeError, match="boom"):
        adapter.generate([Message(images=[_gray(3)])])
    assert seen and not os.path.exists(os.path.dirname(seen[0][0]))


def test_cxrmate_refuses_to_broadcast_one_report(monkeypatch):
    monkeypatch.setattr(cxrmate_module, "require", _fake_require())
    adapter = CXRMate(trust_remote_code=True, device="cpu")

    class FakeModel:
        device = torch.device("cpu")

        def __init__(self, sections):
            self.sections = sections

        def generate(self, pixel_values, bad_words_ids, **kwargs):
            assert pixel_values.shape[1] == 1 and kwargs["max_length"] == 512 and kwargs["num_beams"] == 1
            return torch.zeros((pixel_values.shape[0], 3), dtype=torch.long)

        def split_and_decode_sections(self, output_ids, tokenizer):
            return self.sections(output_ids.shape[0])

    adapter.tokenizer, adapter._bad_words, adapter._loaded = object(), [[1], [2]], True
    adapter.transform = lambda image: torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32)).permute(2, 0, 1)
    messages = [Message(images=[_gray(i)]) for i in range(3)]
    adapter.model = FakeModel(lambda n: ([f"f{i}" for i in range(n)], [f"i{i}" for i in range(n)]))
    assert [g.text for g in adapter.generate(messages)] == [f"Findings: f{i}\nImpression: i{i}" for i in range(3)]
    adapter.model = FakeModel(lambda n: (["only one"], ["only one"]))
    with pytest.raises(RuntimeError, match="refusing to broadcast"):
        adapter.generate(messages)
    with pytest.raises(ValueError, match=r"messages\[0\]\.prompt must be None"):
        adapter.generate([Message(images=[_gray(1)], prompt="Describe.")])


def test_stop_strings_decoding_checks_and_left_padding(tiny):
    from shovir.models.decoding import left_pad, stop_on_strings, truncate_at

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny)
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt = ids("yes no")
    rows, _ = left_pad([prompt + ids("The heart size"), prompt + ids("No acute process .")], tokenizer.pad_token_id)
    criterion = stop_on_strings(tokenizer, ["heart"], prompt_length=len(prompt))
    assert criterion(rows, None).tolist() == [True, False]
    assert truncate_at("The heart size is normal.", ["heart", "size"]) == "The"
    with pytest.raises(ValueError, match="only matters when sampling"):
        Decoding(max_new_tokens=5, temperature=0.7)
    with pytest.raises(ValueError, match="exactly one"):
        Decoding(max_new_tokens=5, max_length=9)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        Decoding(max_new_tokens=0)


def test_medgemma_and_nv_reason_run_end_to_end_on_the_tiny_model(tiny):
    messages = _messages()[:2]
    medgemma = MedGemma(tiny, dtype="float32", attn_implementation=None, max_new_tokens=6, device="cpu")
    assert "Describe this X-ray. <image>" not in medgemma.render_prompt(messages[0])
    assert medgemma.render_prompt(messages[0]).startswith("The heart size is normal. Analyze this image.")
    nv = NVReasonCXR(tiny, dtype="float32", max_new_tokens=6, device="cpu")
    for adapter in (medgemma, nv):
        generations = adapter.generate(messages)
        assert len(generations) == 2 and all(isinstance(g.text, str) and g.reasoning is None for g in generations)

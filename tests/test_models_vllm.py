"""The vllm adapter on the CPU, against a stub of the part of the vLLM offline API it uses.

The stub (:class:`FakeLLM`, :class:`FakeSamplingParams`) records what it is called with and answers
deterministically: a text that is a digest of the rendered conversation, its image bytes and the
request's seed, and, when log-probabilities are asked for, those of a fixed pseudo-random
distribution over a small vocabulary, keyed by the conversation.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shovir.models import Generation, Message, get_model
from shovir.models import vllm_engine
from shovir.models.decoding import row_seed
from shovir.models.pretrained import compose_text
from shovir.models.vllm_engine import VLLMEngine, gpu_group

VOCABULARY = 97


# --------------------------------------------------------------------------- the stub


class FakeTokenizer:
    """Word-level: every new word gets the next id (shared by all fake engines of a test)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        assert add_special_tokens is False  # option tokens never get a BOS
        return {"input_ids": [self.ids.setdefault(word, len(self.ids) + 3) for word in text.split()]}


class FakeSamplingParams:
    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.max_tokens = kwargs.get("max_tokens", 16)
        self.temperature = kwargs.get("temperature", 1.0)
        self.top_p = kwargs.get("top_p", 1.0)
        self.seed = kwargs.get("seed")
        self.logprobs = kwargs.get("logprobs")
        self.allowed_token_ids = kwargs.get("allowed_token_ids")


class FakeLogprob:
    def __init__(self, logprob: float) -> None:
        self.logprob = logprob


class FakeCompletion:
    def __init__(self, text: str, finish_reason: str, logprobs=None) -> None:
        self.text, self.finish_reason, self.logprobs = text, finish_reason, logprobs


class FakeRequestOutput:
    def __init__(self, request_id: str, outputs: list[FakeCompletion]) -> None:
        self.request_id, self.outputs = request_id, outputs


def conversation_key(conversation: list[dict]) -> bytes:
    """What the model sees of a conversation: roles, texts, image modes, sizes and bytes."""
    digest = hashlib.sha256()
    for turn in conversation:
        digest.update(turn["role"].encode())
        for part in turn["content"]:
            if part["type"] == "text":
                digest.update(b"text|" + part["text"].encode())
            else:
                image = part["image_pil"]
                digest.update(f"image|{image.mode}|{image.size}|".encode() + image.tobytes())
    return digest.digest()


def fake_logprobs(conversation: list[dict]) -> np.ndarray:
    """The stub's first-token log-softmax for a conversation."""
    seed = int.from_bytes(conversation_key(conversation)[:8], "little")
    logits = np.random.default_rng(seed).normal(0, 2, VOCABULARY)
    return logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))


def fake_text(conversation: list[dict], params: FakeSamplingParams) -> str:
    digest = hashlib.sha256(conversation_key(conversation))
    digest.update(f"|{params.max_tokens}|{params.temperature}|{params.top_p}".encode())
    if params.temperature > 0:
        digest.update(f"|seed={params.seed}".encode())
    return "report-" + digest.hexdigest()[:16]


class FakeLLM:
    instances: list["FakeLLM"] = []
    processed_logprobs = False  # True: answer as an engine whose log-probabilities follow the mask
    tokenizer = FakeTokenizer()

    def __init__(self, model: str, **kwargs) -> None:
        self.model, self.kwargs = model, kwargs
        self.environment = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE")}
        self.calls: list[dict] = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self) -> FakeTokenizer:
        return FakeLLM.tokenizer

    def chat(self, messages, sampling_params=None, use_tqdm=True, chat_template=None, **kwargs):
        params = list(sampling_params)
        assert len(params) == len(messages)
        self.calls.append({"messages": messages, "params": params, "chat_template": chat_template,
                           "use_tqdm": use_tqdm, "kwargs": kwargs})
        texts = [part.get("text", "") for conversation in messages for turn in conversation for part in turn["content"]]
        if any("REFUSE" in text for text in texts):
            raise ValueError("The decoder prompt (length 9000) is longer than the maximum model length of 4096")
        outputs = []
        for number, (conversation, request) in enumerate(zip(messages, params)):
            user = conversation[-1]["content"][-1]["text"]
            if "ABORT" in user:
                outputs.append(FakeRequestOutput(str(number), [FakeCompletion("", "abort")]))
                continue
            logprobs = None
            if request.logprobs is not None:
                table = fake_logprobs(conversation)
                token = request.allowed_token_ids[0] if request.allowed_token_ids else int(table.argmax())
                value = 0.0 if FakeLLM.processed_logprobs else float(table[token])
                logprobs = [{token: FakeLogprob(value)}]
            text = " " + fake_text(conversation, request) + "\n"  # the adapter strips it
            outputs.append(FakeRequestOutput(str(number), [FakeCompletion(text, "stop", logprobs)]))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams, module.__version__ = FakeLLM, FakeSamplingParams, "0.11.0"
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(FakeLLM, "instances", [])
    monkeypatch.setattr(FakeLLM, "processed_logprobs", False)
    monkeypatch.setattr(FakeLLM, "tokenizer", FakeTokenizer())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return module


@pytest.fixture
def folder(tmp_path) -> str:
    path = tmp_path / "checkpoint"
    path.mkdir()
    return str(path)


def _gray(seed: int, size=(24, 20)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8), mode="L")


def _messages() -> list[Message]:
    wide = Image.fromarray(np.random.default_rng(9).integers(0, 4096, (18, 16), dtype=np.uint16))  # 16-bit grayscale
    return [
        Message(images=[_gray(1)], prompt="Is there an effusion?"),
        Message(images=[_gray(2), _gray(3)], prompt="Compare the two views.", report="Small left effusion."),
        Message(images=[wide]),  # the adapter's default prompt
        Message(images=[_gray(4)], prompt="Is there an effusion?", options=["yes", "no"]),
    ]


def _adapter(folder: str, **options) -> VLLMEngine:
    options.setdefault("prompt", "Describe the findings.")
    return VLLMEngine(folder, **options)


# --------------------------------------------------------------------------- import and options


def test_building_the_adapter_and_its_config_import_neither_vllm_nor_torch(folder):
    code = ("import sys\nfrom shovir.models import get_model\n"
            f"adapter = get_model('vllm', checkpoint={folder!r}, temperature=0.5, seed=1)\n"
            "adapter.config(); adapter.config_hash()\n"
            "print(sorted(name for name in ('vllm', 'torch', 'transformers') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_engine_starts_on_first_use_only_once(fake_vllm, folder):
    adapter = _adapter(folder)
    adapter.config()
    assert FakeLLM.instances == []
    adapter.generate(_messages()[:1])
    adapter.generate(_messages()[1:3])
    adapter.load()
    assert len(FakeLLM.instances) == 1
    assert len(FakeLLM.instances[0].calls) == 2  # one engine call per generate
    assert adapter.generate([]) == [] and len(FakeLLM.instances[0].calls) == 2


def test_without_vllm_the_error_says_how_to_install_it(monkeypatch, folder):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    adapter = _adapter(folder)
    with pytest.raises(ImportError, match=r'pip install "shovir\[vllm\]"'):
        adapter.generate(_messages()[:1])


def test_an_old_vllm_is_refused_with_the_version_it_needs(fake_vllm, folder, monkeypatch):
    monkeypatch.setattr(fake_vllm, "__version__", "0.8.5")
    with pytest.raises(ImportError, match=r"vLLM >= 0\.9\.2 .*found 0\.8\.5"):
        _adapter(folder).load()
    assert FakeLLM.instances == []


@pytest.mark.parametrize("options, match", [
    ({"tensor_parallel_size": 0}, "tensor_parallel_size must be a positive integer"),
    ({"tensor_parallel_size": 1.5}, "tensor_parallel_size must be a positive integer"),
    ({"tensor_parallel_size": True}, "tensor_parallel_size must be a positive integer"),
    ({"gpu_memory_utilization": 0}, r"gpu_memory_utilization must be a number in \(0, 1\]"),
    ({"gpu_memory_utilization": 1.2}, r"gpu_memory_utilization must be a number in \(0, 1\]"),
    ({"gpu_memory_utilization": "0.5"}, r"gpu_memory_utilization must be a number in \(0, 1\]"),
    ({"temperature": 0.7}, "seed: sampling .* needs an explicit integer seed"),
    ({"temperature": -1}, "temperature must be a finite number >= 0"),
    ({"temperature": 0.7, "seed": "1"}, "seed must be an integer"),
    ({"top_p": 0.9}, "top_p=0.9 only matters when sampling"),
    ({"temperature": 0.7, "seed": 1, "top_p": 0}, r"top_p must be a number in \(0, 1\]"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer"),
    ({"max_model_len": -5}, "max_model_len must be a positive integer"),
    ({"trust_remote_code": "yes"}, "trust_remote_code must be True or False"),
    ({"dtype": "float64"}, "dtype must be one of"),
    ({"device": "cpu"}, "device must be None, 'cuda' or 'cuda:N'"),
    ({"device": "cuda:x"}, "device must be None, 'cuda' or 'cuda:N'"),
    ({"chat_template": ""}, "chat_template must be a Jinja template"),
    ({"chat_template": "no/such/template.jinja"}, "is neither a Jinja template nor an existing file"),
    ({"limit_mm_per_prompt": {"image": 0}}, r"limit_mm_per_prompt\['image'\] must be at least 1"),
    ({"limit_mm_per_prompt": {"image": -1}}, "must be an integer >= 0"),
    ({"limit_mm_per_prompt": 2}, "limit_mm_per_prompt must be a mapping"),
    ({"system_prompt": 3}, "system_prompt must be a string"),
    ({"report_template": "{question} only"}, "report_template must be a string containing"),
])
def test_options_are_validated_naming_the_option(folder, options, match):
    with pytest.raises(ValueError, match=match):
        VLLMEngine(folder, **options)


def test_a_missing_checkpoint_is_refused_before_anything_loads(fake_vllm, tmp_path):
    with pytest.raises(ValueError, match="checkpoint: pass checkpoint="):
        VLLMEngine()
    with pytest.raises(FileNotFoundError, match="nothing was downloaded"):
        VLLMEngine(str(tmp_path / "no" / "such"))
    offline = VLLMEngine("org/not-in-any-cache-xyz", prompt="Describe.")
    with pytest.raises(OSError, match="hf download org/not-in-any-cache-xyz"):
        offline.generate(_messages()[:1])
    assert FakeLLM.instances == []


# --------------------------------------------------------------------------- the engine


def test_the_engine_gets_the_right_arguments(fake_vllm, folder):
    _adapter(folder, tensor_parallel_size=2, gpu_memory_utilization=0.5, dtype="bf16", max_model_len=256,
             temperature=0.5, seed=4, limit_mm_per_prompt={"image": 2}).load()
    engine = FakeLLM.instances[0]
    assert engine.model == folder
    assert engine.kwargs == {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5, "dtype": "bfloat16",
                             "max_model_len": 256, "seed": 4, "limit_mm_per_prompt": {"image": 2}}
    assert engine.environment == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_HUB_OFFLINE": "1"}
    assert "HF_HUB_OFFLINE" not in os.environ  # set only while the engine starts


def test_trust_remote_code_is_passed_only_when_true(fake_vllm, folder):
    _adapter(folder).load()
    _adapter(folder, trust_remote_code=False).load()
    _adapter(folder, trust_remote_code=True).load()
    assert ["trust_remote_code" in e.kwargs for e in FakeLLM.instances] == [False, False, True]
    assert FakeLLM.instances[2].kwargs["trust_remote_code"] is True


def test_downloads_only_when_asked(fake_vllm, folder):
    _adapter("org/remote-vlm", local_files_only=False, revision="abc123").load()
    engine = FakeLLM.instances[0]
    assert engine.model == "org/remote-vlm"
    assert engine.kwargs["revision"] == engine.kwargs["tokenizer_revision"] == "abc123"
    assert engine.environment["HF_HUB_OFFLINE"] is None


def test_device_cuda_n_selects_the_nth_group_of_gpus(fake_vllm, folder, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
    _adapter(folder, device="cuda:1", tensor_parallel_size=2).load()
    _adapter(folder, device="cuda:3").load()
    _adapter(folder, device="cuda:0", tensor_parallel_size=2).load()
    assert [e.environment["CUDA_VISIBLE_DEVICES"] for e in FakeLLM.instances] == ["6,7", "7", "3,5,6,7"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5,6,7"  # restored
    assert gpu_group("cuda", 3, ["a", "b", "c", "d"]) == ["a", "b", "c"]


def test_placements_that_cannot_work_are_refused(fake_vllm, folder, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with pytest.raises(ValueError, match=r"tensor_parallel_size=2 needs visible GPUs 4\.\.5, but 4 are visible"):
        _adapter(folder, device="cuda:2", tensor_parallel_size=2).load()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="one of 2 launched ranks"):
        _adapter(folder).load()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch.setattr(vllm_engine, "_cuda_initialised", lambda: True)
    with pytest.raises(ValueError, match="CUDA is already initialised in this process"):
        _adapter(folder, device="cuda:1").load()
    _adapter(folder, device="cuda:0").load()  # rank 0 keeps the first GPU: nothing to move
    assert len(FakeLLM.instances) == 1 and FakeLLM.instances[0].environment["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


# --------------------------------------------------------------------------- messages and outputs


def test_messages_become_the_generic_adapters_chat(fake_vllm, folder):
    adapter = _adapter(folder, system_prompt="You are a radiologist.")
    messages = _messages()
    adapter.generate(messages)
    call = FakeLLM.instances[0].calls[0]
    assert call["use_tqdm"] is False and call["chat_template"] is None
    sent = call["messages"]
    assert len(sent) == 4 + 2  # one generation per message, plus one score request per option
    system = {"role": "system", "content": [{"type": "text", "text": "You are a radiologist."}]}
    for conversation in sent:
        assert conversation[0] == system and conversation[1]["role"] == "user" and len(conversation) == 2
    texts = [c[1]["content"][-1] for c in sent[:4]]
    assert texts[0] == {"type": "text", "text": "Is there an effusion?"}
    assert texts[1]["text"] == compose_text("Compare the two views.", "Small left effusion.")
    assert texts[1]["text"].startswith("Radiology report:\nSmall left effusion.\n\nCompare")
    assert texts[2]["text"] == "Describe the findings."
    second = sent[1][1]["content"]
    assert [part["type"] for part in second] == ["image_pil", "image_pil", "text"]  # images first
    assert np.array_equal(np.asarray(second[1]["image_pil"])[..., 0], np.asarray(messages[1].images[1]))
    wide = sent[2][1]["content"][0]["image_pil"]
    assert wide.mode == "RGB" and np.asarray(wide).dtype == np.uint8
    assert np.asarray(wide).max() == 255 and np.asarray(wide).min() == 0  # 16-bit min-max scaled to 8 bits
    assert sent[4] is sent[3] and sent[5] is sent[3]  # the scores are asked of the same conversation


def test_a_chat_template_is_passed_and_keys_the_config(fake_vllm, folder, tmp_path):
    template = "{% for m in messages %}{{ m['content'][-1]['text'] }}{% endfor %}"
    path = tmp_path / "template.jinja"
    path.write_text(template)
    adapter = _adapter(folder, chat_template=str(path))
    adapter.generate(_messages()[:1])
    assert FakeLLM.instances[0].calls[0]["chat_template"] == template
    assert adapter.config()["chat_template"] == template
    assert adapter.config_hash() != _adapter(folder).config_hash()


def test_outputs_come_back_in_order_and_stripped(fake_vllm, folder):
    adapter = _adapter(folder, max_new_tokens=32)
    messages = _messages()[:3]
    outputs = adapter.generate(messages)
    sent = FakeLLM.instances[0].calls[0]
    assert [g.text for g in outputs] == [fake_text(c, p) for c, p in zip(sent["messages"], sent["params"])]
    assert len(set(g.text for g in outputs)) == 3 and all(g.ok and g.scores is None for g in outputs)
    assert [g.text for g in adapter.generate(messages[::-1])] == [g.text for g in outputs][::-1]
    params = sent["params"][0]
    assert params.kwargs == {"max_tokens": 32, "temperature": 0.0}  # greedy: no seed, no top_p


def test_sampling_seeds_each_message_on_its_own(fake_vllm, folder):
    adapter = _adapter(folder, temperature=0.8, top_p=0.9, seed=7)
    first, second = _messages()[0], _messages()[1]
    seeded = Message(images=first.images, prompt=first.prompt, seed=123)
    together = adapter.generate([first, second, seeded])
    alone = adapter.generate([second])
    params = FakeLLM.instances[0].calls[0]["params"]
    assert [p.seed for p in params] == [row_seed(7, first), row_seed(7, second), row_seed(7, seeded)]
    assert params[0].kwargs == {"max_tokens": 512, "temperature": 0.8, "seed": row_seed(7, first), "top_p": 0.9}
    assert alone[0].text == together[1].text  # the batch does not change a message's text
    assert together[0].text != together[2].text  # same content, its own seed
    other = _adapter(folder, temperature=0.8, top_p=0.9, seed=8).generate([second])
    assert other[0].text != alone[0].text


def test_option_scores_are_the_first_token_log_probabilities(fake_vllm, folder):
    adapter = _adapter(folder)
    message = Message(images=[_gray(5)], prompt="Is there an effusion?", options=["yes", "no", "maybe"])
    open_question = _messages()[0]
    outputs = adapter.generate([open_question, message])
    call = FakeLLM.instances[0].calls[0]
    ids = [FakeLLM.tokenizer("yes", add_special_tokens=False)["input_ids"][0],
           FakeLLM.tokenizer("no", add_special_tokens=False)["input_ids"][0],
           FakeLLM.tokenizer("maybe", add_special_tokens=False)["input_ids"][0]]
    scoring = call["params"][2:]
    assert [p.kwargs for p in scoring] == [{"max_tokens": 1, "temperature": 0.0, "logprobs": 1,
                                            "allowed_token_ids": [i]} for i in ids]
    table = fake_logprobs(call["messages"][1])
    assert outputs[1].scores == pytest.approx({"yes": table[ids[0]], "no": table[ids[1]], "maybe": table[ids[2]]})
    assert all(v < 0 for v in outputs[1].scores.values())
    assert outputs[1].text == fake_text(call["messages"][1], call["params"][1])  # the text is generated too
    assert outputs[0].scores is None


def test_options_sharing_a_first_token_are_refused(fake_vllm, folder):
    message = Message(images=[_gray(5)], prompt="Effusion?", options=["yes", "yes indeed"])
    with pytest.raises(ValueError, match=r"messages\[1\]\.options \['yes', 'yes indeed'\] share their first token"):
        _adapter(folder).generate([_messages()[0], message])
    assert FakeLLM.instances[0].calls == []  # refused before anything is sent


def test_log_probabilities_taken_after_the_mask_are_refused(fake_vllm, folder, monkeypatch):
    monkeypatch.setattr(FakeLLM, "processed_logprobs", True)
    with pytest.raises(RuntimeError, match="after the allowed-token mask"):
        _adapter(folder).generate([_messages()[3]])


def test_a_request_the_engine_aborts_becomes_a_failure(fake_vllm, folder):
    messages = _messages()[:2] + [Message(images=[_gray(6)], prompt="ABORT this one")]
    outputs = _adapter(folder).generate(messages)
    assert [g.ok for g in outputs] == [True, True, False]
    assert outputs[2] == Generation.failure("vllm: the generation request finished with 'abort'")
    scored = Message(images=[_gray(6)], prompt="ABORT", options=["yes", "no"])
    assert "finished with 'abort'" in _adapter(folder).generate([scored])[0].error


def test_a_refused_request_fails_only_its_own_message(fake_vllm, folder):
    adapter = _adapter(folder)
    good = _messages()[:2]
    refused = Message(images=[_gray(7)], prompt="REFUSE: far too long")
    outputs = adapter.generate([good[0], refused, good[1]])
    assert [g.ok for g in outputs] == [True, False, True]
    assert "vllm refused the request: The decoder prompt" in outputs[1].error
    assert [outputs[0].text, outputs[2].text] == [g.text for g in adapter.generate(good)]
    assert [len(c["messages"]) for c in FakeLLM.instances[0].calls] == [3, 1, 1, 1, 2]
    with pytest.raises(ValueError, match="longer than the maximum model length"):
        adapter.generate([refused, refused])  # refused as a whole: not one request's problem
    with pytest.raises(ValueError, match="longer than the maximum model length"):
        adapter.generate([refused])


def test_messages_are_validated_naming_the_message(fake_vllm, folder):
    adapter = _adapter(folder, limit_mm_per_prompt={"image": 1})
    with pytest.raises(ValueError, match=r"messages\[1\] has 2 images; at most 1 allowed \(raise limit_mm_per_prompt\['image'\]\)"):
        adapter.generate(_messages()[:2])
    with pytest.raises(ValueError, match=r"messages\[0\]\.images must be a non-empty list"):
        adapter.generate([Message(images=[])])
    with pytest.raises(ValueError, match=r"messages\[0\]\.prompt is None and the vllm adapter has no default prompt"):
        VLLMEngine(folder).generate([Message(images=[_gray(1)])])
    with pytest.raises(ValueError, match=r"messages\[0\]\.options has duplicates"):
        adapter.generate([Message(images=[_gray(1)], prompt="q", options=["yes", "yes"])])
    assert FakeLLM.instances == []  # nothing started for messages that cannot be sent


def test_config_holds_what_determines_outputs_and_not_the_placement(folder):
    adapter = _adapter(folder, dtype="fp16", revision="r1", system_prompt="S", temperature=0.3, seed=2, top_p=0.95,
                       max_model_len=1024)
    config = adapter.config()
    assert set(config) == {"name", "engine", "checkpoint", "revision", "dtype", "prompt", "system_prompt",
                           "report_template", "chat_template", "max_model_len", "decoding"}
    assert (config["name"], config["engine"], config["checkpoint"], config["revision"], config["dtype"]) == (
        "vllm", "vllm", folder, "r1", "float16")
    assert config["decoding"] == {"max_new_tokens": 512, "temperature": 0.3, "top_p": 0.95, "seed": 2,
                                  "sampling": "vllm per-request seed"}
    assert _adapter(folder, seed=5).config()["decoding"]["seed"] is None  # greedy ignores the seed
    assert _adapter(folder, seed=5).config_hash() == _adapter(folder).config_hash()
    placed = _adapter(folder, tensor_parallel_size=2, gpu_memory_utilization=0.4, device="cuda:1")
    assert placed.config_hash() == _adapter(folder).config_hash()
    for changed in ({"prompt": "Other."}, {"system_prompt": "S"}, {"max_new_tokens": 9}, {"dtype": "bf16"},
                    {"temperature": 0.5, "seed": 1}, {"report_template": "{report}|{question}"}):
        assert _adapter(folder, **changed).config_hash() != _adapter(folder).config_hash(), changed
    json.dumps(config)


# --------------------------------------------------------------------------- through the sweep runner


def test_a_sweep_gives_the_predictions_of_calling_the_adapter_directly(fake_vllm, folder, tmp_path):
    from shovir.runner.config import SweepConfig
    from shovir.runner.plan import message_seed
    from shovir.runner.run import load_dataset_for, run_sweep

    options = {"checkpoint": folder, "prompt": "Describe the findings.", "temperature": 0.7, "seed": 11}
    config = SweepConfig.from_dict({"dataset": {"name": "synthetic", "rows": "pairs", "n_images": 4},
                                    "models": [{"name": "vllm", **options}], "conditions": ["baseline"],
                                    "seed": 3, "batch_size": 4})
    cache = str(tmp_path / "cache")
    out = run_sweep(config, tmp_path / "run", cache_dir=cache, progress=False, quiet=True)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    files = sorted((out / "predictions").rglob("baseline.jsonl"))
    assert len(files) == 1
    predictions = [json.loads(line) for line in files[0].read_text().splitlines()]

    dataset, _ = load_dataset_for(config, cache)
    rows = {row["sample_id"]: row for row in dataset}
    assert {p["sample_id"] for p in predictions} == set(rows) and len(rows) == 8
    messages = []
    for prediction in predictions:
        row = rows[prediction["sample_id"]]
        messages.append(Message(images=[row["image"]], prompt=row.get("question"),
                                report=row["report"] if prediction["with_report"] else None,
                                options=row.get("options") or None,
                                seed=message_seed(config.seed, prediction["generation"])))
    direct = get_model("vllm", **options).generate(messages)
    assert [p["text"] for p in predictions] == [g.text for g in direct]
    assert all(p["text"].startswith("report-") for p in predictions)
    assert len({p["text"] for p in predictions}) == len({(p["image_id"], p["with_report"]) for p in predictions})
    assert len(FakeLLM.instances) == 2  # one engine for the sweep's adapter, one for the direct call


def test_the_gpu_check_script_fails_cleanly_without_vllm_or_a_gpu():
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"
    environment = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300, env=environment)
    has_vllm = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True).returncode == 0
    if has_vllm:
        pytest.skip("vllm is installed here: the script would run the benchmark")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "gpu_check: vllm is not installed" in result.stdout
    assert 'pip install "shovir[vllm]"' in result.stdout

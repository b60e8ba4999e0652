"""The openai-compatible adapter against a fake server on loopback: the request layout, lossless
images, concurrency, retries, misconfigurations, the API key kept out of every record, answer
scores, and a run that survives its server dying."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fake_openai_server import FakeOpenAIServer, Reply, fail_first, fail_when, request_images, request_text
from PIL import Image

from shovir.models import Message, get_model
from shovir.models.images import to_8bit
from shovir.models.openai_compat import TOP_LOGPROBS, OpenAICompatible, request_seed, retry_delay
from shovir.models.pretrained import compose_text

KEY_ENV = "SHOVIR_TEST_OPENAI_KEY"
SECRET = "sk-test-5f3c9a1e-never-recorded"


def _image(value: int, size: int = 12) -> Image.Image:
    rng = np.random.default_rng(value)
    return Image.fromarray(rng.integers(0, 256, (size, size + 3), dtype=np.uint8), mode="L")


def _adapter(server: FakeOpenAIServer, **options) -> OpenAICompatible:
    options.setdefault("backoff", 0.01)
    options.setdefault("timeout", 5)
    return OpenAICompatible(base_url=server.base_url, model="fake", **options)


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        yield running


# --------------------------------------------------------------------------- the request


def test_answers_come_back_in_order_and_requests_hold_the_exact_pixels(server):
    wide = Image.fromarray(np.array([[0, 1000, 2000], [3000, 4000, 65535]], dtype=np.uint16))
    colour = Image.fromarray(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 13, mode="RGB")
    images = [_image(i) for i in range(5)] + [wide, colour]
    messages = [Message(images=[im], prompt=f"Question {i}?", report="Small left effusion." if i % 2 else None,
                        seed=100 + i) for i, im in enumerate(images)]
    adapter = _adapter(server, temperature=0.7, max_tokens=33, seed=9, system_prompt="You are a radiologist.")
    generations = adapter.generate(messages)

    expected = [f"brightness {float(np.asarray(to_8bit(im)).mean()):.1f}: Question {i}?" for i, im in enumerate(images)]
    assert [g.text for g in generations] == expected
    assert all(g.ok and g.scores is None and g.reasoning is None for g in generations)
    assert server.requests == len(messages)
    bodies = {request_text(body).splitlines()[-1]: body for body in server.bodies}
    for i, (message, image) in enumerate(zip(messages, images)):
        body = bodies[f"Question {i}?"]
        assert body["model"] == "fake" and body["temperature"] == 0.7 and body["max_tokens"] == 33
        assert body["seed"] == request_seed(9, message) and "logprobs" not in body
        system, user = body["messages"]
        assert system == {"role": "system", "content": "You are a radiologist."}
        assert user["role"] == "user" and [p["type"] for p in user["content"]] == ["image_url", "text"]
        assert user["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
        assert user["content"][1]["text"] == compose_text(f"Question {i}?", message.report)
        (pixels,) = request_images(body)
        np.testing.assert_array_equal(pixels, np.asarray(to_8bit(image)))  # lossless, grayscale kept one channel
    assert request_images(bodies["Question 5?"])[0].tolist() == [[0, 4, 8], [12, 16, 255]]
    assert bodies["Question 1?"]["messages"][1]["content"][1]["text"].startswith("Radiology report:\nSmall left effusion.")


def test_several_images_then_the_default_prompt(server):
    adapter = _adapter(server, prompt="Describe the findings.")
    (generation,) = adapter.generate([Message(images=[_image(1), _image(2)])])
    (body,) = server.bodies
    assert [p["type"] for p in body["messages"][0]["content"]] == ["image_url", "image_url", "text"]
    assert [a.tolist() for a in request_images(body)] == [np.asarray(_image(1)).tolist(), np.asarray(_image(2)).tolist()]
    assert generation.text.endswith(": Describe the findings.") and "seed" not in body


def test_seeds_follow_the_message_not_the_batch(server):
    adapter = _adapter(server, seed=4, temperature=1.0)
    target = Message(images=[_image(0)], prompt="Target?", seed=77)
    adapter.generate([target])
    adapter.generate([Message(images=[_image(5)], prompt="Other?", seed=1), target])
    sent = [b["seed"] for b in server.bodies if request_text(b) == "Target?"]
    assert sent == [request_seed(4, target)] * 2
    assert request_seed(4, target) != request_seed(5, target) != request_seed(4, Message(images=[], seed=78))


# --------------------------------------------------------------------------- concurrency


def test_slow_answers_overlap_up_to_max_concurrency_and_the_pool_is_reused():
    with FakeOpenAIServer(delay=0.15) as server:
        adapter = _adapter(server, max_concurrency=4)
        messages = [Message(images=[_image(i)], prompt=f"q{i}") for i in range(12)]
        start = time.perf_counter()
        first = adapter.generate(messages)
        elapsed = time.perf_counter() - start
        second = adapter.generate(messages[:6])
    assert server.max_overlap == 4 and server.requests == 18
    assert elapsed < 12 * 0.15 / 2  # three rounds of 0.15 s, not twelve
    assert [g.text for g in second] == [g.text for g in first[:6]]
    workers = [t for t in threading.enumerate() if t.name.startswith("shovir-openai")]
    assert len(workers) <= 4
    adapter.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("shovir-openai")]


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize("reply", [Reply.error(500), Reply.error(502), Reply.malformed(),
                                   Reply(status=200, body={"object": "error", "message": "overloaded"}),
                                   Reply.dropped()],
                         ids=["500", "502", "malformed-json", "no-choices", "dropped-connection"])
def test_a_transient_failure_is_retried(reply):
    with FakeOpenAIServer(script=fail_first(2, reply)) as server:
        (generation,) = _adapter(server, max_retries=2).generate([Message(images=[_image(3)], prompt="Heart?")])
    assert generation.ok and generation.text.endswith(": Heart?") and server.requests == 3


def test_retry_after_is_honoured_on_429():
    with FakeOpenAIServer(script=fail_first(1, Reply.error(429, retry_after=1))) as server:
        (generation,) = _adapter(server, backoff=0.001).generate([Message(images=[_image(3)], prompt="Heart?")])
    assert generation.ok and server.requests == 2
    assert server.arrivals[1] - server.arrivals[0] >= 0.95


def test_a_timeout_is_retried():
    with FakeOpenAIServer(script=fail_first(1, Reply.hang(3))) as server:
        start = time.perf_counter()
        (generation,) = _adapter(server, timeout=0.3).generate([Message(images=[_image(3)], prompt="Heart?")])
        elapsed = time.perf_counter() - start
    assert generation.ok and server.requests == 2 and 0.3 <= elapsed < 2


def test_a_request_failing_every_attempt_fails_alone():
    bad = fail_when(lambda request: request_text(request) == "bad?", Reply.error(503, message="engine overloaded"))
    with FakeOpenAIServer(script=bad) as server:
        messages = [Message(images=[_image(i)], prompt="bad?" if i == 2 else f"q{i}") for i in range(5)]
        generations = _adapter(server, max_retries=2).generate(messages)
    assert [g.ok for g in generations] == [True, True, False, True, True]
    assert generations[2].error == "HTTP 503 after 3 attempts: engine overloaded" and generations[2].text == ""
    assert [g.text for g in generations if g.ok] == [f"brightness {np.asarray(_image(i)).mean():.1f}: q{i}"
                                                     for i in (0, 1, 3, 4)]
    assert sum(request_text(b) == "bad?" for b in server.bodies) == 3 and server.requests == 7


def test_backoff_waits_are_the_seeded_exponential_jitter():
    message = Message(images=[_image(1)], prompt="q")
    with FakeOpenAIServer(script=fail_first(3, Reply.error(500))) as server:
        adapter = _adapter(server, backoff=0.05, max_retries=3)
        (generation,) = adapter.generate([message])
    assert generation.ok and server.requests == 4
    # the jitter RNG is seeded by the request itself, so the waits are known in advance
    rng = random.Random(hashlib.sha256(json.dumps(adapter.request_body(message)).encode()).digest())
    expected = [retry_delay(k, 0.05, rng) for k in (1, 2, 3)]
    assert 0.025 <= expected[0] < 0.075 and 0.05 <= expected[1] < 0.15 and 0.1 <= expected[2] < 0.3
    for gap, wait in zip(np.diff(server.arrivals), expected):
        assert wait - 0.005 <= gap < wait + 0.15


def test_a_connection_refused_fails_after_the_retries():
    with FakeOpenAIServer() as server:
        url = server.base_url
    adapter = OpenAICompatible(base_url=url, model="fake", max_retries=1, backoff=0.01, timeout=1)
    (generation,) = adapter.generate([Message(images=[_image(1)], prompt="q")])
    assert not generation.ok
    assert re.fullmatch(r"connection error \(ConnectionRefusedError: .*\) after 2 attempts", generation.error)


def test_a_client_error_fails_the_message_without_retrying():
    with FakeOpenAIServer(script=fail_first(1, Reply.error(400, message="image too large"))) as server:
        (generation,) = _adapter(server).generate([Message(images=[_image(1)], prompt="q")])
    assert generation.error == "HTTP 400 after 1 attempt: image too large" and server.requests == 1


# --------------------------------------------------------------------------- misconfiguration and the key


def test_401_raises_naming_api_key_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-123")
    with FakeOpenAIServer(api_key=SECRET) as server:
        adapter = _adapter(server, api_key_env=KEY_ENV)
        with pytest.raises(ValueError, match="HTTP 401.*check api_key_env") as raised:
            adapter.generate([Message(images=[_image(i)], prompt=f"q{i}") for i in range(6)])
        assert "sk-wrong-key-123" not in str(raised.value) and server.requests <= 6
        with pytest.raises(ValueError, match="check api_key_env"):
            _adapter(server).generate([Message(images=[_image(1)], prompt="q")])  # no key at all


def test_404_raises_naming_base_url_and_model():
    with FakeOpenAIServer(served_model="google/medgemma-4b-it") as server:
        with pytest.raises(ValueError, match="HTTP 404.*does not exist.*check base_url and model"):
            _adapter(server).generate([Message(images=[_image(1)], prompt="q")])
        root = server.base_url.removesuffix("/v1")
        with pytest.raises(ValueError, match="check base_url and model.*usually ending in /v1"):
            OpenAICompatible(base_url=root, model="google/medgemma-4b-it").generate([Message(images=[_image(1)])])
        (generation,) = OpenAICompatible(base_url=server.base_url, model="google/medgemma-4b-it").generate(
            [Message(images=[_image(1)])])
    assert generation.text.endswith(": Describe the findings in this chest X-ray.")


def test_the_key_is_sent_but_kept_out_of_config_repr_and_errors(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    echo = fail_when(lambda r: request_text(r) == "echo?", Reply.error(500, message=f"bad key {SECRET} for you"))
    with FakeOpenAIServer(api_key=SECRET, script=echo) as server:
        adapter = _adapter(server, api_key_env=KEY_ENV, max_retries=0)
        ok, echoed = adapter.generate([Message(images=[_image(1)], prompt="q"), Message(images=[_image(2)], prompt="echo?")])
    assert ok.ok and server.authorizations == [f"Bearer {SECRET}"] * 2
    assert echoed.error == "HTTP 500 after 1 attempt: bad key *** for you"
    for text in (json.dumps(adapter.config()), repr(adapter), echoed.error, json.dumps(adapter.__getstate__(), default=str)):
        assert SECRET not in text
    assert adapter.config()["name"] == "openai-compatible" and "api_key_env" not in adapter.config()


def test_a_missing_key_variable_is_refused_before_sending(monkeypatch, server):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ValueError, match=f"api_key_env: the environment variable '{KEY_ENV}' is not set"):
        _adapter(server, api_key_env=KEY_ENV).generate([Message(images=[_image(1)], prompt="q")])
    assert server.requests == 0


@pytest.mark.parametrize("options, match", [
    ({"model": "m"}, "base_url is required"),
    ({"base_url": "127.0.0.1:8000/v1", "model": "m"}, "base_url must be an http:// or https:// URL"),
    ({"base_url": "http://h:8000/v1/chat/completions", "model": "m"}, r"without /chat/completions"),
    ({"base_url": "http://user:pw@h/v1", "model": "m"}, "api_key_env"),
    ({"base_url": "http://h/v1"}, "model is required"),
    ({"base_url": "http://h/v1", "model": "m", "max_concurrency": 0}, "max_concurrency must be an integer >= 1"),
    ({"base_url": "http://h/v1", "model": "m", "timeout": 0}, "timeout must be a positive number"),
    ({"base_url": "http://h/v1", "model": "m", "max_retries": -1}, "max_retries must be an integer >= 0"),
    ({"base_url": "http://h/v1", "model": "m", "logprobs": "yes"}, "logprobs must be 'auto'"),
    ({"base_url": "http://h/v1", "model": "m", "report_template": "{question}"}, "report_template must"),
    ({"base_url": "http://h/v1", "model": "m", "seed": 1.5}, "seed must be an integer"),
    ({"base_url": "http://h/v1", "model": "m", "api_key_env": ""}, "api_key_env must be the name"),
])
def test_bad_options_are_refused_naming_the_option(options, match):
    with pytest.raises(ValueError, match=match):
        get_model("openai-compatible", **options)


def test_the_cache_key_is_the_served_model_and_decoding_not_the_server():
    base = OpenAICompatible(base_url="http://a:1/v1", model="m")
    moved = OpenAICompatible(base_url="https://b.example/v1", model="m", max_concurrency=32, timeout=5, max_retries=0,
                             backoff=2, api_key_env="X")
    assert base.config_hash() == moved.config_hash()
    assert "http" not in json.dumps(base.config())
    for change in ({"model": "n"}, {"temperature": 0.5}, {"max_tokens": 8}, {"seed": 1}, {"prompt": "p"},
                   {"system_prompt": "s"}, {"logprobs": False}, {"report_template": "{report}|{question}"}):
        assert OpenAICompatible(**{"base_url": "http://a:1/v1", "model": "m", **change}).config_hash() != base.config_hash()


def test_bad_messages_are_refused_naming_the_index(server):
    adapter = _adapter(server)
    with pytest.raises(ValueError, match=r"messages\[1\].images"):
        adapter.generate([Message(images=[_image(1)]), Message(images=[])])
    with pytest.raises(ValueError, match=r"messages\[0\].options .* equal once stripped"):
        adapter.generate([Message(images=[_image(1)], options=["Yes", " yes"])])
    assert server.requests == 0


# --------------------------------------------------------------------------- answer scores and reasoning


def _top(request: dict) -> list[tuple[str, float]]:
    return [("Yes", -0.1), (" yes", -2.5), ("No", -2.4), ("Maybe", -5.0)]


def test_logprobs_become_option_scores():
    with FakeOpenAIServer(answer=lambda r: "Yes", logprobs=_top) as server:
        closed, unknown, open_ = _adapter(server).generate([
            Message(images=[_image(1)], prompt="Effusion?", options=["yes", "no"]),
            Message(images=[_image(1)], prompt="Which?", options=["left", "right"]),
            Message(images=[_image(1)], prompt="Describe."),
        ])
    assert closed.text == "Yes"
    assert closed.scores == pytest.approx({"yes": math.log(math.exp(-0.1) + math.exp(-2.5)), "no": -2.4})
    assert unknown.scores is None and unknown.text == "Yes"  # options not among the top tokens: no made-up score
    assert open_.scores is None
    asked = {request_text(b): (b.get("logprobs"), b.get("top_logprobs")) for b in server.bodies}
    assert asked == {"Effusion?": (True, TOP_LOGPROBS), "Which?": (True, TOP_LOGPROBS), "Describe.": (None, None)}


def test_no_logprobs_from_the_server_or_logprobs_off_give_no_scores():
    message = Message(images=[_image(1)], prompt="Effusion?", options=["yes", "no"])
    with FakeOpenAIServer(answer=lambda r: "No") as server:
        (generation,) = _adapter(server).generate([message])
    assert generation.text == "No" and generation.scores is None and server.bodies[0]["logprobs"] is True
    with FakeOpenAIServer(answer=lambda r: "No", logprobs=_top) as server:
        (generation,) = _adapter(server, logprobs=False).generate([message])
    assert generation.scores is None and "logprobs" not in server.bodies[0]


def test_reasoning_goes_to_its_own_field(server):
    server.answer = lambda request: "<think>The costophrenic angles are sharp.</think>\nNo effusion."
    (generation,) = _adapter(server).generate([Message(images=[_image(1)], prompt="q")])
    assert generation.text == "No effusion." and generation.reasoning == "The costophrenic angles are sharp."


# --------------------------------------------------------------------------- through the runner


def _report(request: dict) -> str:
    mean = float(request_images(request)[0].mean())
    return "The heart is enlarged." if mean > 130 else "No acute cardiopulmonary process."


def test_a_server_dying_mid_run_is_resumed_by_the_next_run(tmp_path, monkeypatch):
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import IncompleteGenerations, run_sweep
    from shovir.scoring import IncompleteRun, score_run

    monkeypatch.setenv(KEY_ENV, SECRET)
    out, cache = tmp_path / "run", str(tmp_path / "datasets-cache")

    def config(url: str) -> SweepConfig:
        return SweepConfig.from_dict({
            "dataset": {"name": "synthetic", "rows": "pairs", "n_images": 4},
            "models": [{"name": "openai-compatible", "base_url": url, "model": "fake", "max_retries": 1,
                        "backoff": 0.01, "timeout": 5, "api_key_env": KEY_ENV}],
            "conditions": ["baseline", "full_noise"], "seed": 3, "batch_size": 4})

    with FakeOpenAIServer(answer=_report, api_key=SECRET, stop_after=3) as dying:
        with pytest.raises(IncompleteGenerations, match="generations failed"):
            run_sweep(config(dying.base_url), out, cache_dir=cache, progress=False, quiet=True)
    info = json.loads((out / "run.json").read_text())
    entry, calls = info["models"]["openai-compatible"], info["plan"]["calls"]
    assert calls > 4 and entry["made"] == 3 and entry["failed"] == calls - 3 and info["status"] == "incomplete"
    records = [json.loads(line) for line in next((out / "generations").rglob("rank-0.jsonl")).read_text().splitlines()]
    errors = [r["error"] for r in records if r["error"]]
    assert len(errors) == calls - 3 and all("connection error" in e and "after 2 attempts" in e for e in errors)
    with pytest.raises(IncompleteRun, match="generations the plan expects are missing"):
        score_run(out, n_resamples=10)

    with FakeOpenAIServer(answer=_report, api_key=SECRET) as restarted:  # another port: base_url is not in the cache key
        run_sweep(config(restarted.base_url), out, cache_dir=cache, progress=False, quiet=True)
    info = json.loads((out / "run.json").read_text())
    entry = info["models"]["openai-compatible"]
    assert info["status"] == "complete" and entry["reused"] == 3 and entry["made"] == calls - 3 == restarted.requests
    assert score_run(out, n_resamples=10)["complete"]
    texts = {json.loads(line)["text"] for path in (out / "predictions").rglob("*.jsonl")
             for line in path.read_text().splitlines()}
    assert texts <= {"The heart is enlarged.", "No acute cardiopulmonary process."} and len(texts) == 2
    for path in Path(out).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

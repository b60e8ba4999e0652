"""ICARE and GREEN through the OpenAI-compatible backend, against a loopback fake server started by
each test: the request body, scripted 500s / malformed replies / timeouts / slow answers, failures
counted (never agreement), the concurrency limit, the key kept off disk, and a second run that makes
zero calls because every call is cached."""

from __future__ import annotations

import json
import time

import pytest
from fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    fail_first,
    fail_when,
    request_text,
    sentence_judge,
)

from shovir.icare import CallCache, Green, Icare, OpenAIBackend, green, icare

KEY_ENV = "SHOVIR_TEST_JUDGE_KEY"
SECRET = "sk-judge-0b9e-never-on-disk"

REFS = {"a": "Small left pleural effusion. Normal heart size. No pneumothorax.",
        "b": "Cardiomegaly. Mild pulmonary edema."}
HYPS = {"a": "Normal heart size. No pneumothorax.",  # the effusion sentence deleted
        "b": "Cardiomegaly. Mild pulmonary edema. Right rib fracture."}  # one sentence added


def _backend(server: FakeOpenAIServer, **options) -> OpenAIBackend:
    options.setdefault("backoff", 0.01)
    options.setdefault("timeout", 5)
    return OpenAIBackend(base_url=server.base_url, model="judge", **options)


def test_hand_computed_icare_over_http_and_the_request_body():
    # the sentence judge keeps every question (right with its report, "Not stated" without); agent GEN
    # misses the deleted sentence of "a" (GT 2 / 3 there) and agent GT misses the added one of "b" (GEN 2 / 3)
    with FakeOpenAIServer(answer=sentence_judge) as server:
        out = icare(REFS, HYPS, backend=_backend(server), n_questions=5, n_resamples=0)
    assert out["agreements"] == {"gt": 4, "gen": 4} and out["questions"] == {"gt": 5, "gen": 5}
    assert out["icare_gt"] == out["icare_gen"] == 0.8
    assert out["per_report"]["a"]["icare_gt"] == pytest.approx(2 / 3) and out["per_report"]["a"]["icare_gen"] == 1.0
    assert out["per_report"]["b"]["icare_gt"] == 1.0 and out["per_report"]["b"]["icare_gen"] == pytest.approx(2 / 3)
    assert out["counts"]["gt"]["kept"] == 5 and out["counts"]["gt"]["yielded"] == 5
    bodies = server.bodies
    answers = [b for b in bodies if b["max_tokens"] == 10]
    assert answers and all(b["temperature"] == 0.0 and b["top_p"] == 1.0 and b["n"] == 1 and b["seed"] == 123
                           and b["model"] == "judge" and b["messages"][0]["role"] == "user" for b in answers)
    assert out["calls"]["made"] == server.requests and out["calls"]["failed"] == 0


def test_transient_errors_are_retried_and_lasting_ones_are_failures_not_agreement():
    # 500s, a malformed body and a timeout on the first requests are retried by the client; every request
    # about the heart fails for good; one answer is not a letter
    heart = fail_when(lambda r: "say that normal heart size?" in request_text(r), Reply.error(500))
    flaky = fail_first(2, Reply.error(502))
    malformed = {2: Reply.malformed(), 3: Reply.hang(2)}

    def script(index, request):
        return flaky(index, request) or malformed.get(index) or heart(index, request)

    def judge(request):
        text = request_text(request)
        if "pulmonary edema?" in text and "Radiology report" not in text:
            return "Hmm, maybe."  # the blind answer to the edema question cannot be read
        return sentence_judge(request)

    with FakeOpenAIServer(answer=judge, script=script) as server:
        out = icare(REFS, HYPS, backend=_backend(server, timeout=0.5, max_retries=2), n_questions=5, n_resamples=0)
    # heart questions (one per side of "a") lose their filter answers; the edema questions (one per side of "b")
    # have an unreadable blind answer: all are lost to failures, none scored
    assert out["counts"]["gt"]["lost_to_failures"] == 2 and out["counts"]["gen"]["lost_to_failures"] == 2
    assert out["questions"] == {"gt": 3, "gen": 3} and out["agreements"] == {"gt": 2, "gen": 2}
    assert out["calls"]["failed"] > 0
    assert server.requests > out["calls"]["made"]  # the retries


def test_failed_agent_answers_are_counted_apart(tmp_path):
    # agent GT's request about the added rib fracture (read with the reference report of "b") fails for good:
    # the question leaves agreement and is counted, never as the disagreement it would have been
    def script(index, request):
        text = request_text(request)
        if "rib fracture?" in text and '"""\nCardiomegaly. Mild pulmonary edema.\n"""' in text:
            return Reply.error(503, message="overloaded")
        return None

    with FakeOpenAIServer(answer=sentence_judge, script=script) as server:
        out = icare(REFS, HYPS, backend=_backend(server, max_retries=1), n_questions=5, n_resamples=0,
                    log_path=tmp_path / "log.jsonl")
    assert out["answer_failures"] == {"gt": 0, "gen": 1} and out["questions"]["gen"] == 4
    assert out["icare_gen"] == 1.0  # the one disagreement of "b" was the failed question: never a disagreement
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r.get("failure") and r["record"] == "question" and r["kept"]]
    assert len(failed) == 1 and failed[0]["failure"] == "agent GT: HTTP 503 after 2 attempts: overloaded"


def test_requests_run_with_the_configured_concurrency():
    refs = {f"r{i}": f"Finding {i} one. Finding {i} two." for i in range(6)}
    with FakeOpenAIServer(answer=sentence_judge, delay=0.1) as server:
        start = time.perf_counter()
        out = icare(refs, dict(refs), backend=_backend(server, max_concurrency=8), n_questions=2, n_resamples=0)
        elapsed = time.perf_counter() - start
    # 6 MCQ calls, 24 filter calls (12 distinct questions x with/without), 24 answers, 2 + 1 + 1 rounds of <= 8
    assert out["icare_gt"] == 1.0 and server.max_overlap == 8
    assert elapsed < 0.1 * server.requests / 3


def test_a_second_run_makes_zero_calls(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    cache = tmp_path / "calls.jsonl"
    with FakeOpenAIServer(answer=sentence_judge, api_key=SECRET) as server:
        first = icare(REFS, HYPS, backend=_backend(server, api_key_env=KEY_ENV), cache=cache, n_questions=5,
                      n_resamples=0, log_path=tmp_path / "log1.jsonl")
        made = server.requests
    assert first["calls"]["made"] == made > 0
    with FakeOpenAIServer(answer=sentence_judge, api_key=SECRET) as moved:  # another port: base_url is not in the key
        second = icare(REFS, HYPS, backend=_backend(moved, api_key_env=KEY_ENV), cache=cache, n_questions=5,
                       n_resamples=0, log_path=tmp_path / "log2.jsonl")
    assert moved.requests == 0 and second["calls"]["made"] == 0 and second["calls"]["saved"] > 0
    for key in ("icare_gt", "icare_gen", "icare_avg", "agreements", "questions", "counts"):
        assert second[key] == first[key]
    assert (tmp_path / "log1.jsonl").read_text() == (tmp_path / "log2.jsonl").read_text()
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    assert "api_key_env" not in json.dumps(first["config"]) and SECRET not in json.dumps(first)


def test_the_cache_survives_a_torn_line_and_changed_settings_miss_it(tmp_path):
    cache = tmp_path / "calls.jsonl"
    with FakeOpenAIServer(answer=sentence_judge) as server:
        icare(REFS, HYPS, backend=_backend(server), cache=cache, n_questions=5, n_resamples=0)
        made = server.requests
        with open(cache, "a", encoding="utf-8") as handle:
            handle.write('{"key": "abc", "text": "trunc')  # a crash mid-write
        reloaded = CallCache(cache)
        assert reloaded.skipped == 1 and len(reloaded) == made
        again = icare(REFS, HYPS, backend=_backend(server), cache=cache, n_questions=5, n_resamples=0)
        assert again["calls"]["made"] == 0
        icare(REFS, HYPS, backend=_backend(server, temperature=0.5), cache=cache, n_questions=5, n_resamples=0)
        assert server.requests == 2 * made  # a different decoding is a different call
    lines = cache.read_text().splitlines()
    assert all(json.loads(line) for line in lines if not line.startswith('{"key": "abc"'))


def test_misconfiguration_raises_naming_the_option(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with FakeOpenAIServer(answer=sentence_judge, api_key=SECRET) as server:
        with pytest.raises(ValueError, match=f"api_key_env: the environment variable '{KEY_ENV}' is not set"):
            icare(REFS, HYPS, backend=_backend(server, api_key_env=KEY_ENV), n_resamples=0)
        with pytest.raises(ValueError, match="HTTP 401.*check api_key_env"):
            icare(REFS, HYPS, backend=_backend(server), n_resamples=0)
    with pytest.raises(ValueError, match="base_url must be an http"):
        OpenAIBackend(base_url="localhost:8000", model="m")


def test_green_over_http_parses_scores_and_caches(tmp_path):
    cache = tmp_path / "green.jsonl"
    with FakeOpenAIServer(answer=sentence_judge, script=fail_first(1, Reply.error(500))) as server:
        evaluator = Green(_backend(server), cache=cache)
        out = evaluator.evaluate(REFS, HYPS, n_resamples=0, log_path=tmp_path / "green_log.jsonl")
        evaluator.close()
        assert server.requests == 3  # one retried 500, then one call per pair
    # a: 2 matched, 1 missing -> 2/3; b: 2 matched, 1 false -> 2/3
    assert [r["green"] for r in out["reports"]] == [pytest.approx(2 / 3)] * 2 and out["green"] == pytest.approx(2 / 3)
    assert out["reports"][0]["significant"] == [0, 1, 0, 0, 0, 0] and out["reports"][1]["significant"][0] == 1
    assert out["reports"][0]["significant_errors"]["b"] == ["small left pleural effusion"]
    assert out["reports"][0]["explanation"] == "Compared sentence by sentence."
    assert out["error_free"]["a"] == 0.5 and out["error_free"]["b"] == 0.5 and out["failed"] == 0
    with FakeOpenAIServer(answer=sentence_judge) as server:
        again = green(REFS, HYPS, backend=_backend(server), cache=cache, n_resamples=0)
        assert server.requests == 0 and again["calls"]["made"] == 0 and again["green"] == out["green"]
    with FakeOpenAIServer(answer=sentence_judge, script=fail_when(lambda r: "Cardiomegaly" in request_text(r),
                                                                  Reply.error(503))) as server:
        partial = green(REFS, HYPS, backend=_backend(server, max_retries=0), n_resamples=0)
    assert partial["failed"] == 1 and partial["n"] == 1 and partial["reports"][1]["green"] is None
    assert partial["reports"][1]["failure"].startswith("HTTP 503")


def test_the_evaluator_shares_one_client_and_closes_it():
    with FakeOpenAIServer(answer=sentence_judge) as server:
        with Icare(_backend(server, max_concurrency=3), n_questions=2) as evaluator:
            evaluator.evaluate(REFS, HYPS, n_resamples=0)
            usage = evaluator.backend.usage()
        assert usage["requests"] == server.requests and usage["failed"] == 0 and usage["prompt_tokens"] > 0

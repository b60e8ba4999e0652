"""ICARE over the OpenAI-compatible backend: the concurrency gain, and a rerun that makes no call.

Against the fake server of ``tests/fake_openai_server.py`` (loopback, HTTP/1.1 keep-alive) playing
a judge that answers every request after ``delay`` seconds (``sentence_judge``: one question per
report sentence, answered by looking the sentence up), ICARE runs over ``pairs`` report pairs
(each generated report deletes the first sentence of its reference) twice in the same process:

* with ``max_concurrency=concurrency`` (the configured limit), over all pairs;
* with ``max_concurrency=1`` (one request at a time), over the first ``serial_pairs`` pairs
  (20 by default, to keep the baseline under half a minute; ``--serial-pairs 100`` times the very
  same workload).

``ratio`` compares the wall time per request of the two runs (the same as the ratio of wall times
when ``serial_pairs == pairs``); the target is >= 10x. A third run over the same pairs with the
first run's cache file must make zero calls.

Usage: ``python benchmarks/icare_concurrency.py [--pairs 100] [--delay 0.1] [--concurrency 32]
[--questions 2] [--serial-pairs 20]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fake_openai_server import FakeOpenAIServer, sentence_judge  # noqa: E402

from shovir.icare import Icare, OpenAIBackend  # noqa: E402

FINDINGS = ["small left pleural effusion", "mild cardiomegaly", "no pneumothorax", "right lower lobe atelectasis",
            "mild pulmonary edema", "left rib fracture", "normal mediastinal contours", "right chest port"]


def _pairs(n: int) -> tuple[dict[str, str], dict[str, str]]:
    refs, hyps = {}, {}
    for i in range(n):
        sentences = [f"{FINDINGS[(i + k) % len(FINDINGS)].capitalize()} {i}." for k in range(3)]
        refs[f"r{i:03d}"] = " ".join(sentences)
        hyps[f"r{i:03d}"] = " ".join(sentences[1:])  # the first finding deleted
    return refs, hyps


def _timed(server: FakeOpenAIServer, refs: dict[str, str], hyps: dict[str, str], concurrency: int, questions: int,
           cache: Path | None) -> tuple[float, dict, int]:
    before = server.requests
    backend = OpenAIBackend(base_url=server.base_url, model="bench-judge", max_concurrency=concurrency, timeout=30)
    with Icare(backend, cache=cache, n_questions=questions) as evaluator:
        start = time.perf_counter()
        result = evaluator.evaluate(refs, hyps, n_resamples=0)
        elapsed = time.perf_counter() - start
    return elapsed, result, server.requests - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--questions", type=int, default=2, help="questions per report (ICARE's default is 40)")
    parser.add_argument("--serial-pairs", type=int, default=20,
                        help="pairs of the one-at-a-time run (default 20, about 24 s; 100 measures the same workload)")
    args = parser.parse_args()
    refs, hyps = _pairs(args.pairs)
    serial_n = args.serial_pairs or args.pairs
    serial_refs = dict(list(refs.items())[:serial_n])
    serial_hyps = {k: hyps[k] for k in serial_refs}

    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "calls.jsonl"
        with FakeOpenAIServer(answer=sentence_judge, delay=args.delay) as server:
            concurrent, result, concurrent_requests = _timed(server, refs, hyps, args.concurrency, args.questions, cache)
            overlap = server.max_overlap
            serial, _, serial_requests = _timed(server, serial_refs, serial_hyps, 1, args.questions, None)
            rerun, again, rerun_requests = _timed(server, refs, hyps, args.concurrency, args.questions, cache)

    ratio = (serial / serial_requests) / (concurrent / concurrent_requests)
    print(f"ICARE over {args.pairs} report pairs, {args.questions} questions per report, server delay {args.delay:g} s")
    print(f"  concurrency {args.concurrency}: {concurrent:6.2f} s for {concurrent_requests} requests "
          f"(at most {overlap} in flight); ICARE-GT {result['icare_gt']:.3f}, ICARE-GEN {result['icare_gen']:.3f}")
    print(f"  one at a time:  {serial:6.2f} s for {serial_requests} requests ({serial_n} pairs)")
    print(f"  ratio (wall time per request, one at a time / concurrent): {ratio:.1f}x (target >= 10x)")
    print(f"  rerun with the cache: {rerun:.2f} s, {rerun_requests} requests, calls made {again['calls']['made']}, "
          f"saved {again['calls']['saved']} (target: 0 made)")
    if ratio < 10 or rerun_requests or again["calls"]["made"]:
        sys.exit(1)


if __name__ == "__main__":
    main()

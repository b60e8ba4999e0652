"""The openai-compatible adapter's concurrency gain and its own per-request cost.

Against the fake server of ``tests/fake_openai_server.py`` (loopback, HTTP/1.1 keep-alive), with
one synthetic chest X-ray (320×320, 8-bit grayscale) per message:

* **throughput ratio**: ``n`` messages answered after ``delay`` seconds each, with
  ``max_concurrency=16`` and with ``max_concurrency=1`` in the same process;
  ``ratio = time(1) / time(16)`` (target >= 12×; the ideal is 16× for 64 messages at 0.2 s);
* **overhead per request**: the same messages with a server that answers at once, so the wall
  time is what shovir spends per request (PNG + base64 + JSON encoding, HTTP, parsing) plus the
  fake server's own handling; reported one request at a time and with 16 in flight
  (target <= 5 ms), beside the encoding time alone;
* the wall time beyond the server's delay in the concurrent delayed run, per request.

The fake server answers with a constant text, so it does not decode the images.

Usage: ``python benchmarks/server_concurrency.py [--n 64] [--delay 0.2] [--concurrency 16]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fake_openai_server import FakeOpenAIServer  # noqa: E402

from shovir.models import Message  # noqa: E402
from shovir.models.openai_compat import OpenAICompatible  # noqa: E402


def _messages(n: int) -> list[Message]:
    """``n`` distinct 320×320 grayscale images with a chest-X-ray-like texture."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:320, 0:320]
    base = 120 + 60 * np.sin(x / 23.0) * np.cos(y / 31.0)
    out = []
    for i in range(n):
        pixels = np.clip(base + rng.normal(0, 12, base.shape) + i, 0, 255).astype(np.uint8)
        out.append(Message(images=[Image.fromarray(pixels, mode="L")], prompt=f"Describe image {i}.", seed=i))
    return out


def _timed(server: FakeOpenAIServer, messages: list[Message], concurrency: int) -> float:
    with OpenAICompatible(base_url=server.base_url, model="bench", max_concurrency=concurrency, timeout=30) as model:
        model.generate(messages[:concurrency])  # start the workers and their connections
        start = time.perf_counter()
        generations = model.generate(messages)
        elapsed = time.perf_counter() - start
    assert all(g.ok for g in generations), [g.error for g in generations if not g.ok][:3]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    messages = _messages(args.n)
    n, c = args.n, args.concurrency

    with FakeOpenAIServer(answer=lambda request: "No acute cardiopulmonary process.", delay=args.delay) as server:
        serial = _timed(server, messages, 1)
        concurrent = _timed(server, messages, c)
        overlap = server.max_overlap
    with FakeOpenAIServer(answer=lambda request: "No acute cardiopulmonary process.") as server:
        zero_serial = _timed(server, messages, 1)
        zero_concurrent = _timed(server, messages, c)

    adapter = OpenAICompatible(base_url="http://127.0.0.1:1/v1", model="bench")
    start = time.perf_counter()
    sizes = [len(json.dumps(adapter.request_body(m))) for m in messages]
    encode = (time.perf_counter() - start) / n

    ideal = math.ceil(n / c) * args.delay
    print(f"{n} messages, server delay {args.delay * 1000:.0f} ms, request body {np.mean(sizes) / 1024:.0f} KiB")
    print(f"  max_concurrency=1 : {serial:6.2f} s  ({n / serial:6.1f} req/s)")
    print(f"  max_concurrency={c}: {concurrent:6.2f} s  ({n / concurrent:6.1f} req/s; server saw {overlap} at once)")
    print(f"  throughput ratio  : {serial / concurrent:6.1f}x   (target >= 12x, ideal {n * args.delay / ideal:.0f}x)")
    print(f"  beyond the delay, {c} in flight: {(concurrent - ideal) / n * 1000:.2f} ms per request")
    print(f"  beyond the delay, 1 in flight : {(serial - n * args.delay) / n * 1000:.2f} ms per request")
    print("server answering at once (shovir's overhead + the fake server's handling):")
    print(f"  1 in flight : {zero_serial / n * 1000:.2f} ms per request")
    print(f"  {c} in flight: {zero_concurrent / n * 1000:.2f} ms per request   (target <= 5 ms)")
    print(f"  of which building one request body (PNG + base64 + JSON): {encode * 1000:.2f} ms")


if __name__ == "__main__":
    main()

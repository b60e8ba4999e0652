#!/usr/bin/env bash
# GPU check of the vllm adapter: reports/s of the in-process adapter and of the vLLM engine.
#
# On a machine with a CUDA GPU and vLLM (pip install "shovir[vllm]"), this builds the tiny random
# LLaVA of shovir.models.testing offline, runs the same N synthetic messages through the in-process
# `hf-image-text-to-text` adapter (batches of 16) and through the `vllm` adapter (one engine call),
# both greedy in bfloat16, and prints reports/s for each, their ratio, and how many greedy texts
# agree. Engine start-up and a warm-up call are timed apart from the measured call. Without vLLM
# or without a GPU it says so and exits with status 2; it stops after GPU_CHECK_TIMEOUT seconds
# (default 420) whatever happens.
#
# Why the tiny LLaVA and not a tiny Qwen2-VL: vLLM serves LlavaForConditionalGeneration natively
# (CLIP tower + Llama), and build_tiny_llava needs no download. Its one unusual trait is the text
# head size, 16 (hidden 32, 2 heads), which FlashAttention does not take; vLLM's V1 engine then
# chooses another attention backend itself (FlexAttention). A tiny Qwen2-VL would need its own
# tokenizer with the vision special tokens and processor built by hand, which is more untested
# code for the same check. If the engine refuses the model, the script prints vLLM's error and a
# hint (VLLM_ATTENTION_BACKEND=FLEX_ATTENTION) and exits with status 1.
#
# With a 48k-parameter model both adapters spend their time on overhead (image processing,
# scheduling, Python), not on kernels: the ratio says how much faster vLLM's batching and
# scheduling are, not what a 4B model would gain.
#
# Usage: bash benchmarks/gpu_check.sh [--messages 256] [--max-new-tokens 24]
#        (PYTHON=... picks the interpreter; default: python)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec timeout "${GPU_CHECK_TIMEOUT:-420}" "${PYTHON:-python}" - "$@" <<'PY'
"""The Python part of benchmarks/gpu_check.sh (see the comments there)."""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from shovir.models import Message
from shovir.models.hf import ImageTextToTextAdapter
from shovir.models.testing import build_tiny_llava
from shovir.models.vllm_engine import INSTALL, VLLMEngine

PROMPT = "Is there an effusion ?"  # words of the tiny tokenizer's corpus


def missing_prerequisites() -> list[str]:
    problems = []
    try:
        import vllm  # noqa: F401
    except ImportError as error:
        problems.append(f"vllm is not installed ({error}); install it with {INSTALL}")
    try:
        import torch
    except ImportError:
        problems.append("torch is not installed; install the CUDA build of torch, then shovir[vllm]")
    else:
        if not torch.cuda.is_available():
            problems.append("no CUDA GPU is visible (torch.cuda.is_available() is False)")
    return problems


def messages(count: int) -> list[Message]:
    rng = np.random.default_rng(0)
    return [Message(images=[Image.fromarray(rng.integers(0, 256, (64, 64), dtype=np.uint8), mode="L")], prompt=PROMPT)
            for _ in range(count)]


def timed(adapter, batch: list[Message]) -> tuple[float, list[str]]:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    texts = [g.text for g in adapter.generate(batch)]
    torch.cuda.synchronize()
    return time.perf_counter() - start, texts


def main() -> int:
    parser = argparse.ArgumentParser(description="reports/s of hf-image-text-to-text and vllm on a tiny LLaVA")
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    args = parser.parse_args()

    problems = missing_prerequisites()
    if problems:
        for problem in problems:
            print(f"gpu_check: {problem}")
        print("gpu_check: nothing was run; run this script on a machine with a CUDA GPU and vLLM")
        return 2

    import torch

    batch = messages(args.messages)
    scratch = Path(tempfile.mkdtemp(prefix="shovir-gpu-check-"))
    try:
        tiny = scratch / "tiny-llava"
        build_tiny_llava(tiny)
        print(f"{args.messages} synthetic messages, tiny random LLaVA, greedy, {args.max_new_tokens} new tokens, bfloat16, "
              f"{torch.cuda.get_device_name(0)}")

        hf = ImageTextToTextAdapter(str(tiny), prompt=PROMPT, max_new_tokens=args.max_new_tokens, dtype="bfloat16",
                                    device="cuda", batch_size=args.hf_batch_size)
        hf.generate(batch[:args.hf_batch_size])  # load and warm up
        hf_seconds, hf_texts = timed(hf, batch)
        del hf
        gc.collect()
        torch.cuda.empty_cache()

        engine = VLLMEngine(str(tiny), prompt=PROMPT, max_new_tokens=args.max_new_tokens, dtype="bfloat16",
                            gpu_memory_utilization=args.gpu_memory_utilization)
        start = time.perf_counter()
        try:
            engine.load()
        except Exception as error:  # the engine's own refusal, reported as such
            print(f"gpu_check: vLLM could not start an engine on the tiny LLaVA: {type(error).__name__}: {error}")
            print("gpu_check: if it names the attention backend or head size, retry with "
                  "VLLM_ATTENTION_BACKEND=FLEX_ATTENTION")
            return 1
        startup = time.perf_counter() - start
        engine.generate(batch[:16])  # warm-up
        vllm_seconds, vllm_texts = timed(engine, batch)

        hf_rate, vllm_rate = args.messages / hf_seconds, args.messages / vllm_seconds
        agree = sum(a == b for a, b in zip(hf_texts, vllm_texts))
        print(f"  hf-image-text-to-text (in-process, batch {args.hf_batch_size}): {hf_seconds:7.2f} s = "
              f"{hf_rate:8.1f} reports/s")
        print(f"  vllm (one engine call, engine start {startup:.0f} s not counted): {vllm_seconds:7.2f} s = "
              f"{vllm_rate:8.1f} reports/s")
        print(f"  ratio vllm / hf: {vllm_rate / hf_rate:.2f}x")
        print(f"  greedy texts identical for {agree}/{args.messages} messages (bfloat16 rounding differs between "
              "the two engines; a random model has many near ties)")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
PY

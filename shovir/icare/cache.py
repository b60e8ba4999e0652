"""The on-disk cache of LLM calls: JSON lines, append-only, crash-safe, no pickle.

Every call of an ICARE or GREEN judge is keyed by what determines its reply (:func:`call_key`):
the backend's identity (backend kind, model, decoding parameters that change outputs), the
prompt, and the call's own parameters (maximum tokens, seed). The key is the SHA-256 of that
canonical JSON, so moving a server, changing its concurrency or resuming a run reuses every reply,
while a changed prompt or model never does.

The file holds one JSON object per line: ``{"key", "backend", "model", "kind", "text"}``. Lines
are only ever appended, each in one ``write`` of a complete line followed by a flush, so a run
that dies loses at most the line being written; such a torn line (or any line that is not a
complete record) is skipped when the file is read again and counted in :attr:`CallCache.skipped`,
and the next append starts on a fresh line. Only successful replies are stored: a failed call is
made again by the next run. Without a path the cache lives in memory for the process.

>>> cache = CallCache()
>>> key = call_key({"backend": "offline"}, "prompt", {"max_tokens": 10})
>>> cache.get(key) is None
True
>>> cache.put(key, "A", backend="offline", model="rule", kind="answer")
>>> cache.get(key), len(cache)
('A', 1)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CallCache", "call_key"]


def call_key(identity: Mapping[str, Any], prompt: str, parameters: Mapping[str, Any]) -> str:
    """The cache key of one call: SHA-256 of the canonical JSON of backend identity, prompt and parameters.

    >>> a = call_key({"backend": "openai", "model": "m"}, "p", {"seed": 1})
    >>> a == call_key({"model": "m", "backend": "openai"}, "p", {"seed": 1}), a == call_key({"backend": "openai", "model": "m"}, "p", {"seed": 2})
    (True, False)
    """
    text = json.dumps({"identity": identity, "prompt": prompt, "parameters": parameters}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CallCache:
    """Replies by call key, in memory and (with ``path``) in an append-only JSON-lines file.

    Args:
        path: the JSONL file (created with its folder on the first write), or ``None``.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "calls.jsonl"
    >>> CallCache(path).put("k1", "B", backend="openai", model="m", kind="answer")
    >>> _ = path.open("a").write('{"key": "k2", "te')   # a line torn by a crash
    >>> reopened = CallCache(path)
    >>> reopened.get("k1"), reopened.skipped
    ('B', 1)
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.skipped = 0
        self._replies: dict[str, str] = {}
        self._lock = threading.Lock()
        self._needs_newline = False
        if self.path is not None and self.path.is_dir():
            raise ValueError(f"cache: {self.path} is a folder; pass a file path such as {self.path / 'calls.jsonl'}")
        if self.path is not None and self.path.is_file():
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes()
        self._needs_newline = bool(data) and not data.endswith(b"\n")
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key, text = record["key"], record["text"]
                if not isinstance(key, str) or not isinstance(text, str):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                self.skipped += 1  # a line torn by a crash, or not ours: never trusted
                continue
            self._replies[key] = text

    def __len__(self) -> int:
        return len(self._replies)

    def __contains__(self, key: object) -> bool:
        return key in self._replies

    def get(self, key: str) -> str | None:
        """The cached reply of ``key``, or ``None``."""
        return self._replies.get(key)

    def put(self, key: str, text: str, *, backend: str, model: str, kind: str) -> None:
        """Store a successful reply (appended to the file at once)."""
        if not isinstance(text, str):
            raise ValueError(f"text: the cache stores reply strings, got {type(text).__name__}")
        with self._lock:
            if self._replies.get(key) == text:
                return
            self._replies[key] = text
            if self.path is None:
                return
            line = json.dumps({"key": key, "backend": backend, "model": model, "kind": kind, "text": text},
                              ensure_ascii=False) + "\n"
            if self._needs_newline:
                line = "\n" + line
                self._needs_newline = False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()

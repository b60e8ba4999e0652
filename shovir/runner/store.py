"""The per-generation cache: append-only JSONL records, one file per rank, resumable after anything.

``generations/<model config hash>/rank-<r>.jsonl`` holds :class:`~shovir.runner.records.GenerationRecord`
lines keyed by their generation key (what determines the output, see :mod:`shovir.runner.plan`),
not by the sweep: a sweep that adds a model, a condition or samples to a finished run finds every
generation it already made and produces only the new ones.

Each record is one line, written and flushed (and fsynced) as soon as its batch is generated.
A run killed at any moment leaves at worst a truncated last line: reading ignores it, and the
next append first cuts the file back to its last complete line, so the record is regenerated
rather than lost or duplicated. The rank files of a model are read together, so a restart may
use a different number of processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

from shovir.runner.records import GenerationRecord

__all__ = ["RecordWriter", "read_lines", "GenerationStore"]


def _trim_partial_line(path: Path) -> None:
    """Cut a file back to its last newline (a killed writer may have left half a line)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 1))
        if handle.read(1) == b"\n":
            return
        position = size - 1
        chunk = 1 << 16
        while position > 0:
            start = max(0, position - chunk)
            handle.seek(start)
            data = handle.read(position - start)
            index = data.rfind(b"\n")
            if index >= 0:
                handle.truncate(start + index + 1)
                return
            position = start
        handle.truncate(0)


class RecordWriter:
    """Appends JSON lines to ``path``; use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _trim_partial_line(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, lines: Iterable[str | GenerationRecord]) -> None:
        """Write a batch of records and push them to disk before returning."""
        text = "".join((line if isinstance(line, str) else line.to_json()) + "\n" for line in lines)
        self._handle.write(text)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_lines(paths: Iterable[str | Path]) -> Iterator[tuple[str, str]]:
    """``(where, line)`` of every complete line of several files, ``where`` being ``file:line``.

    The text after the last newline of a file is a partial record of a killed writer and is
    skipped; every other line is returned for the caller to parse (a corrupt one there cannot come
    from an interruption and is an error naming ``where``).
    """
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines[:-1], start=1):
            if line.strip():
                yield f"{path}:{number}", line


class GenerationStore:
    """The generations of one model configuration (a folder of rank files)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def files(self) -> list[Path]:
        return sorted(self.root.glob("rank-*.jsonl")) if self.root.is_dir() else []

    def records(self) -> dict[str, GenerationRecord]:
        """Every usable generation by key; a failure is superseded by a later success, and of two
        successes (a batch rewritten after a restart before its flush was recorded) the first stays."""
        out: dict[str, GenerationRecord] = {}
        for where, line in read_lines(self.files()):
            record = GenerationRecord.from_json(line, where)
            if record.ok and record.key not in out:
                out[record.key] = record
        return out

    def failures(self) -> dict[str, str]:
        """Keys whose latest attempts all failed, with the last error."""
        errors: dict[str, str] = {}
        succeeded: set[str] = set()
        for where, line in read_lines(self.files()):
            record = GenerationRecord.from_json(line, where)
            if record.ok:
                succeeded.add(record.key)
            else:
                errors[record.key] = record.error or "no text"
        return {key: error for key, error in errors.items() if key not in succeeded}

    def writer(self, rank: int) -> RecordWriter:
        return RecordWriter(self.root / f"rank-{rank}.jsonl")

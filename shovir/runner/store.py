"""Append-only JSONL records, one file per rank, resumable after any interruption.

Each record is one line, written and flushed (and fsynced) as soon as its batch is generated.
A run killed at any moment leaves at worst a truncated last line: reading ignores it, and the
next append first cuts the file back to its last complete line, so the record is regenerated
rather than lost or duplicated. Records are keyed by ``sample_id|condition``; the rank files of a
model are read together, so a restart may use a different number of processes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = ["record_key", "RecordWriter", "read_records", "merge_records"]


def record_key(record: dict[str, Any]) -> str:
    """``"<sample_id>|<condition>"``.

    >>> record_key({"sample_id": "img-1::Edema", "condition": "oco_p60"})
    'img-1::Edema|oco_p60'
    """
    return f"{record['sample_id']}|{record['condition']}"


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
    """Appends records to ``path``; use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _trim_partial_line(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        """Write a batch of records and push them to disk before returning."""
        self._handle.write("".join(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n" for record in records))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Records from several JSONL files; a truncated *last* line is skipped, a corrupt line
    anywhere else is an error (it cannot come from an interruption)."""
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        complete = lines[:-1]  # the text after the last newline is either "" or a partial record
        for number, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: corrupt record ({error}); delete the line to regenerate it") from None


def merge_records(paths: Iterable[str | Path], expected_keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    """One record per expected key from the rank files; raises if any key is missing.

    Duplicates (a batch rewritten after a restart before its flush was recorded) keep the first.
    """
    records: dict[str, dict[str, Any]] = {}
    for record in read_records(paths):
        records.setdefault(record_key(record), record)
    expected = list(expected_keys)
    missing = [key for key in expected if key not in records]
    if missing:
        raise ValueError(f"{len(missing)} records are missing (e.g. {missing[:3]}); run the sweep again to complete it")
    return {key: records[key] for key in expected}

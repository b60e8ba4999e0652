"""What the leaderboard shows, computed from ``results.json`` files and nothing else.

A leaderboard folder holds results documents (``*.json``, any depth; a run folder's
``results.json`` counts). Each document is one scored run on one dataset; its models become
leaderboard entries, named by alias — prefixed with the file's name when two files share an
alias on one dataset. Values, intervals and n come from :func:`shovir.report.tables.protocol_cells`,
the same cells as the run's own tables.

Uploads are JSON documents checked here against the results schema before anything is written:
size, JSON syntax, :func:`shovir.results.check_results`, and the types of every field a table
reads. A valid upload is stored under a name derived from its content, inside the folder.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from shovir.protocols import get_protocol
from shovir.report.tables import Cell, protocol_cells
from shovir.results import Results, check_results

__all__ = ["Entry", "Board", "load_board", "validate_upload", "store_upload", "fetch_results", "space_results_repo",
           "MAX_UPLOAD_BYTES", "UploadRejected"]

MAX_UPLOAD_BYTES = 20 * 1024 * 1024
"""The largest results file an upload may be (a 10-model MIMIC-CXR sweep is well under 1 MB)."""


class UploadRejected(ValueError):
    """An uploaded file is not a results document this leaderboard can show; the message says why."""


@dataclass
class Entry:
    """One model of one scored run."""

    name: str
    alias: str
    dataset: str
    source: str
    adapter: str
    results: Results

    def detail(self) -> dict[str, Any]:
        """What the model's detail view shows: where it comes from and how complete it is."""
        doc = self.results.doc
        run = doc.get("run", {}) if isinstance(doc.get("run"), Mapping) else {}
        config = run.get("config", {}) if isinstance(run.get("config"), Mapping) else {}
        model_config = next((m for m in config.get("models", []) if isinstance(m, Mapping) and m.get("alias") == self.alias),
                            None)
        return {"model": self.name, "alias": self.alias, "adapter": self.adapter, "dataset": self.dataset,
                "source": self.source, "config_hash": run.get("config_hash"), "model_config": model_config,
                "scoring": doc.get("scoring"), "versions": doc.get("versions"), "complete": doc.get("complete"),
                "coverage": self.results.coverage().get(self.alias)}


@dataclass
class Board:
    """Every entry of a leaderboard folder, and the files that could not be read (with why)."""

    entries: list[Entry] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)

    def datasets(self, protocol: str | None = None) -> list[str]:
        return sorted({e.dataset for e in self.entries if protocol is None or protocol in e.results.protocols(e.alias)})

    def protocols(self) -> list[str]:
        seen: dict[str, None] = {}
        for entry in self.entries:
            seen.update(dict.fromkeys(entry.results.protocols(entry.alias)))
        return list(seen)

    def metrics(self, protocol: str) -> list[str]:
        """The protocol's table columns, in declaration order."""
        return [column.label for column in get_protocol(protocol).table]

    def cells(self, protocol: str, dataset: str) -> list[dict[str, Any]]:
        """One row per entry on ``dataset``: ``{"model": name, <column label>: Cell, ...}``."""
        rows = []
        for entry in self.entries:
            if entry.dataset != dataset or protocol not in entry.results.protocols(entry.alias):
                continue
            for row in protocol_cells(entry.results, protocol):
                if row["model"] == entry.alias:
                    rows.append({**row, "model": entry.name})
        return rows

    def overview(self, protocol: str, dataset: str, sort_by: str | None = None, descending: bool = True) -> tuple[list[str], list[list[Any]]]:
        """``(headers, rows)``: every metric's value per model (numbers, so columns sort as numbers),
        sorted by ``sort_by`` (missing values last).

        >>> board = Board([_example_entry("a", 0.5), _example_entry("b", 0.9)])
        >>> headers, rows = board.overview("shovir", "synthetic", "FR OCO")
        >>> [(row[0], row[headers.index("FR OCO")]) for row in rows]
        [('b', 0.9), ('a', 0.5)]
        """
        metrics = self.metrics(protocol)
        rows = [[row["model"], *[_number(row[m]) for m in metrics]] for row in self.cells(protocol, dataset)]
        if sort_by is not None:
            if sort_by not in metrics:
                raise ValueError(f"sort_by: {sort_by!r} is not a {protocol} column; choose one of {', '.join(metrics)}")
            index = 1 + metrics.index(sort_by)
            present = sorted((r for r in rows if r[index] is not None), key=lambda r: r[index], reverse=descending)
            rows = present + [r for r in rows if r[index] is None]
        return ["model", *metrics], rows

    def metric_table(self, protocol: str, dataset: str, metric: str) -> tuple[list[str], list[list[Any]]]:
        """``(headers, rows)`` of one metric: value, its 95% interval, n, and whether n is small;
        best first where the metric has a direction, else by value.

        >>> board = Board([_example_entry("a", 0.5), _example_entry("b", 0.9)])
        >>> board.metric_table("shovir", "synthetic", "FR OCO")[1]
        [['b', 0.9, 0.8, 0.95, 40, ''], ['a', 0.5, 0.8, 0.95, 40, '']]
        """
        if metric not in self.metrics(protocol):
            raise ValueError(f"metric: {metric!r} is not a {protocol} column; choose one of {', '.join(self.metrics(protocol))}")
        rows = []
        for row in self.cells(protocol, dataset):
            cell: Cell = row[metric]
            rows.append([row["model"], _number(cell), _number(cell.low), _number(cell.high), cell.n,
                         "fewer than 10 units" if cell.flagged else ""])
        rows.sort(key=lambda r: (r[1] is None, -(r[1] or 0.0)))
        return ["model", metric, "95% CI low", "95% CI high", "n", "note"], rows

    def entry(self, name: str) -> Entry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise ValueError(f"model: no entry named {name!r}; entries are {', '.join(e.name for e in self.entries)}")

    def merged(self, dataset: str) -> Results:
        """One results document holding every entry on ``dataset`` under its leaderboard name (for
        the protocol figures, which draw one document's models)."""
        models = {}
        for entry in self.entries:
            if entry.dataset == dataset:
                models[entry.name] = entry.results.doc["models"][entry.alias]
        first = next(e.results.doc for e in self.entries if e.dataset == dataset)
        return Results({**first, "models": models})


def _number(value: Any) -> float | None:
    if isinstance(value, Cell):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), 4)


def _dataset_of(doc: Mapping[str, Any]) -> str:
    run = doc.get("run")
    config = run.get("config") if isinstance(run, Mapping) else None
    dataset = config.get("dataset") if isinstance(config, Mapping) else None
    name = dataset.get("name") if isinstance(dataset, Mapping) else dataset
    return str(name) if isinstance(name, str) and name else "unknown"


def load_board(folder: str | Path) -> Board:
    """Read every results document under ``folder``; files that are not one are listed in
    ``Board.problems`` (with the reason), never silently skipped.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "notes.json").write_text("[1, 2]")
    ...     board = load_board(folder)
    >>> board.entries, list(board.problems.values())
    ([], ['expected a JSON object, got list'])
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {str(folder)!r} does not exist; pass the folder holding results.json files")
    board = Board()
    claimed: dict[tuple[str, str], int] = {}
    loaded = []
    for path in sorted(folder.rglob("*.json")):
        relative = path.relative_to(folder).as_posix()
        try:
            doc = validate_upload(path.read_bytes(), relative)
        except UploadRejected as error:
            board.problems[relative] = str(error).split(": ", 1)[-1]
            continue
        loaded.append((relative, doc))
        for alias in doc["models"]:
            key = (_dataset_of(doc), alias)
            claimed[key] = claimed.get(key, 0) + 1
    for relative, doc in loaded:
        results = Results(doc)
        dataset = _dataset_of(doc)
        for alias, model in doc["models"].items():
            name = alias if claimed[(dataset, alias)] == 1 else f"{alias} ({relative})"
            board.entries.append(Entry(name, alias, dataset, relative, str(model.get("adapter", "")), results))
    return board


def _check_protocol_sections(doc: Mapping[str, Any], where: str) -> None:
    for alias, model in doc["models"].items():
        if not isinstance(alias, str) or not alias.strip():
            raise UploadRejected(f"{where}: model aliases must be non-empty strings, got {alias!r}")
        for protocol, bindings in model["protocols"].items():
            if not isinstance(bindings, Mapping):
                raise UploadRejected(f"{where}: models[{alias!r}].protocols[{protocol!r}] must be an object of metric -> "
                                     "conditions")
            for key, conditions in bindings.items():
                if not isinstance(conditions, Mapping):
                    raise UploadRejected(f"{where}: models[{alias!r}].protocols[{protocol!r}][{key!r}] must be an object "
                                         "of condition -> result")
                for condition, result in conditions.items():
                    if not isinstance(result, Mapping):
                        raise UploadRejected(f"{where}: models[{alias!r}].protocols[{protocol!r}][{key!r}][{condition!r}] "
                                             f"must be an object (a metric's result), got {type(result).__name__}")
    for alias in doc["models"]:
        for protocol in doc["models"][alias]["protocols"]:
            try:
                get_protocol(protocol)
            except ValueError as error:
                raise UploadRejected(f"{where}: models[{alias!r}]: {error}") from None
    try:  # every cell a table shows must be readable: a wrong type is refused here, not in the page
        results = Results(doc)
        for protocol in results.protocols():
            for row in protocol_cells(results, protocol):
                for label, cell in row.items():
                    if isinstance(cell, Cell) and cell.value is not None and _number(cell) is None:
                        raise UploadRejected(f"{where}: {row['model']!r} {protocol} column {label!r} is {cell.value!r}, "
                                             "not a number")
    except (AttributeError, TypeError, KeyError) as error:
        raise UploadRejected(f"{where}: a result has the wrong shape ({error}); upload the results.json that "
                             "`shovir score` wrote") from None


def validate_upload(data: bytes, where: str = "upload") -> dict[str, Any]:
    """Parse and check an uploaded results file; raise :class:`UploadRejected` saying what is wrong.

    Only :mod:`json` reads the bytes: nothing in a file is ever executed.

    >>> validate_upload(b'{"schema_version": "2.0", "models": {}}')["models"]
    {}
    >>> validate_upload(b"not json")
    Traceback (most recent call last):
    ...
    shovir.leaderboard.data.UploadRejected: upload: not valid JSON (line 1, column 1: Expecting value)
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadRejected(f"{where}: {len(data)} bytes is more than the {MAX_UPLOAD_BYTES} allowed")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UploadRejected(f"{where}: not UTF-8 text; upload the results.json that `shovir score` wrote") from None
    except json.JSONDecodeError as error:
        raise UploadRejected(f"{where}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    try:
        doc = check_results(doc, where)
    except ValueError as error:
        raise UploadRejected(str(error)) from None
    _check_protocol_sections(doc, where)
    return doc


def store_upload(folder: str | Path, data: bytes) -> Path:
    """Validate ``data`` and store it in ``folder`` as ``uploads/<sha256 prefix>.json``; return
    the path. The name comes from the content, never from the uploader, so nothing can be written
    outside the folder or over another file.
    """
    validate_upload(data)
    target = Path(folder) / "uploads" / f"{hashlib.sha256(data).hexdigest()[:16]}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def fetch_results(repo_id: str, folder: str | Path) -> Path:
    """Download the JSON files of the Hub dataset ``repo_id`` into ``folder`` (needs a network;
    :func:`load_board` then validates each file like an upload)."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=["*.json"], local_dir=str(folder)))


def space_results_repo(card: str | Path) -> str | None:
    """The ``shovir_results_repo`` a Space card names in its YAML header, if any.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
    ...     _ = f.write("---\\ntitle: x\\nshovir_results_repo: me/shovir-results\\n---\\n# x\\n")
    >>> space_results_repo(f.name)
    'me/shovir-results'
    """
    text = Path(card).read_text(encoding="utf-8") if Path(card).is_file() else ""
    if not text.startswith("---\n"):
        return None
    for line in text.split("\n---", 1)[0].splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "shovir_results_repo" and value.strip():
            return value.strip()
    return None


def _example_entry(alias: str, flip_rate: float) -> Entry:
    doc = {"schema_version": "2.0", "run": {"config": {"dataset": {"name": "synthetic"}}}, "models": {alias: {
        "adapter": "reference", "protocols": {"shovir": {"flip_rate": {"oco_p100": {
            "flip_rate": flip_rate, "denominators": {"Edema": 40}, "ci": {"flip_rate": {"low": 0.8, "high": 0.95}}}}}}}}}
    return Entry(alias, alias, "synthetic", f"{alias}.json", "reference", Results(doc))

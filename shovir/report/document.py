"""The report document: results.json, each protocol's table and figures, and report.md.

Reads only the results document (:mod:`shovir.results`) and the protocol declarations.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from shovir.protocols import get_protocol
from shovir.report.tables import FLAG_NOTE, Cell, protocol_cells, to_csv, to_latex, to_markdown
from shovir.results import Results

__all__ = ["table_stem", "write_tables", "write_figures", "write_report", "summary_table"]


def table_stem(protocol: str) -> str:
    """File stem of a protocol's table: ShoViR's is the paper's ``table1``.

    >>> table_stem("shovir"), table_stem("modalens")
    ('table1', 'table_modalens')
    """
    return "table1" if protocol == "shovir" else f"table_{protocol}"


def write_tables(results: Results, out_dir: Path) -> list[Path]:
    """``<stem>.md``, ``.tex`` and ``.csv`` per protocol present."""
    written = []
    for protocol in results.protocols():
        rows = protocol_cells(results, protocol)
        stem = out_dir / table_stem(protocol)
        for suffix, text in ((".md", _table(results, protocol) + "\n"), (".tex", to_latex(rows) + "\n"), (".csv", to_csv(rows))):
            path = stem.with_suffix(suffix)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def write_figures(results: Results, out_dir: Path) -> list[Path]:
    """Every figure the present protocols declare; returns the files written."""
    written = []
    for protocol in results.protocols():
        for target in get_protocol(protocol).figures:
            module_name, function_name = target.split(":")
            path = getattr(importlib.import_module(module_name), function_name)(results, out_dir)
            if path is not None:
                written.append(path)
    return written


def _table(results: Results, protocol: str) -> str:
    """A protocol's Markdown table, with a note on flagged values and on every metric that could
    not run (and why)."""
    rows = protocol_cells(results, protocol)
    notes = []
    if any(isinstance(v, Cell) and v.flagged for row in rows for v in row.values()):
        notes.append(FLAG_NOTE)
    reasons: dict[str, set[str]] = {}
    for alias in results.aliases:
        for column in get_protocol(protocol).table:
            raw = results.result(alias, protocol, column.key, column.condition)
            if isinstance(raw, dict) and raw.get("unavailable"):
                reasons.setdefault(column.label, set()).add(str(raw["unavailable"]))
    notes += [f"{label}: not computed — {'; '.join(sorted(why))}" for label, why in reasons.items()]
    return to_markdown(rows) + "".join(f"\n\n{note}" for note in notes)


def summary_table(results: Results | dict[str, Any]) -> str:
    """The console summary of ``shovir score``: each protocol's table, plus coverage when partial."""
    results = results if isinstance(results, Results) else Results(results)
    blocks = []
    for protocol in results.protocols():
        blocks.append(f"{get_protocol(protocol).title}\n{_table(results, protocol)}")
    if not results.doc.get("complete", True):
        blocks.append(_coverage_markdown(results))
    return "\n\n".join(blocks) if blocks else "no protocol applies to the conditions of this run"


def _coverage_markdown(results: Results) -> str:
    lines = ["Coverage (partial run): present / expected", "", "| model | condition | present | expected |", "|---|---|---|---|"]
    for alias, conditions in results.coverage().items():
        for condition, count in conditions.items():
            if count["present"] != count["expected"]:
                lines.append(f"| {alias} | {condition} | {count['present']} | {count['expected']} |")
    return "\n".join(lines)


def write_report(results: Results | dict[str, Any], out_dir: str | Path, title: str = "shovir results", extra: str = "") -> Path:
    """Write results.json, the tables (md/tex/csv), the figures and report.md into ``out_dir``."""
    results = results if isinstance(results, Results) else Results(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results.doc, indent=2), encoding="utf-8")
    write_tables(results, out_dir)
    figures = write_figures(results, out_dir)
    doc = results.doc
    lines = [f"# {title}", "", f"Config hash `{doc['run']['config_hash']}`, seed {doc['run']['seed']}, "
             f"labeler `{doc['scoring']['labeler']}`, {doc['scoring']['n_resamples']} bootstrap resamples.", ""]
    plan = doc["run"]["plan"]
    lines += [f"Plan: {plan['requests']} records from {plan['calls']} model calls per model "
              f"({plan['saved_calls']} duplicates removed).", ""]
    per_kind = plan.get("samples_per_kind", {})
    if per_kind:
        lines += ["Samples per condition: " + ", ".join(f"{kind} {n}" for kind, n in per_kind.items()) + ".", ""]
    if plan.get("skipped"):
        lines += ["Not planned: " + ", ".join(f"{n} ({reason.replace('_', ' ')})" for reason, n in plan["skipped"].items())
                  + ".", ""]
    if plan.get("pairing"):
        lines += ["Substitutions: " + ", ".join(f"{n} images paired as {kind.replace('_', ' ')}"
                                               for kind, n in plan["pairing"].items()) + ".", ""]
    if not doc.get("complete", True):
        lines += ["**Partial run** — scored with `--allow-partial`; each metric uses the samples all its inputs "
                  "cover.", "", _coverage_markdown(results), ""]
    for protocol in results.protocols():
        heading = "Table 1 — " if protocol == "shovir" else ""
        lines += [f"## {heading}{get_protocol(protocol).title}", "", _table(results, protocol), ""]
    for figure in figures:
        lines += [f"![{figure.stem}]({figure.name})", ""]
    if extra:
        lines += [extra, ""]
    (out_dir / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out_dir / "report.md"

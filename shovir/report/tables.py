"""Protocol tables from a results document: Markdown, LaTeX (booktabs) and CSV.

The columns come from each protocol's declaration (:class:`shovir.protocols.Column`); ShoViR's
table is the paper's Table 1 plus the disease-level shortcut metrics at p = 1.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from shovir.protocols import get_protocol
from shovir.results import Results

__all__ = ["protocol_rows", "to_markdown", "to_latex", "to_csv", "latex_escape"]

_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
          "|": r"\textbar{}", "Δ": r"$\Delta$", "μ": r"$\mu$"}


def latex_escape(text: Any) -> str:
    """Escape every LaTeX special character, so no field can inject commands.

    >>> print(latex_escape(r"m\\input{/etc/passwd}_1 & 50% #1"))
    m\\textbackslash{}input\\{/etc/passwd\\}\\_1 \\& 50\\% \\#1
    """
    return "".join(_LATEX.get(char, char) for char in str(text))


def protocol_rows(results: Results | dict[str, Any], protocol: str) -> list[dict[str, Any]]:
    """One row per model with the protocol's columns (``None`` where the run lacks a condition).

    >>> doc = {"schema_version": "2.0", "models": {"m": {"adapter": "m", "protocols": {"shovir": {
    ...     "f1": {"baseline": {"f1_14": {"micro": 0.5}}}}}}}}
    >>> protocol_rows(doc, "shovir")[0]["F1-14"]
    0.5
    """
    results = results if isinstance(results, Results) else Results(results)
    declaration = get_protocol(protocol)
    rows = []
    for alias in results.aliases:
        if protocol not in results.protocols(alias):
            continue
        row: dict[str, Any] = {"model": alias}
        for column in declaration.table:
            row[column.label] = results.value(alias, protocol, column.key, column.condition, None, *column.field)
        rows.append(row)
    return rows


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, (int, float)) else str(value)


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """A GitHub Markdown table (``|`` in a model name is escaped).

    >>> print(to_markdown([{"model": "m", "F1-14": 0.5}]))
    | model | F1-14 |
    |---|---|
    | m | 0.500 |
    """
    columns = list(rows[0]) if rows else ["model"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [str(row[c]).replace("|", r"\|") if c == "model" else _fmt(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_latex(rows: list[dict[str, Any]]) -> str:
    """A booktabs LaTeX tabular; every field is escaped (:func:`latex_escape`)."""
    columns = list(rows[0]) if rows else ["model"]
    lines = [r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}", r"\toprule",
             " & ".join(latex_escape(c) for c in columns) + r" \\", r"\midrule"]
    for row in rows:
        lines.append(" & ".join(latex_escape(row[c] if c == "model" else _fmt(row[c])) for c in columns) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with a header row (values unformatted)."""
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()

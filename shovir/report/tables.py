"""Protocol tables from a results document: Markdown, LaTeX (booktabs) and CSV.

The columns come from each protocol's declaration (:class:`shovir.protocols.Column`); ShoViR's
table is the paper's Table 1 plus the disease-level shortcut metrics at p = 1. Every value is a
:class:`Cell` shown with its 95% interval and n; a value resting on fewer than
:data:`shovir.results.MIN_UNITS` units is flagged with ``†``. CSV keeps the numbers apart
(``<column>``, ``<column> low``, ``<column> high``, ``<column> n``).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from shovir.protocols import get_protocol
from shovir.results import MIN_UNITS, Results, units

__all__ = ["Cell", "FLAG_NOTE", "protocol_rows", "protocol_cells", "to_markdown", "to_latex", "to_csv", "latex_escape"]

FLAG_NOTE = f"† fewer than {MIN_UNITS} units (samples, or a rate's denominator): read as indicative only."


@dataclass(frozen=True)
class Cell:
    """One table value with its 95% interval and the number of units it rests on.

    >>> str(Cell(0.5, 0.4, 0.61, 120)), str(Cell(1.0, None, None, 3)), str(Cell(None))
    ('0.500 [0.400, 0.610] n=120', '1.000 n=3 †', '–')
    """

    value: Any
    low: float | None = None
    high: float | None = None
    n: int | None = None

    @property
    def flagged(self) -> bool:
        return self.value is not None and self.n is not None and self.n < MIN_UNITS

    def __str__(self) -> str:
        if self.value is None:
            return "–"
        text = _fmt(self.value)
        if self.low is not None and self.high is not None:
            text += f" [{self.low:.3f}, {self.high:.3f}]"
        if self.n is not None:
            text += f" n={self.n}"
        return text + (" †" if self.flagged else "")

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
    return [{key: value.value if isinstance(value, Cell) else value for key, value in row.items()}
            for row in protocol_cells(results, protocol)]


def _fmt(value: Any) -> str:
    if isinstance(value, Cell):
        return str(value)
    return "–" if value is None else f"{value:.3f}" if isinstance(value, (int, float)) else str(value)


def protocol_cells(results: Results | dict[str, Any], protocol: str) -> list[dict[str, Any]]:
    """Like :func:`protocol_rows`, each value a :class:`Cell` with its interval and n.

    >>> doc = {"schema_version": "2.0", "models": {"m": {"adapter": "m", "protocols": {"shovir": {"flip_rate": {
    ...     "oco_p100": {"flip_rate": 0.9, "n": 50, "denominators": {"Edema": 40}, "ci": {"flip_rate": {"low": 0.8, "high": 0.97}}}}}}}}}
    >>> str(protocol_cells(doc, "shovir")[0]["FR OCO"])
    '0.900 [0.800, 0.970] n=40'
    """
    results = results if isinstance(results, Results) else Results(results)
    declaration = get_protocol(protocol)
    rows = []
    for alias in results.aliases:
        if protocol not in results.protocols(alias):
            continue
        row: dict[str, Any] = {"model": alias}
        for column in declaration.table:
            raw = results.result(alias, protocol, column.key, column.condition)
            value = results.value(alias, protocol, column.key, column.condition, None, *column.field)
            interval = results.interval(alias, protocol, column.key, column.condition, "_".join(column.field)) or (None, None)
            row[column.label] = Cell(value, interval[0], interval[1], units(raw) if value is not None else None)
        rows.append(row)
    return rows


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
    """CSV with a header row (values unformatted; a :class:`Cell` becomes value, low, high, n).

    >>> print(to_csv([{"model": "m", "VRS": Cell(0.3, 0.2, 0.4, 90)}]).strip())
    model,VRS,VRS low,VRS high,VRS n
    m,0.3,0.2,0.4,90
    """
    flat = []
    for row in rows:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, Cell):
                out.update({key: value.value, f"{key} low": value.low, f"{key} high": value.high, f"{key} n": value.n})
            else:
                out[key] = value
        flat.append(out)
    buffer = io.StringIO()
    if flat:
        writer = csv.DictWriter(buffer, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    return buffer.getvalue()

"""The paper's artefacts from a results document: Table 1 (Markdown, LaTeX, CSV) and figures.

* Table 1 (ShoViR): per model, baseline F1-14/F1-5 and BLEU-1/BLEU-4/ROUGE-L, full-noise F1s and ΔFN.
* Fig. 2: μ-F1 versus p for RO, OCO and DOCO (one panel per model).
* Fig. 3a: flip rate and Δ for OCO and DOCO at p = 1 with their intervals.
* Fig. 3b: per-disease F1 at p = 1 under each condition, averaged over models.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

__all__ = ["table1_rows", "to_markdown", "to_latex", "to_csv", "write_figures", "write_report"]

_TABLE1 = [
    ("F1-14", ("image_level", "baseline", "f1_14", "micro")),
    ("F1-5", ("image_level", "baseline", "f1_5", "micro")),
    ("B-1", ("image_level", "nlg", "bleu_1")),
    ("B-4", ("image_level", "nlg", "bleu_4")),
    ("R-L", ("image_level", "nlg", "rouge_l")),
    ("F1-14 FN", ("image_level", "full_noise", "f1_14", "micro")),
    ("F1-5 FN", ("image_level", "full_noise", "f1_5", "micro")),
    ("ΔFN-14", ("image_level", "delta_fn", "f1_14_micro")),
    ("ΔFN-5", ("image_level", "delta_fn", "f1_5_micro")),
]


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def table1_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model with the Table 1 columns (``None`` where the run lacks a condition).

    >>> table1_rows({"models": {"m": {"image_level": {"baseline": {"f1_14": {"micro": 0.5}}}}}})[0]["F1-14"]
    0.5
    """
    rows = []
    for model, result in results["models"].items():
        row: dict[str, Any] = {"model": model}
        for column, path in _TABLE1:
            row[column] = _get(result, path)
        rows.append(row)
    return rows


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """A GitHub Markdown table.

    >>> print(to_markdown([{"model": "m", "F1-14": 0.5}]))
    | model | F1-14 |
    |---|---|
    | m | 0.500 |
    """
    columns = list(rows[0]) if rows else ["model"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[c]) if c == "model" else _fmt(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def to_latex(rows: list[dict[str, Any]]) -> str:
    """A booktabs LaTeX tabular."""
    columns = list(rows[0]) if rows else ["model"]
    escape = lambda text: str(text).replace("_", r"\_").replace("Δ", r"$\Delta$")  # noqa: E731
    lines = [r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}", r"\toprule", " & ".join(escape(c) for c in columns) + r" \\", r"\midrule"]
    for row in rows:
        lines.append(" & ".join(escape(row[c]) if c == "model" else _fmt(row[c]) for c in columns) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def to_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def write_figures(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Fig. 2, 3a and 3b as PNG (matplotlib, no display needed); returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    models = {m: r["disease_level"] for m, r in results["models"].items() if "disease_level" in r}
    if not models:
        return written
    colors = {"ro": "#7f7f7f", "ro_area": "#bcbd22", "oco": "#d62728", "doco": "#1f77b4"}
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4), squeeze=False, sharey=True)
    for ax, (model, disease) in zip(axes[0], models.items()):
        for family, curve in sorted(disease["mu_f1"].items()):
            points = sorted((int(k[1:]), v["value"]) for k, v in curve.items())
            ax.plot([p for p, _ in points], [f for _, f in points], marker="o", label=family.upper(), color=colors.get(family))
        ax.set_title(model)
        ax.set_xlabel("p (%)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("μ-F1")
    axes[0][-1].legend(loc="lower left")
    fig.suptitle("Fig. 2 — μ-F1 versus blending strength")
    fig.tight_layout()
    written.append(out_dir / "fig2_mu_f1_vs_p.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    names = list(models)
    width = 0.38
    for ax, metric in zip(axes, ("flip_rate", "delta")):
        for offset, family in ((-width / 2, "oco"), (width / 2, "doco")):
            values, lows, highs = [], [], []
            for model in names:
                entry = models[model].get(metric, {}).get(family, {}).get("p100") or {}
                value = entry.get("value")
                values.append(value if value is not None else float("nan"))
                ci = entry.get("ci") or {}
                lows.append(value - ci["low"] if value is not None and ci.get("low") is not None else 0)
                highs.append(ci["high"] - value if value is not None and ci.get("high") is not None else 0)
            positions = [i + offset for i in range(len(names))]
            ax.bar(positions, values, width, yerr=[lows, highs], label=family.upper(), color=colors[family], capsize=3)
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set_title("Flip rate at p = 100%" if metric == "flip_rate" else "Δ = μ-F1(RO) − μ-F1(X) at p = 100%")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.legend()
    fig.suptitle("Fig. 3a — shortcut metrics")
    fig.tight_layout()
    written.append(out_dir / "fig3a_flip_rate_and_delta.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    classes = sorted({c for d in models.values() for c in d.get("counts", {})})
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(classes) + 2), 3.6))
    settings = [("baseline", "ro", "p00"), ("RO", "ro", "p100"), ("OCO", "oco", "p100"), ("DOCO", "doco", "p100")]
    width = 0.8 / len(settings)
    for index, (name, family, p) in enumerate(settings):
        means = []
        for cls in classes:
            values = [d["per_class_f1"].get(family, {}).get(p, {}).get(cls) for d in models.values()]
            values = [v for v in values if v is not None]
            means.append(sum(values) / len(values) if values else float("nan"))
        ax.bar([i + (index - 1.5) * width for i in range(len(classes))], means, width, label=name,
               color={"baseline": "#2ca02c", "RO": colors["ro"], "OCO": colors["oco"], "DOCO": colors["doco"]}[name])
    ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right")
    ax.set_ylabel("F1 (mean over models)")
    ax.set_ylim(0, 1.02)
    ax.legend(ncols=4, fontsize=8)
    ax.set_title("Fig. 3b — per-disease F1 at p = 100%")
    fig.tight_layout()
    written.append(out_dir / "fig3b_per_disease_f1.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written


def write_report(results: dict[str, Any], out_dir: str | Path, title: str = "shovir results", extra: str = "") -> Path:
    """Write results.json, Table 1 (md/tex/csv), the figures and report.md into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    rows = table1_rows(results)
    (out_dir / "table1.md").write_text(to_markdown(rows) + "\n")
    (out_dir / "table1.tex").write_text(to_latex(rows) + "\n")
    (out_dir / "table1.csv").write_text(to_csv(rows))
    figures = write_figures(results, out_dir)
    lines = [f"# {title}", "", f"Config hash `{results['run']['config_hash']}`, seed {results['run']['seed']}, "
             f"labeler `{results['scoring']['labeler']}`, {results['scoring']['n_resamples']} bootstrap resamples.", ""]
    plan = results["run"]["plan"]
    lines += [f"Plan: {plan['requests']} records from {plan['calls']} model calls per model ({plan['saved_calls']} duplicates removed).", ""]
    lines += ["## Table 1 — image level", "", to_markdown(rows), ""]
    disease_rows = []
    for model, result in results["models"].items():
        disease = result.get("disease_level")
        if not disease:
            continue
        row = {"model": model}
        for family in ("oco", "doco"):
            row[f"FR {family.upper()}"] = _get(disease, ("flip_rate", family, "p100", "value"))
            row[f"Δ {family.upper()}"] = _get(disease, ("delta", family, "p100", "value"))
        for family in ("ro", "oco", "doco"):
            row[f"S_AUC {family.upper()}"] = _get(disease, ("s_auc", family, "s_auc"))
        disease_rows.append(row)
    if disease_rows:
        lines += ["## Disease level at p = 100%", "", to_markdown(disease_rows), ""]
    for figure in figures:
        lines += [f"![{figure.stem}]({figure.name})", ""]
    if extra:
        lines += [extra, ""]
    (out_dir / "report.md").write_text("\n".join(lines))
    return out_dir / "report.md"

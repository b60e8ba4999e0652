"""The protocols' figures from a results document (PNG through matplotlib's Agg backend).

* :func:`mu_f1_versus_p` — ShoViR Fig. 2: μ-F1 versus p for RO, OCO and DOCO, one panel per model;
* :func:`shortcut_bars` — Fig. 3a: flip rate and Δ for OCO and DOCO at p = 1 with their intervals;
* :func:`per_disease_f1` — Fig. 3b: per-disease F1 at p = 1 under each condition, mean over models;
* :func:`vqa_accuracy` — Beyond Accuracy: accuracy with real, shuffled and blank images per model,
  with VRS and image sensitivity;
* :func:`swap_flip_rates` — ModaLens: image-swap flip rates with and without the report per model,
  with the paired difference.

Each takes a :class:`~shovir.results.Results` and a folder, writes one file and returns its path
(``None`` when the results have nothing to draw). Bars carry their 95% intervals; a bar resting on
fewer than :data:`~shovir.results.MIN_UNITS` units is drawn hatched and pale and marked ``n<10``
instead of as a confident bar. Legends sit outside the axes, so they never cover data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shovir.results import MIN_UNITS, Results, units

__all__ = ["mu_f1_versus_p", "shortcut_bars", "per_disease_f1", "vqa_accuracy", "swap_flip_rates"]

_PROTOCOL = "shovir"
_COLOURS = {"ro": "#7f7f7f", "ro_area": "#bcbd22", "oco": "#d62728", "doco": "#1f77b4", "baseline": "#2ca02c"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _outside_legend(ax: Any, **kwargs: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, **kwargs)


def _bars(ax: Any, positions: list[float], entries: list[tuple[Any, Any, int | None]], width: float, label: str,
          colour: str) -> None:
    """Bars with interval whiskers; values on fewer than MIN_UNITS units are hatched, pale and marked."""
    for i, (position, (value, ci, n)) in enumerate(zip(positions, entries)):
        if value is None:
            continue
        low, high = ci or (None, None)
        error = [[value - low], [high - value]] if low is not None and high is not None else None
        weak = n is not None and n < MIN_UNITS
        ax.bar(position, value, width, yerr=error, capsize=3, color=colour, alpha=0.35 if weak else 1.0,
               hatch="//" if weak else None, label=label if i == 0 else None, edgecolor=colour)
        if weak:
            ax.text(position, value, f"n<{MIN_UNITS}", ha="center", va="bottom", fontsize=7)


def _finish_rates(plt: Any, fig: Any, ax: Any, labels: list[str], ylabel: str, title: str, path: Path) -> Path:
    """Label a bar chart of rates in [0, 1] (one group per label), legend outside, and save it."""
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    _outside_legend(ax)
    ax.set_title(title)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _models(results: Results) -> list[str]:
    return [alias for alias in results.aliases if results.entries(alias, _PROTOCOL, "mu_f1")]


def mu_f1_versus_p(results: Results, out_dir: Path) -> Path | None:
    """Fig. 2: μ-F1 against the blending strength, per model and condition family."""
    models = _models(results)
    if not models:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4), squeeze=False, sharey=True)
    for ax, alias in zip(axes[0], models):
        for family in ("ro", "ro_area", "oco", "doco"):
            points = results.curve(alias, _PROTOCOL, "mu_f1", family, "mu_f1")
            if points:
                ax.plot([100 * p for p, _ in points], [f for _, f in points], marker="o", label=family.upper(),
                        color=_COLOURS[family])
        ax.set_title(alias)
        ax.set_xlabel("p (%)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("μ-F1")
    _outside_legend(axes[0][-1])
    fig.suptitle("Fig. 2 — μ-F1 versus blending strength")
    return _save(plt, fig, out_dir / "fig2_mu_f1_vs_p.png")


def shortcut_bars(results: Results, out_dir: Path) -> Path | None:
    """Fig. 3a: FR_X and Δ_X for OCO and DOCO at p = 1, with 95% intervals."""
    models = _models(results)
    if not models:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    width = 0.38
    for ax, (key, field) in zip(axes, (("flip_rate", "flip_rate"), ("delta", "delta"))):
        for offset, family in ((-width / 2, "oco"), (width / 2, "doco")):
            entries = [(results.value(alias, _PROTOCOL, key, family, 1.0, field),
                        results.interval(alias, _PROTOCOL, key, f"{family}_p100", field),
                        units(results.result(alias, _PROTOCOL, key, family, 1.0))) for alias in models]
            _bars(ax, [i + offset for i in range(len(models))], entries, width, family.upper(), _COLOURS[family])
        ax.set_xticks(range(len(models)), models, rotation=15)
        ax.set_title("Flip rate at p = 100%" if key == "flip_rate" else "Δ = μ-F1(RO) − μ-F1(X) at p = 100%")
        ax.axhline(0, color="black", linewidth=0.6)
    _outside_legend(axes[-1])
    fig.suptitle("Fig. 3a — shortcut metrics")
    return _save(plt, fig, out_dir / "fig3a_flip_rate_and_delta.png")


def per_disease_f1(results: Results, out_dir: Path) -> Path | None:
    """Fig. 3b: per-disease F1 on clean images and at p = 1 under RO, OCO, DOCO (mean over models)."""
    models = _models(results)
    if not models:
        return None
    settings = [("baseline", "ro", 0.0), ("RO", "ro", 1.0), ("OCO", "oco", 1.0), ("DOCO", "doco", 1.0)]
    classes = sorted({name for alias in models
                      for name in (results.value(alias, _PROTOCOL, "mu_f1", "ro", 1.0, "counts") or {})})
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(classes) + 2), 3.6))
    width = 0.8 / len(settings)
    for index, (name, family, p) in enumerate(settings):
        means = []
        for cls in classes:
            values = [(results.value(alias, _PROTOCOL, "mu_f1", family, p, "per_class") or {}).get(cls) for alias in models]
            values = [v for v in values if v is not None]
            means.append(sum(values) / len(values) if values else float("nan"))
        ax.bar([i + (index - 1.5) * width for i in range(len(classes))], means, width, label=name,
               color=_COLOURS.get(family if name != "baseline" else "baseline"))
    ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right")
    ax.set_ylabel("F1 (mean over models)")
    ax.set_ylim(0, 1.02)
    _outside_legend(ax)
    ax.set_title("Fig. 3b — per-disease F1 at p = 100%")
    return _save(plt, fig, out_dir / "fig3b_per_disease_f1.png")


def vqa_accuracy(results: Results, out_dir: Path) -> Path | None:
    """Beyond Accuracy: accuracy under real, shuffled and blank images, per model and report arm."""
    protocol = "beyond_accuracy"
    cells = [(alias, arm) for alias in results.aliases for arm in results.entries(alias, protocol, "visual_reliance")]
    if not cells:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 1.9 * len(cells) + 2.5), 3.6))
    width = 0.26
    colours = {"real": "#2ca02c", "shuffled": "#ff7f0e", "blank": "#7f7f7f"}
    for index, condition in enumerate(("real", "shuffled", "blank")):
        field = f"accuracy_{condition}"
        entries = []
        for alias, arm in cells:
            raw = results.result(alias, protocol, "visual_reliance", arm)
            entries.append((raw.get(field), results.interval(alias, protocol, "visual_reliance", arm, field), units(raw)))
        _bars(ax, [i + (index - 1) * width for i in range(len(cells))], entries, width, condition, colours[condition])
    labels = []
    for alias, arm in cells:
        raw = results.result(alias, protocol, "visual_reliance", arm)
        vrs, sensitivity = raw.get("vrs"), raw.get("image_sensitivity")
        shown = f"{alias}{' +report' if arm.endswith('+report') else ''}"
        labels.append(f"{shown}\nVRS {_number(vrs)}, IS {_number(sensitivity)}")
    return _finish_rates(plt, fig, ax, labels, "accuracy", "Beyond Accuracy — accuracy with real, shuffled and blank images",
                         out_dir / "fig_beyond_accuracy.png")


def swap_flip_rates(results: Results, out_dir: Path) -> Path | None:
    """ModaLens: flip rates under the same-patient image swap, with and without the report."""
    protocol = "modalens"
    models = [alias for alias in results.aliases if results.result(alias, protocol, "swap_sensitivity", "swap")]
    if not models:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 1.8 * len(models) + 2.5), 3.6))
    width = 0.38
    for offset, arm, colour in ((-width / 2, "without_report", "#d62728"), (width / 2, "with_report", "#1f77b4")):
        field = f"flip_rate_{arm}"
        entries = []
        for alias in models:
            raw = results.result(alias, protocol, "swap_sensitivity", "swap")
            entries.append((raw.get(field), results.interval(alias, protocol, "swap_sensitivity", "swap", field),
                            units(raw)))
        _bars(ax, [i + offset for i in range(len(models))], entries, width, arm.replace("_", " "), colour)
    labels = []
    for alias in models:
        raw = results.result(alias, protocol, "swap_sensitivity", "swap")
        low, high = results.interval(alias, protocol, "swap_sensitivity", "swap", "paired_difference") or (None, None)
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        labels.append(f"{alias}\nΔ {_number(raw.get('paired_difference'))}{interval}")
    return _finish_rates(plt, fig, ax, labels, "flip rate", "ModaLens — image-swap flip rates with and without the report",
                         out_dir / "fig_modalens_swap.png")


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"

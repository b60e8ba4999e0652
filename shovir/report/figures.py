"""The protocols' figures from a results document (PNG through matplotlib's Agg backend).

* :func:`mu_f1_versus_p` — ShoViR Fig. 2: μ-F1 versus p for RO, OCO and DOCO, one panel per model;
* :func:`shortcut_bars` — Fig. 3a: flip rate and Δ for OCO and DOCO at p = 1 with their intervals;
* :func:`per_disease_f1` — Fig. 3b: per-disease F1 at p = 1 under each condition, mean over models.

Each takes a :class:`~shovir.results.Results` and a folder, writes one file and returns its path
(``None`` when the results have nothing to draw).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shovir.results import Results

__all__ = ["mu_f1_versus_p", "shortcut_bars", "per_disease_f1"]

_PROTOCOL = "shovir"
_COLOURS = {"ro": "#7f7f7f", "ro_area": "#bcbd22", "oco": "#d62728", "doco": "#1f77b4", "baseline": "#2ca02c"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    axes[0][-1].legend(loc="lower left")
    fig.suptitle("Fig. 2 — μ-F1 versus blending strength")
    return _save(plt, fig, out_dir / "fig2_mu_f1_vs_p.png")


def shortcut_bars(results: Results, out_dir: Path) -> Path | None:
    """Fig. 3a: FR_X and Δ_X for OCO and DOCO at p = 1, with 95% intervals."""
    models = _models(results)
    if not models:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    width = 0.38
    for ax, (key, field) in zip(axes, (("flip_rate", "flip_rate"), ("delta", "delta"))):
        for offset, family in ((-width / 2, "oco"), (width / 2, "doco")):
            values, lows, highs = [], [], []
            for alias in models:
                value = results.value(alias, _PROTOCOL, key, family, 1.0, field)
                ci = results.interval(alias, _PROTOCOL, key, f"{family}_p100", field) or (None, None)
                values.append(value if value is not None else float("nan"))
                lows.append(value - ci[0] if value is not None and ci[0] is not None else 0)
                highs.append(ci[1] - value if value is not None and ci[1] is not None else 0)
            ax.bar([i + offset for i in range(len(models))], values, width, yerr=[lows, highs], label=family.upper(),
                   color=_COLOURS[family], capsize=3)
        ax.set_xticks(range(len(models)), models, rotation=15)
        ax.set_title("Flip rate at p = 100%" if key == "flip_rate" else "Δ = μ-F1(RO) − μ-F1(X) at p = 100%")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.legend()
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
    ax.legend(ncols=4, fontsize=8)
    ax.set_title("Fig. 3b — per-disease F1 at p = 100%")
    return _save(plt, fig, out_dir / "fig3b_per_disease_f1.png")

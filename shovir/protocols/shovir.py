"""ShoViR (``shovir_benchmark.txt``): report generation under matched-noise occlusion.

§3.2 defines the interventions (full noise; OCO, DOCO, RO at blending strength p), §4 the
metrics: F1-CheXbert 14/5 and BLEU/ROUGE-L on baseline reports (Table 1), ΔFN between baseline
and full noise, μ-F1 per condition and p (Fig. 2), Δ_X = μ-F1(RO) − μ-F1(X) and the flip rate
FR_X against RO at the same p (Fig. 3a, dataset labels as ground truth), S_AUC of μ-F1 versus p,
and per-disease F1 (Fig. 3b). Table 1 also reports GREEN; shovir adds ICARE-AVG beside it. Both
need an LLM judge, so their bindings run only when the scorer is given one
(``shovir score RUN --icare BACKEND --green BACKEND``); otherwise their columns stay empty.
"""

from __future__ import annotations

from shovir.conditions import STRENGTHS
from shovir.protocols import Binding, Column, Protocol

_BOXES = [{"name": name, "p": list(STRENGTHS)} for name in ("ro", "oco", "doco")]

PROTOCOL = Protocol(
    name="shovir",
    title="ShoViR — shortcuts in report generation",
    paper="shovir_benchmark.txt",
    task="report",
    presets={
        "shovir": [{"name": "baseline"}, {"name": "full_noise"}, *_BOXES],
        "shovir_area": [{"name": "baseline"}, {"name": "full_noise"}, {"name": "ro_area", "p": list(STRENGTHS)}, *_BOXES],
    },
    metrics=(
        Binding("f1", "chexbert_f1", "image_codes", ("baseline", "full_noise")),
        Binding("nlg", "nlg", "image_texts", ("baseline",)),
        Binding("radgraph", "f1_radgraph", "image_texts", ("baseline",)),
        Binding("green", "green", "judged_texts", ("baseline",), {"judge": "green"}),
        Binding("icare", "icare", "judged_texts", ("baseline",), {"judge": "icare"}),
        Binding("delta_fn", "delta_fn", "image_contrast", ("baseline", "full_noise")),
        Binding("mu_f1", "per_target_f1", "pair_codes", ("ro", "ro_area", "oco", "doco")),
        Binding("delta", "occlusion_delta", "pair_contrast", ("ro", "oco", "doco")),
        Binding("delta_vs_ro_area", "occlusion_delta", "pair_contrast", ("ro_area", "oco", "doco")),
        Binding("flip_rate", "flip_rate", "pair_contrast", ("ro", "oco", "doco"), {"reference": "dataset_labels"}),
        Binding("s_auc", "sensitivity_auc", "curve", ("ro", "ro_area", "oco", "doco"), {"source": "mu_f1", "field": "mu_f1"}),
    ),
    table=(
        Column("F1-14", "f1", "baseline", ("f1_14", "micro")),
        Column("F1-5", "f1", "baseline", ("f1_5", "micro")),
        Column("B-1", "nlg", "baseline", ("bleu_1",)),
        Column("B-4", "nlg", "baseline", ("bleu_4",)),
        Column("R-L", "nlg", "baseline", ("rouge_l",)),
        Column("F1-RG", "radgraph", "baseline", ("f1_radgraph",)),
        Column("GREEN", "green", "baseline", ("green",)),
        Column("ICARE-AVG", "icare", "baseline", ("icare_avg",)),
        Column("F1-14 FN", "f1", "full_noise", ("f1_14", "micro")),
        Column("F1-5 FN", "f1", "full_noise", ("f1_5", "micro")),
        Column("ΔFN-14", "delta_fn", "full_noise", ("f1_14_micro",)),
        Column("ΔFN-5", "delta_fn", "full_noise", ("f1_5_micro",)),
        Column("FR OCO", "flip_rate", "oco_p100", ("flip_rate",)),
        Column("FR DOCO", "flip_rate", "doco_p100", ("flip_rate",)),
        Column("Δ OCO", "delta", "oco_p100", ("delta",)),
        Column("Δ DOCO", "delta", "doco_p100", ("delta",)),
    ),
    figures=("shovir.report.figures:mu_f1_versus_p", "shovir.report.figures:shortcut_bars",
             "shovir.report.figures:per_disease_f1"),
)

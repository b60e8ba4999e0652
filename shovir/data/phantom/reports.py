"""Template reports and their 14 CheXpert codes (:func:`write_report`).

Several template sentences per class and code (positive, uncertain, negated), the combined
negations, impressions, the per-class negation rates and :data:`CLASS_KEYWORDS`, the expressions
that name each class in these reports (the contract with :mod:`shovir.labelers`, whose
rule-based labeler reproduces every code). Sides, zones, rib numbers, extents and lesion sizes
come from the :class:`~shovir.data.phantom.findings.FindingSpec` of the rendered findings.

Imports :mod:`~shovir.data.phantom.findings` (spec fields and their wording) and
:mod:`~shovir.data.phantom.scenarios` (the CheXpert No Finding rule); nothing imports it but
:mod:`~shovir.data.phantom.cases`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from shovir import labels as L
from shovir.data.phantom.findings import _SIDE_NAME, FindingSpec, _ordinal, _zone_of
from shovir.data.phantom.scenarios import _NO_FINDING, _PATHOLOGIES

__all__ = ["CLASS_KEYWORDS", "write_report"]

CLASS_KEYWORDS: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": r"mediastin",
    "Cardiomegaly": r"cardiomegaly|\bheart\b|\bcardiac\b",
    "Lung Opacity": r"opacit|ground-glass",
    "Lung Lesion": r"nodul|\bmass(es)?\b|\blesions?\b",
    "Edema": r"edema",
    "Consolidation": r"consolidat",
    "Pneumonia": r"pneumonia",
    "Atelectasis": r"atelecta",
    "Pneumothorax": r"pneumothora",
    "Pleural Effusion": r"effusion",
    "Pleural Other": r"pleural thickening",
    "Fracture": r"fracture",
    "Support Devices": r"pacemaker|\bport\b|endotracheal|\btube\b|catheter|\bdevices?\b",
}
"""Regular expressions (case-insensitive) naming each class in the reports; every sentence that
matches one of them states that class as positive, negated or uncertain, and no other sentence
mentions it."""

# Positive (code 1) and uncertain (code 3) sentences, by class; fields from _mention_fields.
_POSITIVE: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("The upper mediastinum is widened.", "Widening of the superior mediastinum.",
                                   "The cardiomediastinal silhouette is enlarged, with a widened upper mediastinum."),
    "Cardiomegaly": ("The heart is enlarged.", "Moderate cardiomegaly.", "Enlargement of the cardiac silhouette.",
                     "Cardiomegaly."),
    "Lung Opacity": ("Hazy ground-glass opacity in the {side} {zone} lung.",
                     "Ill-defined opacity in the {side} {zone} lung zone.", "Patchy {side} {zone} lung opacity."),
    "Lung Lesion": ("{size} cm {lesion} in the {side} {zone} lung.", "Well-circumscribed {side} {zone} lung {lesion}.",
                    "There is a rounded {lesion} in the {side} {zone} lung zone."),
    "Edema": ("Pulmonary edema with perihilar haziness and septal lines.", "Moderate interstitial pulmonary edema.",
              "Bilateral perihilar haziness and Kerley B lines from interstitial edema."),
    "Consolidation": ("Consolidation in the {side} {zone} lung with air bronchograms.",
                      "Dense {side} {zone} lung consolidation.", "There is airspace consolidation in the {side} {zone} lung."),
    "Pneumonia": ("Pneumonia in the {side} {zone} lung.", "{Side} {zone} lung pneumonia."),
    "Atelectasis": ("Plate-like atelectasis at the {side} lung base.",
                    "Linear atelectasis in the {side} lower lung zone.", "Subsegmental atelectasis at the {side} base."),
    "Pneumothorax": ("{Extent} {side} apical pneumothorax.",
                     "There is a {extent} {side} apical pneumothorax with a visible pleural line.", "{Side} apical pneumothorax."),
    "Pleural Effusion": ("{Extent} {side} pleural effusion.",
                         "{Extent} {side} pleural effusion with blunting of the costophrenic angle.",
                         "There is a {extent} {side} pleural effusion."),
    "Pleural Other": ("Pleural thickening along the {side} lateral chest wall.", "{Side} lateral pleural thickening.",
                      "Smooth {side} pleural thickening."),
    "Fracture": ("Acute fracture of the {side} {rib} rib.", "Displaced {side} {rib} rib fracture.",
                 "There is a fracture of the {side} {rib} rib with mild displacement."),
}
_COMPRESSIVE = ("Adjacent compressive atelectasis at the {side} base.", "Compressive atelectasis of the {side} lower lung zone.")
_BILATERAL_EFFUSION = ("{Extent} bilateral pleural effusions.", "There are {extent} bilateral pleural effusions.")
_DEVICE = {
    "pacemaker": ("{Side} chest wall pacemaker in place.", "A {side}-sided pacemaker generator projects over the upper chest."),
    "port": ("{Side} chest wall port in place.", "A {side} chest port with its catheter directed medially."),
    "ett": ("Endotracheal tube terminates in the mid trachea.", "Endotracheal tube in place, tip above the carina."),
}
_UNCERTAIN: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("Possible widening of the upper mediastinum.", "The mediastinum may be mildly widened."),
    "Cardiomegaly": ("Borderline cardiomegaly.", "The heart may be mildly enlarged.", "Possible mild cardiomegaly."),
    "Lung Opacity": ("Possible faint opacity in the {side} {zone} lung.", "Questionable opacity in the {side} {zone} lung zone."),
    "Lung Lesion": ("Possible small nodule in the {side} {zone} lung.", "Questionable nodule in the {side} {zone} lung zone."),
    "Edema": ("Possible mild pulmonary edema.", "Mild interstitial edema may be present."),
    "Consolidation": ("Possible consolidation in the {side} {zone} lung.", "Questionable {side} {zone} lung consolidation."),
    "Pneumonia": ("This is concerning for pneumonia.", "Findings may represent pneumonia.", "Possible pneumonia."),
    "Atelectasis": ("Possible atelectasis at the {side} base.", "Subtle {side} basilar density may represent atelectasis."),
    "Pneumothorax": ("Questionable small {side} apical pneumothorax.", "Possible tiny {side} apical pneumothorax."),
    "Pleural Effusion": ("Possible small {side} pleural effusion.", "A trace {side} pleural effusion may be present."),
    "Pleural Other": ("Possible {side} pleural thickening.", "Questionable {side} lateral pleural thickening."),
    "Fracture": ("Possible fracture of the {side} {rib} rib.", "Questionable {side} {rib} rib fracture."),
}
_NEGATIVE: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("The mediastinal contours are normal.", "The mediastinum is not widened.",
                                   "Normal mediastinal contours."),
    "Cardiomegaly": ("Heart size is normal.", "No cardiomegaly.", "The heart is not enlarged."),
    "Lung Opacity": ("No focal opacity.", "No focal lung opacities."),
    "Lung Lesion": ("No pulmonary nodules or masses.", "No lung nodule."),
    "Edema": ("No pulmonary edema.", "There is no edema."),
    "Consolidation": ("No focal consolidation.", "No consolidation."),
    "Pneumonia": ("No evidence of pneumonia.",),
    "Atelectasis": ("No atelectasis.",),
    "Pneumothorax": ("No pneumothorax.", "There is no pneumothorax."),
    "Pleural Effusion": ("No pleural effusion.", "No pleural effusions."),
    "Pleural Other": ("No pleural thickening.",),
    "Fracture": ("No acute rib fracture.", "No displaced fracture."),
}
_NEGATION_RATE: Mapping[str, float] = {
    "Enlarged Cardiomediastinum": 0.35, "Cardiomegaly": 0.5, "Lung Opacity": 0.15, "Lung Lesion": 0.1, "Edema": 0.3,
    "Consolidation": 0.45, "Pneumonia": 0.15, "Atelectasis": 0.08, "Pneumothorax": 0.6, "Pleural Effusion": 0.6,
    "Pleural Other": 0.05, "Fracture": 0.15, "Support Devices": 0.0,
}
_IMPRESSION_POSITIVE: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": "Widened upper mediastinum.", "Cardiomegaly": "Cardiomegaly.",
    "Lung Opacity": "{Side} {zone} lung opacity.", "Lung Lesion": "{Side} {zone} lung {lesion}.",
    "Edema": "Pulmonary edema.", "Consolidation": "{Side} {zone} lung consolidation.",
    "Pneumonia": "{Side} {zone} lung pneumonia.", "Atelectasis": "{Side} basilar atelectasis.",
    "Pneumothorax": "{Side} pneumothorax.", "Pleural Effusion": "{Effusion_side} pleural effusion{s}.",
    "Pleural Other": "{Side} pleural thickening.", "Fracture": "{Side} {rib} rib fracture.",
}
_IMPRESSION_UNCERTAIN: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": "Possible mediastinal widening.", "Cardiomegaly": "Possible cardiomegaly.",
    "Lung Opacity": "Possible {side} {zone} lung opacity.", "Lung Lesion": "Possible {side} lung nodule.",
    "Edema": "Possible mild edema.", "Consolidation": "Possible {side} lung consolidation.",
    "Pneumonia": "Findings concerning for pneumonia.", "Atelectasis": "Possible {side} basilar atelectasis.",
    "Pneumothorax": "Possible small {side} pneumothorax.", "Pleural Effusion": "Possible small pleural effusion.",
    "Pleural Other": "Possible {side} pleural thickening.", "Fracture": "Possible {side} {rib} rib fracture.",
}
_NORMAL_IMPRESSION = ("No acute cardiopulmonary process.", "No acute cardiopulmonary abnormality.",
                      "Normal chest radiograph.")
_SECTIONS: tuple[tuple[str, ...], ...] = (
    ("Support Devices",),
    ("Cardiomegaly", "Enlarged Cardiomediastinum"),
    ("Edema", "Consolidation", "Pneumonia", "Lung Opacity", "Lung Lesion", "Atelectasis"),
    ("Pleural Effusion", "Pneumothorax", "Pleural Other"),
    ("Fracture",),
)


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(0, len(options)))]


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mention_fields(name: str, specs: Sequence[FindingSpec]) -> dict[str, str]:
    own = [s for s in specs if s.name == name]
    if name == "Pneumonia":
        own = [s for s in specs if s.name == "Consolidation"]
    fields = {"side": "right", "zone": "lower", "rib": "6th", "extent": "small", "lesion": "nodule", "size": "1.5",
              "s": "", "effusion_side": "right"}
    if own:
        spec = own[0]
        if spec.side:
            fields["side"] = _SIDE_NAME[spec.side]
        if "v" in spec.params:
            fields["zone"] = _zone_of(float(spec.params["v"]))
        if "number" in spec.params:
            fields["rib"] = _ordinal(int(spec.params["number"]))
        if name == "Pneumothorax":
            fields["extent"] = "small" if spec.params["gap"] < 0.035 else "moderate"
        if name == "Pleural Effusion":
            fields["extent"] = "small" if max(s.params["height"] for s in own) < 0.09 else "moderate"
            if len(own) > 1:
                fields["effusion_side"], fields["s"] = "bilateral", "s"
            else:
                fields["effusion_side"] = fields["side"]
        if name == "Lung Lesion":
            fields["lesion"] = "mass" if spec.params["mass"] else "nodule"
            fields["size"] = f"{spec.params['size_cm']:.1f}"
    return {**fields, **{_capitalise(k): _capitalise(v) for k, v in fields.items()}}


def write_report(present: Sequence[bool], uncertain: Sequence[bool], specs: Sequence[FindingSpec],
                 rng: np.random.Generator) -> tuple[str, list[int]]:
    """Template report and its 14 CheXpert codes.

    ``present``/``uncertain`` are 14-long flags in :data:`shovir.labels.CLASSES` order (a present
    class is reported as positive, or as uncertain when flagged); ``specs`` supply sides, zones
    and sizes. Absent classes are negated at class-specific rates (higher in normal studies),
    otherwise left blank; No Finding is 1 exactly when no class other than Support Devices is
    positive or uncertain (the CheXpert rule: devices do not make a study abnormal).

    >>> present = [False] * 14
    >>> text, codes = write_report(present, present, [], np.random.default_rng(0))
    >>> text.startswith("FINDINGS:"), codes[-1]
    (True, 1)
    """
    present = [bool(x) for x in present]
    uncertain = [bool(x) for x in uncertain]
    if len(present) != L.NUM_CLASSES or len(uncertain) != L.NUM_CLASSES:
        raise ValueError(f"present and uncertain must have {L.NUM_CLASSES} flags in shovir.labels.CLASSES order")
    normal = not any(present[c] for c in _PATHOLOGIES)
    codes = [L.BLANK] * L.NUM_CLASSES
    for c, name in enumerate(L.LOCALIZABLE):
        if present[c]:
            codes[c] = L.UNCERTAIN if uncertain[c] else L.POSITIVE
        else:
            rate = min(1.0, _NEGATION_RATE[name] * (1.6 if normal else 1.0))
            codes[c] = L.NEGATIVE if rng.random() < rate else L.BLANK
    sentences: list[str] = []
    negated_done: set[str] = set()
    for section in _SECTIONS:
        for name in section:
            c = L.class_index(name)
            fields = _mention_fields(name, specs)
            if codes[c] == L.POSITIVE:
                if name == "Support Devices":
                    kinds = [s.kind for s in specs if s.name == name] or ["ett"]
                    sentences.append(_pick(rng, _DEVICE[kinds[0]]).format(**fields))
                elif name == "Atelectasis" and any(s.kind == "compressive" for s in specs):
                    sentences.append(_pick(rng, _COMPRESSIVE).format(**fields))
                elif name == "Pleural Effusion" and fields["effusion_side"] == "bilateral":
                    sentences.append(_pick(rng, _BILATERAL_EFFUSION).format(**fields))
                else:
                    sentences.append(_pick(rng, _POSITIVE[name]).format(**fields))
            elif codes[c] == L.UNCERTAIN:
                sentences.append(_pick(rng, _UNCERTAIN[name]).format(**fields))
            elif codes[c] == L.NEGATIVE and name not in negated_done:
                sentences.append(_negation(name, codes, negated_done, rng))
    if normal:
        impression = [_pick(rng, _NORMAL_IMPRESSION)]
    else:
        impression = []
        for name in L.LOCALIZABLE:
            c = L.class_index(name)
            if name == "Support Devices" or codes[c] not in (L.POSITIVE, L.UNCERTAIN) or len(impression) >= 3:
                continue
            template = _IMPRESSION_POSITIVE[name] if codes[c] == L.POSITIVE else _IMPRESSION_UNCERTAIN[name]
            impression.append(template.format(**_mention_fields(name, specs)))
    reported = any(codes[c] in (L.POSITIVE, L.UNCERTAIN) for c in _PATHOLOGIES)
    codes[_NO_FINDING] = L.BLANK if reported else L.POSITIVE
    return "FINDINGS: " + " ".join(sentences) + " IMPRESSION: " + " ".join(impression), codes


def _negation(name: str, codes: Sequence[int], done: set[str], rng: np.random.Generator) -> str:
    """A negation sentence for ``name``, merged with other negated pleural/lung classes sometimes."""
    negative = {n for n in L.LOCALIZABLE if codes[L.class_index(n)] == L.NEGATIVE} - done
    triple = {"Consolidation", "Pleural Effusion", "Pneumothorax"}
    pair = {"Pleural Effusion", "Pneumothorax"}
    if name == "Consolidation" and triple <= negative and rng.random() < 0.5:
        done |= triple
        return "No focal consolidation, pleural effusion or pneumothorax."
    if name == "Pleural Effusion" and pair <= negative and rng.random() < 0.6:
        done |= pair
        return "No pleural effusion or pneumothorax."
    done.add(name)
    return _pick(rng, _NEGATIVE[name])

"""Every intervention kind, declared once, and the condition labels built from them.

A *kind* is an intervention (``oco``, ``blank``, ``swap``, …): its family, what a sample needs
for it, whether it takes a blending strength and how it is applied. A *condition* is a kind at
one strength and report setting (:class:`ConditionSpec`), written in file names and results as
its label (``oco_p60``, ``swap+report``). Every module that needs this vocabulary — the
interventions of :mod:`shovir.perturb`, the sweep config, the plan, the scorer, the report —
reads it from here, so adding an intervention is its function plus one :data:`KINDS` entry.

=============== ============ ====== ===== ========================================================
kind            family       target donor source
=============== ============ ====== ===== ========================================================
``baseline``    image        –      –     the unperturbed image
``full_noise``  image        –      –     ShoViR §3.2: matched noise over the whole image
``blank``       image        –      –     Beyond Accuracy §3.3: uniform gray 128
``oco``         box          yes    –     ShoViR §3.2: noise in the target's disease boxes B_c
``doco``        box          yes    –     ShoViR §3.2: noise in the co-disease boxes B_c̄
``ro``          box          yes    –     ShoViR §3.2: random boxes avoiding every annotated box
``ro_area``     box          yes    –     RO with exactly the OCO area (a stricter control)
``shuffle``     substitution –      yes   Beyond Accuracy §3.3: another sample's image
``swap``        substitution –      yes   ModaLens §2: a discordant study of the same patient
=============== ============ ====== ===== ========================================================

>>> ConditionSpec.parse("oco_p60"), ConditionSpec.parse("swap+report").with_report
(ConditionSpec(name='oco', p=0.6, with_report=False), True)
>>> [kind.name for kind in KINDS.values() if kind.family == "box"]
['oco', 'doco', 'ro', 'ro_area']
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

__all__ = [
    "STRENGTHS",
    "ConditionKind",
    "KINDS",
    "kind",
    "ConditionSpec",
    "expand_conditions",
    "closest",
]

STRENGTHS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""The blending strengths of ShoViR §3.2."""

Family = Literal["image", "box", "substitution"]


@dataclass(frozen=True)
class ConditionKind:
    """One intervention kind (see the module table).

    Attributes:
        name: the kind's name, as written in configs and condition labels.
        family: ``image`` (whole image, the same for every target class of an image), ``box``
            (depends on the target class's boxes) or ``substitution`` (another row's image).
        description: one line with its paper section.
        graded: takes blending strengths ``p`` in [0, 1]; ``p = 0`` is the unperturbed image.
        apply: ``"module:function"`` applying it to one image, ``(condition, image, row) ->
            (image, info)``; ``None`` for substitutions, which show the donor image unperturbed.
        donor: for substitutions, how the donor is chosen (``shuffle`` or ``swap`` pairing).
        requires: the dataset columns a row needs.
        random_boxes: places random boxes, so it needs a box-size distribution (RO kinds).
    """

    name: str
    family: Family
    description: str
    graded: bool = False
    apply: str | None = None
    donor: str | None = None
    requires: tuple[str, ...] = ()
    random_boxes: bool = False

    @property
    def needs_target(self) -> bool:
        """Whether the intervention depends on the sample's target class (box kinds)."""
        return self.family == "box"

    @property
    def needs_donor(self) -> bool:
        """Whether the intervention shows another row's image (substitutions)."""
        return self.family == "substitution"

    @property
    def default_strengths(self) -> tuple[float, ...]:
        """``p`` values used when a config names the kind without strengths."""
        return (1.0,)


_APPLY = "shovir.perturb.transforms"
KINDS: dict[str, ConditionKind] = {
    kind.name: kind
    for kind in (
        ConditionKind("baseline", "image", "the unperturbed image", apply=f"{_APPLY}:apply_baseline"),
        ConditionKind("full_noise", "image", "ShoViR §3.2: matched noise over the whole image", graded=True,
                      apply=f"{_APPLY}:apply_full_noise"),
        ConditionKind("blank", "image", "Beyond Accuracy §3.3: a uniform gray image", apply=f"{_APPLY}:apply_blank"),
        ConditionKind("oco", "box", "ShoViR §3.2: noise in the target class's boxes", graded=True,
                      apply=f"{_APPLY}:apply_oco", requires=("disease_boxes",)),
        ConditionKind("doco", "box", "ShoViR §3.2: noise in the co-disease boxes", graded=True,
                      apply=f"{_APPLY}:apply_doco", requires=("context_boxes",)),
        ConditionKind("ro", "box", "ShoViR §3.2: noise in random boxes avoiding every annotated box", graded=True,
                      apply=f"{_APPLY}:apply_ro", random_boxes=True),
        ConditionKind("ro_area", "box", "random boxes covering exactly the OCO area", graded=True,
                      apply=f"{_APPLY}:apply_ro_area", requires=("disease_boxes",), random_boxes=True),
        ConditionKind("shuffle", "substitution", "Beyond Accuracy §3.3: another sample's image", donor="shuffle"),
        ConditionKind("swap", "substitution", "ModaLens §2: a same-patient study with other findings", donor="swap",
                      requires=("patient_id", "study_id")),
    )
}
"""Every intervention kind by name (the single declaration of each)."""

_ALIASES = {"all_noise_mean": "full_noise", "real": "baseline"}
_LABEL = re.compile(r"^(?P<name>[a-z_]+?)(?:_p(?P<pct>\d{1,3}))?(?P<report>\+report)?$")


def closest(name: str, choices: Sequence[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``.

    >>> closest("ocoo", ["oco", "doco", "ro"])
    " (did you mean 'oco'?)"
    >>> closest("zzz", ["oco"])
    ''
    """
    match = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def kind(name: str, *, field: str = "condition") -> ConditionKind:
    """The kind called ``name``; an unknown name is a ``ValueError`` listing the kinds.

    >>> kind("doco").family
    'box'
    >>> kind("occlude")
    Traceback (most recent call last):
    ...
    ValueError: condition: unknown intervention 'occlude'; expected one of baseline, ...
    """
    name = _ALIASES.get(name, name)
    if name not in KINDS:
        raise ValueError(f"{field}: unknown intervention {name!r}; expected one of {', '.join(KINDS)}"
                         f"{closest(name, list(KINDS))}")
    return KINDS[name]


@dataclass(frozen=True)
class ConditionSpec:
    """One condition of a sweep: a kind at one strength ``p`` and report setting."""

    name: str
    p: float = 1.0
    with_report: bool = False

    def __post_init__(self) -> None:
        kind(self.name)
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 <= self.p <= 1:
            raise ValueError(f"condition {self.name!r}: p must be a number in [0, 1], got {self.p!r}")
        object.__setattr__(self, "p", float(self.p))

    @property
    def kind(self) -> ConditionKind:
        return KINDS[self.name]

    @property
    def label(self) -> str:
        """File-name-safe label: ``oco_p60``, ``full_noise``, ``swap+report``.

        Box kinds always carry their strength; full noise only when it is not 1.

        >>> ConditionSpec("oco", 0.6).label, ConditionSpec("swap", with_report=True).label
        ('oco_p60', 'swap+report')
        >>> ConditionSpec("full_noise").label, ConditionSpec("full_noise", 0.4).label
        ('full_noise', 'full_noise_p40')
        """
        graded = self.kind.graded and (self.kind.family == "box" or self.p != 1.0)
        base = f"{self.name}_p{int(round(self.p * 100)):02d}" if graded else self.name
        return base + ("+report" if self.with_report else "")

    @classmethod
    def parse(cls, label: str) -> "ConditionSpec":
        """The condition a label names (the inverse of :attr:`label`).

        >>> ConditionSpec.parse("ro_area_p100")
        ConditionSpec(name='ro_area', p=1.0, with_report=False)
        >>> ConditionSpec.parse("baseline+report").label
        'baseline+report'
        """
        match = _LABEL.match(str(label).strip())
        if not match:
            raise ValueError(f"cannot parse condition label {label!r}; write e.g. 'oco_p60', 'full_noise', 'swap+report'")
        name = _ALIASES.get(match["name"], match["name"])
        p = int(match["pct"]) / 100 if match["pct"] is not None else 1.0
        if match["pct"] is not None and not KINDS.get(name, KINDS["baseline"]).graded:
            raise ValueError(f"condition label {label!r}: {name!r} takes no strength")
        return cls(name, p, bool(match["report"]))

    @property
    def image_condition(self) -> str:
        """The intervention actually applied to the shown image: ``p = 0`` of a graded kind is
        the unperturbed image, and a substitution shows its donor unperturbed.

        >>> ConditionSpec("oco", 0.0).image_condition, ConditionSpec("swap").image_condition
        ('baseline', 'baseline')
        """
        if self.kind.needs_donor or (self.kind.graded and self.p == 0):
            return "baseline"
        return self.name

    @property
    def image_p(self) -> float:
        """The strength of :attr:`image_condition` (0 for the unperturbed image)."""
        return 0.0 if self.image_condition == "baseline" else self.p

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p, "with_report": self.with_report}


def expand_conditions(entries: str | Sequence[Any], presets: Mapping[str, Sequence[Any]]) -> list[ConditionSpec]:
    """Condition specs from a preset name or a list of names, labels, presets and ``{name, p,
    with_report}`` mappings. Presets combine (a condition they share is kept once); a condition
    listed twice otherwise is refused.

    >>> [c.label for c in expand_conditions(["baseline", {"name": "oco", "p": [0, 1]}, "doco_p20"], {})]
    ['baseline', 'oco_p00', 'oco_p100', 'doco_p20']
    >>> [c.label for c in expand_conditions(["a", "b"], {"a": ["baseline", "blank"], "b": ["baseline", "swap"]})]
    ['baseline', 'blank', 'swap']
    """
    if isinstance(entries, str):
        if entries in presets:
            entries = list(presets[entries])
        else:
            entries = [entries]
    if not isinstance(entries, (list, tuple)):
        raise ValueError(f"conditions: expected a preset name or a list, got {type(entries).__name__}")
    specs: list[ConditionSpec] = []
    from_presets: set[ConditionSpec] = set()
    for index, entry in enumerate(entries):
        field = f"conditions[{index}]"
        if isinstance(entry, str):
            if entry in presets:
                # presets combine: a condition two presets share (the real image) is run once
                for spec in expand_conditions(entry, presets):
                    if spec not in from_presets:
                        specs.append(spec)
                        from_presets.add(spec)
                continue
            try:
                specs.append(ConditionSpec.parse(entry))
            except ValueError:
                raise ValueError(f"{field}: unknown condition or preset {entry!r}; presets: {', '.join(presets) or 'none'}; "
                                 f"interventions: {', '.join(KINDS)}{closest(entry, [*presets, *KINDS])}") from None
            continue
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise ValueError(f"{field}: expected a name or {{name: ..., p: [...]}}, got {entry!r}")
        unknown = set(entry) - {"name", "p", "with_report"}
        if unknown:
            raise ValueError(f"{field}: unknown keys {sorted(unknown)}; allowed: name, p, with_report")
        declared = kind(entry["name"], field=f"{field}.name")
        strengths = entry.get("p", list(declared.default_strengths))
        strengths = list(strengths) if isinstance(strengths, (list, tuple)) else [strengths]
        if "p" in entry and not declared.graded and strengths != [1.0] and strengths != [1]:
            raise ValueError(f"{field}.p: {declared.name!r} takes no strength")
        with_report = entry.get("with_report", False)
        if not isinstance(with_report, bool):
            raise ValueError(f"{field}.with_report must be true or false, got {with_report!r}")
        for p in strengths:
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
                raise ValueError(f"{field}.p: strengths must be numbers in [0, 1], got {p!r}")
            specs.append(ConditionSpec(declared.name, float(p), with_report))
    labels = [spec.label for spec in specs]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ValueError(f"conditions: {duplicated} listed more than once")
    return specs

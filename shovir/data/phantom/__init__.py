"""Synthetic chest X-ray phantoms with known findings, boxes, labels and reports.

This package is the generative model behind :class:`shovir.data.synthetic.SyntheticCXR`, the
dataset the demo, the tests and the known-answer calibration experiments run on. It is pure
numpy (no ``datasets``): given ``(seed, index)`` it samples a *case* (patient, latent scenario,
findings, anatomy, report, 14 CheXpert codes) and renders it to an 8-bit grayscale image with one
tight box per finding appearance.

Anatomy
    A frontal (PA) chest radiograph built in an attenuation domain and mapped through
    ``1 - exp(-k A)``: soft tissue thickening toward the midline, two lung fields with rounded
    apices and sharp costophrenic angles, hemidiaphragm domes (the right one higher), heart
    silhouette, aortic knob, trachea and main bronchi, hila, vessel markings radiating from the
    hila, posterior and anterior ribs, clavicles, spine, a gastric bubble, then an exposure
    gradient and Gaussian acquisition noise. Patient ``j`` has its own anatomy (heart size, lung
    shape, dome level, rib phase and spacing, vessel pattern, exposure) drawn from a generator keyed
    by ``(seed, "patient", j)``; each study adds small jitter (position, inspiration, exposure,
    noise), so two studies of one patient look like the same patient.

Findings
    Every localisable finding is an additive change of attenuation that is exactly zero outside
    its box (boxes are the tight bounding boxes of that change), so occluding the box removes the
    whole evidence and rendering with and without the finding differs only inside it:

    =========================== ================================================ ======================
    class                       appearance                                       box / anatomy
    =========================== ================================================ ======================
    Enlarged Cardiomediastinum  upper mediastinum widened into both lungs        upper mediastinum
    Cardiomegaly                heart silhouette enlarged (CTR > 0.5)            cardiac silhouette
    Lung Opacity                hazy ground-glass patch, vessels still visible   <side> <zone> lung zone
    Lung Lesion                 round, slightly lobulated nodule or mass         <side> <zone> lung zone
    Edema                       bilateral perihilar haze with septal lines       <side> hilar structures (x2)
    Consolidation               dense irregular patch with air bronchograms      <side> <zone> lung zone
    Atelectasis                 plate-like band at a base; compressive band      <side> lower lung zone
                                above an effusion on the same side
    Pneumothorax                apical lucent rim without markings + pleural     <side> apical zone
                                line
    Pleural Effusion            meniscus opacity blunting a costophrenic angle   <side> costophrenic angle
    Pleural Other               pleural thickening along the lateral wall        <side> lateral chest wall
    Fracture                    rib discontinuity with a gap and an offset       <side> <n>th rib
    Support Devices             pacemaker generator with lead loop, chest port   <side> chest wall /
                                or endotracheal tube                             trachea
    Pneumonia                   report only (no box), with consolidation         --
    =========================== ================================================ ======================

    About 10 % of present findings (never devices) are rendered subtle (contrast or size x0.6,
    still several times the noise) and reported as uncertain (code 3). Boxes of different
    findings are placed so that they rarely overlap, except two designed overlaps (IoU > 0.15)
    that exercise the B_c̄ filter of ShoViR §3.2: compressive atelectasis above a same-side
    effusion, and a ground-glass halo (Lung Opacity) next to a consolidation.

Co-occurrence
    Labels come from latent scenarios. A study's scenario is its patient's scenario with
    probability :data:`SCENARIO_PERSISTENCE` (0.75), otherwise a fresh draw; either way its
    marginal distribution is the scenario weights. Given the scenario each finding is present
    independently with the scenario's probability, OR-ed with a sporadic rate
    (:data:`SPORADIC_RATE`: 0.04 for each of the 12 localisable findings, in abnormal scenarios
    only, never for Pneumonia):

    ====================== ====== ===========================================================
    scenario               weight findings (probability)
    ====================== ====== ===========================================================
    normal                 0.20   none: *No Finding*
    heart_failure          0.19   Cardiomegaly 1, Edema 0.8, Pleural Effusion 0.7,
                                  Enlarged Cardiomediastinum 0.6
    infection              0.17   Consolidation 1, Pneumonia 0.8, Lung Opacity 0.7,
                                  Pleural Effusion 0.3
    postoperative_icu      0.17   Support Devices 1, Atelectasis 0.7, Pleural Effusion 0.4,
                                  Pneumothorax 0.3
    trauma                 0.13   Fracture 1, Pneumothorax 0.5, Pleural Other 0.4
    nodule                 0.14   Lung Lesion 1, Pleural Other 0.4
    ====================== ====== ===========================================================

    No Finding follows the CheXpert rule: present when no class other than Support Devices is
    (device-only post-operative studies are No Finding, as the CheXpert labeler and
    :mod:`shovir.labelers` code them). Exact P(B | A) from :func:`cooccurrence_matrix` (row A,
    column B; the last row gives the prevalence P(B) from :func:`marginal_probabilities`):

    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====
    A \\ B  ECM   Card  Opac  Lesn  Edem  Cons  Pna   Atel  PTX   Eff   PlOth  Frac  SD    NF
    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====
    ECM     1.00  0.83  0.07  0.08  0.68  0.09  0.04  0.07  0.07  0.63  0.07   0.08  0.09  0.00
    Card    0.55  1.00  0.06  0.07  0.72  0.07  0.03  0.06  0.06  0.66  0.06   0.06  0.07  0.00
    Opac    0.07  0.09  1.00  0.08  0.08  0.83  0.66  0.07  0.07  0.33  0.07   0.07  0.08  0.00
    Lesn    0.07  0.08  0.07  1.00  0.08  0.08  0.03  0.07  0.07  0.10  0.38   0.07  0.08  0.00
    Edem    0.54  0.87  0.07  0.07  1.00  0.08  0.03  0.07  0.07  0.65  0.06   0.07  0.08  0.00
    Cons    0.06  0.08  0.63  0.07  0.07  1.00  0.70  0.06  0.06  0.33  0.06   0.07  0.07  0.00
    Pna     0.04  0.04  0.71  0.04  0.04  1.00  1.00  0.04  0.04  0.33  0.04   0.04  0.04  0.00
    Atel    0.07  0.09  0.07  0.08  0.08  0.08  0.04  1.00  0.30  0.41  0.07   0.07  0.83  0.00
    PTX     0.07  0.09  0.07  0.08  0.08  0.09  0.04  0.30  1.00  0.24  0.24   0.49  0.41  0.00
    Eff     0.32  0.51  0.18  0.06  0.42  0.24  0.16  0.22  0.12  1.00  0.06   0.06  0.29  0.00
    PlOth   0.07  0.09  0.07  0.46  0.08  0.09  0.04  0.07  0.25  0.11  1.00   0.43  0.09  0.00
    Frac    0.07  0.09  0.07  0.07  0.08  0.08  0.03  0.07  0.45  0.10  0.37   1.00  0.08  0.00
    SD      0.06  0.08  0.06  0.07  0.07  0.07  0.03  0.63  0.30  0.41  0.06   0.07  1.00  0.07
    NF      0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00   0.00  0.06  1.00
    P(B)    0.14  0.21  0.15  0.17  0.18  0.20  0.14  0.15  0.14  0.27  0.14   0.16  0.20  0.21
    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====

    Context-derivable classes (:data:`CONTEXT_DERIVABLE`): a context-only model can report them
    from their co-findings, which DOCO occludes while the class's own box stays visible. Exact
    values from :func:`conditional_probability`:

    ============= ================================ =============== ===============
    class         predicted from                   P(class | all)  P(class)
    ============= ================================ =============== ===============
    Edema         Cardiomegaly + Pleural Effusion  0.778           0.178
    Pneumonia     Consolidation                    0.697           0.136
    Atelectasis   Support Devices                  0.625           0.146
    ============= ================================ =============== ===============

    With 200 images (seed 0) every localisable finding has at least 21 (image, class) pairs
    (Pleural Other; 15-45 expected across seeds, mean >= 27).

Reports
    Template sentences, several per finding and code, one CheXpert class per sentence except the
    combined negations "No pleural effusion or pneumothorax." and "No focal consolidation,
    pleural effusion or pneumothorax.": positive findings are stated plainly, uncertain ones with
    "possible", "questionable", "may", "borderline" or "concerning for", negated ones with "no",
    "not" or "normal". A sentence without a class keyword carries no code. Pneumonia follows its
    consolidation ("This is concerning for pneumonia." is code 3). *No Finding* is 1 exactly when
    no class other than Support Devices is positive or uncertain. See :data:`CLASS_KEYWORDS` for
    the words that name each class; the rule-based labeler of :mod:`shovir.labelers` reproduces
    every code of these reports.

Determinism
    Each image draws from generators keyed by a BLAKE2b hash of ``(seed, stream, index)`` (never
    Python's per-process salted string hash, never the position of an earlier draw), so image ``i`` does not depend on
    images ``0..i-1`` and the first ``k`` images are the same whatever the dataset size. Patients
    get 1-4 consecutive studies (mean 2.5) from a hash of ``(seed, "visits", patient)``.

Modules
    The package is layered: each module imports only modules listed above it. This ``__init__``
    re-exports the public API, so ``from shovir.data.phantom import X`` and ``phantom.X`` work
    for every name, and also the private rendering steps ``_render_anatomy``, ``_finding_delta``
    and ``_to_image``, which the reference-model fitting reuses to render a case with and
    without each finding's evidence from one anatomy.

    ======================== =======================================================================
    module                   holds
    ======================== =======================================================================
    ``scenarios``            scenario mixture, sporadic and subtle rates, exact prevalence and
                             co-occurrence, :data:`CONTEXT_DERIVABLE`, :func:`stable_rng`,
                             patients and visits, label draws (:func:`dataset_presence`)
    ``anatomy``              numerical helpers, :class:`Anatomy` and :func:`sample_anatomy`, the
                             finding-free attenuation image and the exposure/noise mapping to 8 bits
    ``findings``             :data:`LOCALIZED_FINDINGS`, :class:`FindingSpec`, the 12 findings'
                             spec constructors, placement, renderers, tight boxes and :func:`render`
    ``reports``              :data:`CLASS_KEYWORDS`, the template sentences and :func:`write_report`
    ``cases``                :class:`Case`, :func:`sample_case` and :func:`render_case`
    ``questions``            template VQA questions answered from a case's ground truth
                             (:func:`sample_questions`, :func:`parse_question`, :func:`true_answer`)
    ======================== =======================================================================

    :data:`PHANTOM_VERSION` is defined here, as it versions the whole package.
"""

from __future__ import annotations

from shovir.data.phantom.anatomy import Anatomy, sample_anatomy
from shovir.data.phantom.anatomy import _render_anatomy as _render_anatomy
from shovir.data.phantom.anatomy import _to_image as _to_image
from shovir.data.phantom.cases import Case, render_case, sample_case
from shovir.data.phantom.findings import (
    LOCALIZED_FINDINGS,
    SUBTLE_STRENGTH,
    FindingSpec,
    render,
)
from shovir.data.phantom.findings import _finding_delta as _finding_delta
from shovir.data.phantom.questions import (
    ABSENT_ANSWERS,
    LATERAL_FINDINGS,
    NONE_OF_THESE,
    NONE_RATE,
    QUESTION_TYPES,
    QUESTIONS_PER_IMAGE,
    SIDE_OPTIONS,
    YES_NO,
    GroundTruth,
    ParsedQuestion,
    Question,
    answer_priors,
    case_truth,
    parse_question,
    question_options,
    question_text,
    sample_questions,
    true_answer,
)
from shovir.data.phantom.reports import CLASS_KEYWORDS, write_report
from shovir.data.phantom.scenarios import (
    CONTEXT_DERIVABLE,
    REPORT_ONLY_FINDINGS,
    SCENARIO_PERSISTENCE,
    SCENARIOS,
    SPORADIC_RATE,
    SUBTLE_RATE,
    Scenario,
    conditional_probability,
    cooccurrence_matrix,
    dataset_presence,
    marginal_probabilities,
    patient_of,
    presence_probabilities,
    sample_presence,
    scenario_of,
    stable_rng,
)

__all__ = [
    "ABSENT_ANSWERS",
    "CLASS_KEYWORDS",
    "CONTEXT_DERIVABLE",
    "LATERAL_FINDINGS",
    "LOCALIZED_FINDINGS",
    "NONE_OF_THESE",
    "NONE_RATE",
    "PHANTOM_VERSION",
    "QUESTIONS_PER_IMAGE",
    "QUESTION_TYPES",
    "REPORT_ONLY_FINDINGS",
    "SCENARIOS",
    "SCENARIO_PERSISTENCE",
    "SIDE_OPTIONS",
    "SPORADIC_RATE",
    "SUBTLE_RATE",
    "SUBTLE_STRENGTH",
    "YES_NO",
    "Anatomy",
    "Case",
    "FindingSpec",
    "GroundTruth",
    "ParsedQuestion",
    "Question",
    "Scenario",
    "answer_priors",
    "case_truth",
    "conditional_probability",
    "cooccurrence_matrix",
    "dataset_presence",
    "marginal_probabilities",
    "patient_of",
    "parse_question",
    "presence_probabilities",
    "question_options",
    "question_text",
    "render",
    "render_case",
    "sample_anatomy",
    "sample_case",
    "sample_presence",
    "sample_questions",
    "scenario_of",
    "stable_rng",
    "true_answer",
    "write_report",
]

PHANTOM_VERSION = "1.0.0"
"""Version of the generative model, used as the builder's config version (its cache key).
Bump it whenever the images, boxes, labels or reports for a given seed change."""


"""The prompts of ICARE (``icare_metric.txt`` §3.2–3.3, Extended Data Fig. 8) and GREEN.

ICARE's prompts are written for shovir (the authors' wording is not reused); they ask for what
the paper's do: ``n`` four-option questions per report in a fixed layout (a bold numbered question
line, options ``A)``–``D)``, an ``Answer:`` line, items separated by a blank line), and single-letter
answers, once with a report and once without any (the "without report" prompt is the answering
prompt with the report removed, Extended Data, "Experimental setup").

GREEN's judge (``StanfordAIMI/GREEN-RadLlama2-7b``) was fine-tuned on one prompt, so
:func:`green_prompt` keeps that prompt's structure: the six error categories (a)–(f) in the
authors' words, both reports cut to their first :data:`GREEN_MAX_WORDS` whitespace tokens, and the
four bracketed sections the judge answers in. :data:`GREEN_CHAT_TEMPLATE` is the ``<|user|>`` /
``<|assistant|>`` turn layout the authors give the judge's tokenizer.
"""

from __future__ import annotations

__all__ = [
    "GREEN_CHAT_TEMPLATE",
    "GREEN_MAX_WORDS",
    "answer_prompt",
    "green_prompt",
    "mcq_prompt",
    "truncate_words",
]

GREEN_MAX_WORDS = 300
"""GREEN cuts each report to its first 300 whitespace tokens before prompting."""

GREEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + eos_token + '\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + eos_token + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
"""The judge's turn layout (``<|user|>`` … eos, then ``<|assistant|>``), as the GREEN authors set it."""

_MCQ = """Write {n} different multiple-choice questions about the chest X-ray report below. Each question \
must be answerable from the report and must not be answerable without it: ask about the findings it \
describes (their presence or absence, location, size, severity, change). Give every question four \
options, exactly one of them correct according to the report.

Radiology report:
\"\"\"
{report}
\"\"\"
{avoid}
Use exactly this layout for every question, with a blank line between questions:

**1: <question>**
A) <option>
B) <option>
C) <option>
D) <option>
Answer: <letter of the correct option>"""

_AVOID = """
You already wrote the questions below; write {n} new ones that differ from all of them:
{questions}
"""

_ANSWER_WITH = """Radiology report:
\"\"\"
{report}
\"\"\"

Answer the question using only the radiology report above.

{body}"""

_ANSWER_WITHOUT = """Answer the question.

{body}"""

_QUESTION = """Question: {question}
A) {a}
B) {b}
C) {c}
D) {d}

Reply with one letter (A, B, C or D) and nothing else."""

_GREEN = """Objective: Evaluate the accuracy of a candidate radiology report in comparison to a reference \
radiology report composed by expert radiologists.

    Process Overview: You will be presented with:

    1. The criteria for making a judgment.
    2. The reference radiology report.
    3. The candidate radiology report.
    4. The desired format for your assessment.

    1. Criteria for Judgment:

    For each candidate report, determine:

    The count of clinically significant errors.
    The count of clinically insignificant errors.

    Errors can fall into one of these categories:

    a) False report of a finding in the candidate.
    b) Missing a finding present in the reference.
    c) Misidentification of a finding's anatomic location/position.
    d) Misassessment of the severity of a finding.
    e) Mentioning a comparison that isn't in the reference.
    f) Omitting a comparison detailing a change from a prior study.
    Note: Concentrate on the clinical findings rather than the report's writing style. Evaluate only the \
findings that appear in both reports.

    2. Reference Report:
    {reference}

    3. Candidate Report:
    {candidate}

    4. Reporting Your Assessment:

    Follow this specific format for your output, even if no errors are found:
    ```
    [Explanation]:
    <Explanation>

    [Clinically Significant Errors]:
    (a) <Error Type>: <The number of errors>. <Error 1>; <Error 2>; ...; <Error n>
    ....
    (f) <Error Type>: <The number of errors>. <Error 1>; <Error 2>; ...; <Error n>

    [Clinically Insignificant Errors]:
    (a) <Error Type>: <The number of errors>. <Error 1>; <Error 2>; ...; <Error n>
    ....
    (f) <Error Type>: <The number of errors>. <Error 1>; <Error 2>; ...; <Error n>

    [Matched Findings]:
    <The number of matched findings>. <Finding 1>; <Finding 2>; ...; <Finding n>
    ```
"""


def mcq_prompt(report: str, n: int, avoid: list[str] | tuple[str, ...] = ()) -> str:
    """The question-writing prompt of one agent (ICARE §3.2, "MCQ Dataset Generation"): ``n``
    questions about ``report``; ``avoid`` lists questions already written (a retry asks for the
    missing ones and names them, so a deterministic judge does not repeat itself).

    >>> text = mcq_prompt("Small left pleural effusion.", 40)
    >>> "Write 40 different" in text and "Small left pleural effusion." in text and "Answer: <letter" in text
    True
    >>> "- Is there an effusion?" in mcq_prompt("x", 3, avoid=["Is there an effusion?"])
    True
    """
    extra = _AVOID.format(n=n, questions="\n".join(f"- {q}" for q in avoid)) if avoid else ""
    return _MCQ.format(n=n, report=report.strip(), avoid=extra)


def answer_prompt(question: str, options: list[str] | tuple[str, ...], report: str | None) -> str:
    """The answering prompt (ICARE §3.3, and the filter of §3.2): the question with its four
    options, after the report, or with no report at all when ``report`` is ``None``.

    >>> print(answer_prompt("Is there an effusion?", ["Yes", "No", "Cannot tell", "Bilateral"], None))
    Answer the question.
    <BLANKLINE>
    Question: Is there an effusion?
    A) Yes
    B) No
    C) Cannot tell
    D) Bilateral
    <BLANKLINE>
    Reply with one letter (A, B, C or D) and nothing else.
    """
    if len(options) != 4:
        raise ValueError(f"options: an ICARE question has four options, got {len(options)}")
    body = _QUESTION.format(question=question.strip(), a=options[0], b=options[1], c=options[2], d=options[3])
    if report is None:
        return _ANSWER_WITHOUT.format(body=body)
    return _ANSWER_WITH.format(report=report.strip(), body=body)


def truncate_words(text: str, max_words: int = GREEN_MAX_WORDS) -> str:
    """The first ``max_words`` whitespace tokens of ``text``, joined by single spaces (GREEN's cut).

    >>> truncate_words("a  b\\nc d", 3)
    'a b c'
    """
    return " ".join(text.split()[:max_words])


def green_prompt(reference: str, candidate: str, max_words: int = GREEN_MAX_WORDS) -> str:
    """GREEN's judge prompt for one pair, each report cut to its first ``max_words`` words.

    >>> text = green_prompt("Cardiomegaly.  Small effusion.", "Normal heart.")
    >>> "2. Reference Report:\\n    Cardiomegaly. Small effusion." in text and "[Matched Findings]:" in text
    True
    """
    return _GREEN.format(reference=truncate_words(reference, max_words), candidate=truncate_words(candidate, max_words))

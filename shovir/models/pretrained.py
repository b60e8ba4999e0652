"""The shared base of the checkpoint-backed adapters, and how a report joins the question.

:class:`PretrainedAdapter` holds what every adapter built on a checkpoint does the same way: it
takes one :class:`~shovir.models.loading.LoadOptions` and one
:class:`~shovir.models.decoding.Decoding`, validates messages (naming the offending index), loads
the model on first use, splits a call into batches of :attr:`~PretrainedAdapter.batch_size` and
checks one output per message, in order (reference §9, defect 10: the authors' CXRMate adapter
broadcast one prediction to a whole batch). The family modules (``hf``, ``medgemma``,
``nv_reason``, ``chexagent``, ``cxrmate``, ``libra``, ``maira``, ``radialog``) only describe what
is particular to their model: :meth:`~PretrainedAdapter._load` and
:meth:`~PretrainedAdapter._generate_batch`, passing
:meth:`~PretrainedAdapter._generate_kwargs` to ``model.generate`` so that sampling is seeded per
message.

A context report (the ModaLens "with report" arm) precedes the question in the same user turn,
through :data:`REPORT_TEMPLATE` (:func:`compose_text`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any


from shovir.models.base import Generation, Message, ModelAdapter, validate_messages
from shovir.models.decoding import Decoding
from shovir.models.loading import LoadOptions

__all__ = ["REPORT_TEMPLATE", "PretrainedAdapter", "check_template", "compose_text"]

REPORT_TEMPLATE = "Radiology report:\n{report}\n\n{question}"
"""How a context report and the question share the user turn (fields ``{report}``, ``{question}``)."""


def compose_text(question: str, report: str | None, template: str = REPORT_TEMPLATE) -> str:
    """The user-turn text: the question alone, or the report then the question.

    >>> compose_text("Is there an effusion?", None)
    'Is there an effusion?'
    >>> print(compose_text("Is there an effusion?", "Small left effusion."))
    Radiology report:
    Small left effusion.
    <BLANKLINE>
    Is there an effusion?
    """
    if report is None:
        return question
    if not isinstance(report, str):
        raise ValueError(f"report must be a string or None, got {type(report).__name__}")
    return template.format(report=report, question=question)


def check_template(template: str, field: str = "report_template") -> str:
    """``template`` itself, if it holds ``{report}`` and ``{question}`` and no other field.

    >>> check_template("{report} / {question}")
    '{report} / {question}'
    >>> check_template("{question} only")
    Traceback (most recent call last):
    ...
    ValueError: report_template must be a string containing '{report}' and '{question}', got '{question} only'
    """
    if not isinstance(template, str) or "{report}" not in template or "{question}" not in template:
        raise ValueError(f"{field} must be a string containing '{{report}}' and '{{question}}', got {template!r}")
    try:
        template.format(report="", question="")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(f"{field}: only the fields {{report}} and {{question}} are allowed ({error})") from None
    return template


class PretrainedAdapter(ModelAdapter):
    """Shared machinery of the checkpoint-backed adapters.

    Subclasses build their :class:`~shovir.models.loading.LoadOptions` with
    :meth:`load_options` (which fills in :attr:`default_checkpoint`), implement :meth:`_load` and
    :meth:`_generate_batch`, and may add to :meth:`_extra_config`.

    Args:
        loading: where the weights come from and how they are loaded.
        decoding: the decoding settings.
        batch_size: messages per ``generate`` call (default: the class's :attr:`batch_size`).
        prompt: the question used when a message has none (default: :attr:`default_prompt`).
        report_template: how a context report precedes the question (:data:`REPORT_TEMPLATE`).
    """

    default_checkpoint: str | None = None
    requires_remote_code: bool = False
    supports_scores: bool = False
    uses_prompt: bool = True
    max_images: int | None = None

    def __init__(
        self,
        loading: LoadOptions,
        *,
        decoding: Decoding,
        batch_size: int | None = None,
        prompt: str | None = None,
        report_template: str = REPORT_TEMPLATE,
    ) -> None:
        if not isinstance(loading, LoadOptions):
            raise ValueError(
                f"loading must be a LoadOptions, got {type(loading).__name__}; build it with "
                f"{type(self).__name__}.load_options(checkpoint, ...)"
            )
        if not isinstance(decoding, Decoding):
            raise ValueError(f"decoding must be a Decoding, got {type(decoding).__name__}")
        if batch_size is not None:
            if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
                raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
            self.batch_size = batch_size
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string or None, got {type(prompt).__name__}")
        self.loading = loading
        self.decoding = decoding
        if prompt is not None:
            self.default_prompt = prompt
        self.report_template = check_template(report_template)
        self._loaded = False

    @classmethod
    def load_options(cls, checkpoint: str | os.PathLike | None, **options: Any) -> LoadOptions:
        """:class:`~shovir.models.loading.LoadOptions` for ``checkpoint``, or the class's default checkpoint."""
        if checkpoint is None:
            checkpoint = cls.default_checkpoint
        if checkpoint is None:
            raise ValueError(f"{cls.__name__}: pass checkpoint=<local folder or Hub id>")
        return LoadOptions(checkpoint, **options)

    # ----- the loading options, under the names the adapters have always used
    @property
    def checkpoint(self) -> str:
        """The resolved checkpoint: an existing folder or a Hub id."""
        return self.loading.path

    @property
    def checkpoint_is_local(self) -> bool:
        """Whether :attr:`checkpoint` is a local folder."""
        return self.loading.is_local

    @property
    def checkpoint_name(self) -> str:
        """The checkpoint as the user gave it (what :meth:`config` records)."""
        return self.loading.checkpoint

    @property
    def dtype(self) -> str:
        """The canonical dtype name (``auto`` = the checkpoint's own)."""
        return self.loading.dtype

    @property
    def revision(self) -> str | None:
        """The Hub revision, if one was given."""
        return self.loading.revision

    @property
    def trust_remote_code(self) -> bool:
        """Whether code shipped with the checkpoint may run."""
        return self.loading.trust_remote_code

    @property
    def local_files_only(self) -> bool:
        """Whether only local files and the local Hub cache are read."""
        return self.loading.local_files_only

    # ----- configuration
    def _require_remote_code(self) -> None:
        if self.requires_remote_code and not self.trust_remote_code:
            raise ValueError(
                f"{type(self).__name__}: {self.checkpoint_name!r} ships its model code inside the checkpoint and cannot "
                "load without it; review that code, then pass trust_remote_code as True"
            )

    def _hub_kwargs(self) -> dict[str, Any]:
        return self.loading.hub_kwargs()

    def config(self) -> dict[str, Any]:
        """Checkpoint, revision, prompt, decoding and dtype: what determines the outputs."""
        config = {
            "name": self.name,
            "checkpoint": self.checkpoint_name,
            "revision": self.revision,
            "prompt": self.default_prompt,
            "report_template": self.report_template,
            "dtype": self.dtype,
            "decoding": self.decoding.as_config(),
        }
        config.update(self._extra_config())
        return config

    def _extra_config(self) -> dict[str, Any]:
        return {}

    # ----- loading
    def load(self) -> PretrainedAdapter:
        """Load the weights now (otherwise the first :meth:`generate` does it)."""
        if not self._loaded:
            self._load()
            self._loaded = True
        return self

    def _load(self) -> None:
        raise NotImplementedError

    def _run_loader(self, loader: Any, *args: Any, **kwargs: Any) -> Any:
        """Call a ``from_pretrained`` and turn cache misses / remote-code refusals into clear errors."""
        return self.loading.call(loader, *args, **kwargs)

    def _device(self) -> str:
        return self.loading.target_device()

    # ----- generation
    def question(self, message: Message, index: int = 0) -> str:
        """The message's prompt, else the adapter's default prompt."""
        question = message.prompt if message.prompt is not None else self.default_prompt
        if question is None:
            raise ValueError(f"messages[{index}].prompt is None and {self.name} has no default prompt; pass prompt=...")
        if not isinstance(question, str):
            raise ValueError(f"messages[{index}].prompt must be a string, got {type(question).__name__}")
        return question

    def _validate(self, messages: Sequence[Message]) -> list[Message]:
        return validate_messages(messages, max_images=self.max_images,
                                 question=self.question if self.uses_prompt else None)

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One :class:`Generation` per message, in order (batches of :attr:`batch_size`)."""
        checked = self._validate(messages)
        if not checked:
            return []
        self.load()
        outputs: list[Generation] = []
        for start in range(0, len(checked), self.batch_size):
            batch = checked[start:start + self.batch_size]
            outputs.extend(self._check_batch(batch, self._generate_batch(batch, offset=start)))
        return self._check_batch(checked, outputs)

    def _generate_batch(self, batch: list[Message], offset: int) -> list[Generation]:
        raise NotImplementedError

    def _generate_kwargs(self, batch: Sequence[Message]) -> dict[str, Any]:
        """:meth:`Decoding.generate_kwargs` for this batch and the loaded model's ``generation_config``.

        Call it once per ``model.generate`` call: when sampling, it holds that call's
        :class:`~shovir.models.decoding.SeededRowSampler` (one seeded stream per message).
        """
        generation_config = getattr(getattr(self, "model", None), "generation_config", None)
        return self.decoding.generate_kwargs(batch, generation_config=generation_config)

    def _move(self, inputs: Mapping[str, Any], device: Any, dtype: Any = None) -> dict[str, Any]:
        import torch

        moved: dict[str, Any] = {}
        for key, value in inputs.items():
            if torch.is_tensor(value):
                if dtype is not None and torch.is_floating_point(value):
                    moved[key] = value.to(device=device, dtype=dtype)
                else:
                    moved[key] = value.to(device)
            else:
                moved[key] = value
        return moved

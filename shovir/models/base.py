"""The model interface: a batch of messages in, generated texts (and optional answer scores) out.

Every model — a Hugging Face checkpoint, a research repository's custom code, or one of the
reference models for the synthetic data — is a :class:`ModelAdapter`. The runner only ever calls
:meth:`ModelAdapter.generate` with a list of :class:`Message` and receives one
:class:`Generation` per message, in order.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from PIL import Image

__all__ = ["Generation", "Message", "ModelAdapter", "require"]


@dataclass
class Message:
    """One request to a model.

    Args:
        images: the images, usually one frontal chest X-ray (PIL, any mode; adapters convert).
        prompt: the instruction or question; ``None`` uses the model's default report prompt.
        report: a report given as context (the ModaLens "with report" arm), or ``None``.
        options: answer options for closed questions; adapters that can score them return
            per-option scores (ModaLens margins).
        seed: the message's own sampling seed, set by the sweep runner from the run seed and the
            generation key; ``None`` means it is derived from the message content (prompt,
            report, options, image bytes). Together with the decoding seed it fixes the text
            sampled for this message whatever batch it is in; greedy decoding ignores it.
    """

    images: list[Image.Image]
    prompt: str | None = None
    report: str | None = None
    options: list[str] | None = None
    seed: int | None = None


@dataclass
class Generation:
    """What a model produced for one message.

    ``text`` is the answer or report only; a reasoning trace (NV-Reason-CXR's ``<think>``) goes to
    ``reasoning`` so that labelers and text metrics never score it. ``scores`` maps each option to
    the log-probability of its first answer token, when the adapter supports scoring.

    ``error`` marks a generation that failed for good (e.g. a server request that still failed
    after its retries): the runner records it as a failure, never as text, so it is not scored and
    is generated again on the next run.

    >>> Generation.failure("HTTP 500 after 3 attempts").ok
    False
    """

    text: str
    reasoning: str | None = None
    scores: dict[str, float] | None = None
    error: str | None = None

    @classmethod
    def failure(cls, error: str) -> "Generation":
        """A failed generation with its reason."""
        return cls(text="", error=str(error))

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ModelAdapter(ABC):
    """Base class of every model adapter.

    Subclasses set :attr:`name` and implement :meth:`generate`. :meth:`config` returns what
    determines the outputs (checkpoint, prompt, decoding); its hash keys the run records, so that
    a changed prompt or decoding never reuses stale generations.
    """

    name: str = ""
    default_prompt: str | None = None
    batch_size: int = 8

    @abstractmethod
    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """Generate one :class:`Generation` per message, in order."""

    def config(self) -> dict[str, Any]:
        """The settings that determine the outputs (JSON-serialisable)."""
        return {"name": self.name, "default_prompt": self.default_prompt}

    def config_hash(self) -> str:
        """A short stable hash of :meth:`config`.

        >>> class Echo(ModelAdapter):
        ...     name = "echo"
        ...     def generate(self, messages):
        ...         return [Generation(m.prompt or "") for m in messages]
        >>> len(Echo().config_hash())
        12
        """
        text = json.dumps(self.config(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def _check_batch(self, messages: Sequence[Message], outputs: list[Generation]) -> list[Generation]:
        """Refuse a batch whose outputs do not match its inputs one to one (the authors' CXRMate
        adapter broadcast one prediction to a whole batch; reference code §9, defect 10)."""
        if len(outputs) != len(messages):
            raise RuntimeError(f"{self.name}: {len(outputs)} generations for {len(messages)} messages")
        return outputs


def require(module: str, install: str) -> Any:
    """Import ``module`` or raise an ``ImportError`` that says how to install it.

    >>> require("json", "pip install json").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"this model needs {module!r}: {install}") from error


def validate_messages(
    messages: Sequence[Message],
    *,
    max_images: int | None = None,
    too_many_images: str = "",
    question: Callable[[Message, int], Any] | None = None,
    fold_case: bool = False,
) -> list[Message]:
    """Check every message before any generation, naming the message and the field.

    ``max_images`` caps the images of one message (``too_many_images`` says how to raise the
    cap); ``question(message, index)`` resolves the prompt so a missing one fails here;
    ``fold_case`` refuses options that differ only in case (for adapters that match answers to
    options case-insensitively).

    >>> validate_messages([Message(images=[Image.new("L", (2, 2))], options=["yes", "yes"])])
    Traceback (most recent call last):
    ...
    ValueError: messages[0].options has duplicates: ['yes', 'yes']
    """
    checked = list(messages)
    for index, message in enumerate(checked):
        if not isinstance(message, Message):
            raise ValueError(f"messages[{index}] must be a shovir Message, got {type(message).__name__}")
        if not isinstance(message.images, (list, tuple)) or not message.images:
            raise ValueError(f"messages[{index}].images must be a non-empty list of PIL images")
        for position, image in enumerate(message.images):
            if not isinstance(image, Image.Image):
                raise ValueError(f"messages[{index}].images[{position}] must be a PIL image, got {type(image).__name__}")
        if max_images is not None and len(message.images) > max_images:
            raise ValueError(f"messages[{index}] has {len(message.images)} images; at most {max_images} allowed"
                             + (f" ({too_many_images})" if too_many_images else ""))
        if message.report is not None and not isinstance(message.report, str):
            raise ValueError(f"messages[{index}].report must be a string or None, got {type(message.report).__name__}")
        if message.seed is not None and (not isinstance(message.seed, numbers.Integral) or isinstance(message.seed, bool)):
            raise ValueError(f"messages[{index}].seed must be an integer or None, got {message.seed!r}")
        if question is not None:
            question(message, index)
        if message.options is not None:
            if (not isinstance(message.options, (list, tuple)) or not message.options
                    or not all(isinstance(o, str) and o.strip() for o in message.options)):
                raise ValueError(f"messages[{index}].options must be a non-empty list of non-empty strings")
            if len(set(message.options)) != len(message.options):
                raise ValueError(f"messages[{index}].options has duplicates: {list(message.options)}")
            folded = {(o.strip().casefold() if fold_case else o.strip()) for o in message.options}
            if len(folded) != len(message.options):
                raise ValueError(f"messages[{index}].options {list(message.options)} are equal once stripped"
                                 f"{' and case-folded' if fold_case else ''}; an answer could not tell them apart")
    return checked

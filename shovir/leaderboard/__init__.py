"""The leaderboard: results documents → tables, figures and model details in a Gradio app, and
the Hub layouts that publish it (:mod:`shovir.leaderboard.hub`).

:mod:`shovir.leaderboard.data` needs only the base install; ``build_app`` and ``serve``
(:mod:`shovir.leaderboard.app`) need the ``leaderboard`` extra (Gradio) and are imported on use.
"""

from typing import Any

from shovir.leaderboard.data import Board, Entry, UploadRejected, load_board, store_upload, validate_upload

__all__ = ["Board", "Entry", "UploadRejected", "load_board", "store_upload", "validate_upload", "build_app", "serve"]


def __getattr__(name: str) -> Any:
    if name in ("build_app", "serve"):
        from shovir.leaderboard import app

        return getattr(app, name)
    raise AttributeError(f"module 'shovir.leaderboard' has no attribute {name!r}")

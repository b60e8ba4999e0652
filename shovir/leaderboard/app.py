"""The leaderboard app (Gradio): one tab per protocol, a model detail view, and uploads.

``shovir leaderboard --results DIR --port N`` serves it on localhost; the Hub Space
(``examples/leaderboard_space/``) calls :func:`build_app` on its own folder. Every number comes
from the results documents in the folder (:mod:`shovir.leaderboard.data`); the app computes
nothing of its own and executes nothing from an upload.

Needs the ``leaderboard`` extra: ``pip install "shovir[leaderboard]"``.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

from shovir.leaderboard.data import Board, UploadRejected, load_board, store_upload
from shovir.protocols import PROTOCOLS, get_protocol

__all__ = ["build_app", "serve"]

_EMPTY_NOTE = "No results for this protocol yet: score a run with `shovir score RUN` and put its results.json here."


def _gradio() -> Any:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # the app never phones home
    try:
        import gradio
    except ImportError as error:
        raise ImportError('the leaderboard needs Gradio: pip install "shovir[leaderboard]"') from error
    return gradio


def _frame(headers: list[str], rows: list[list[Any]]) -> Any:
    import pandas

    return pandas.DataFrame(rows, columns=headers)


class _State:
    """The board of one folder, reloaded after every accepted upload."""

    def __init__(self, folder: Path, figures_dir: Path) -> None:
        self.folder, self.figures_dir = folder, figures_dir
        self.reload()

    def reload(self) -> None:
        self.board: Board = load_board(self.folder)

    def figures(self, protocol: str, dataset: str | None) -> list[str]:
        if not dataset or dataset not in self.board.datasets(protocol):
            return []
        results = self.board.merged(dataset)
        out = self.figures_dir / f"{protocol}-{abs(hash((dataset, len(self.board.entries))))}"
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for target in get_protocol(protocol).figures:
            module_name, function_name = target.split(":")
            path = getattr(importlib.import_module(module_name), function_name)(results, out)
            if path is not None:
                paths.append(str(path))
        return paths

    def problems(self) -> str:
        if not self.board.problems:
            return ""
        listed = "\n".join(f"- `{name}`: {reason}" for name, reason in sorted(self.board.problems.items()))
        return f"**{len(self.board.problems)} file(s) in the folder are not results documents and are not shown:**\n{listed}"


def build_app(results_dir: str | Path, allow_upload: bool = True, figures_dir: str | Path | None = None) -> Any:
    """The leaderboard of the results documents under ``results_dir``, as a ``gradio.Blocks``.

    ``allow_upload`` adds the upload tab (validated results documents are stored under
    ``results_dir/uploads/``). Figures are drawn into ``figures_dir`` (a temporary folder by
    default).
    """
    gr = _gradio()
    folder = Path(results_dir)
    state = _State(folder, Path(figures_dir) if figures_dir else Path(tempfile.mkdtemp(prefix="shovir-leaderboard-")))
    # protocols with results first (ShoViR leading), then the empty ones
    protocols = sorted(PROTOCOLS.names(), key=lambda n: (not state.board.datasets(n), n != "shovir", n))
    tables: dict[str, tuple[Any, ...]] = {}

    def overview(protocol: str, dataset: str | None, sort_by: str | None, order: str) -> Any:
        if not dataset:
            return _frame(["model"], [])
        return _frame(*state.board.overview(protocol, dataset, sort_by or None, order != "ascending"))

    def metric_table(protocol: str, dataset: str | None, metric: str | None) -> Any:
        if not dataset or not metric:
            return _frame(["model"], [])
        return _frame(*state.board.metric_table(protocol, dataset, metric))

    with gr.Blocks(title="shovir leaderboard", analytics_enabled=False) as app:
        gr.Markdown("# shovir leaderboard\nDo vision-language models use the image? Every value is shown with its "
                    "95% interval and the number of units (n) it rests on; values on fewer than 10 units are noted.")
        problems = gr.Markdown(state.problems())
        for protocol in protocols:
            declaration = get_protocol(protocol)
            datasets = state.board.datasets(protocol)
            metrics = state.board.metrics(protocol)
            with gr.Tab(declaration.title, id=f"tab-{protocol}"):
                gr.Markdown(f"{declaration.title} — `{declaration.paper}`" + ("" if datasets else f"\n\n{_EMPTY_NOTE}"))
                with gr.Row():
                    dataset = gr.Dropdown(datasets, value=datasets[0] if datasets else None, label="dataset",
                                          elem_id=f"{protocol}-dataset")
                    sort_by = gr.Dropdown(metrics, value=None, label="sort by", elem_id=f"{protocol}-sort")
                    order = gr.Radio(["descending", "ascending"], value="descending", label="order",
                                     elem_id=f"{protocol}-order")
                table = gr.Dataframe(overview(protocol, dataset.value, None, "descending"), label="all metrics",
                                     interactive=False, elem_id=f"{protocol}-overview")
                metric = gr.Dropdown(metrics, value=metrics[0] if metrics else None, label="metric",
                                     elem_id=f"{protocol}-metric")
                detail = gr.Dataframe(metric_table(protocol, dataset.value, metric.value), label="one metric, with its "
                                      "95% interval and n", interactive=False, elem_id=f"{protocol}-metric-table")
                gallery = gr.Gallery(state.figures(protocol, dataset.value), label="figures", columns=2,
                                     object_fit="contain", height=460, elem_id=f"{protocol}-figures")
                name = gr.State(protocol)
                for control in (dataset, sort_by, order):
                    control.change(overview, [name, dataset, sort_by, order], table)
                for control in (dataset, metric):
                    control.change(metric_table, [name, dataset, metric], detail)
                dataset.change(state.figures, [name, dataset], gallery)
                tables[protocol] = (dataset, table)
        with gr.Tab("Models", id="tab-models"):
            names = [entry.name for entry in state.board.entries]
            model = gr.Dropdown(names, value=names[0] if names else None, label="model", elem_id="model-name")
            model_detail = gr.JSON(state.board.entry(names[0]).detail() if names else {}, label="configuration, "
                                   "versions and coverage", elem_id="model-detail")
            model.change(lambda n: state.board.entry(n).detail() if n else {}, model, model_detail)
        if allow_upload:
            with gr.Tab("Upload", id="tab-upload"):
                gr.Markdown("Upload the `results.json` that `shovir score` wrote. It is checked against the results "
                            "schema; a file that fails is refused with the reason and nothing is stored.")
                upload = gr.File(label="results.json", file_types=[".json"], type="binary", elem_id="upload-file")
                message = gr.Markdown(elem_id="upload-message")

                def accept(data: bytes | None) -> list[Any]:
                    unchanged = [gr.update() for _ in range(2 * len(tables) + 2)]
                    if data is None:
                        return ["", *unchanged]
                    try:
                        stored = store_upload(folder, data)
                    except UploadRejected as error:
                        return [f"**Upload refused:** {error}", *unchanged]
                    state.reload()
                    updates: list[Any] = []
                    for protocol, _ in tables.items():
                        choices = state.board.datasets(protocol)
                        updates.append(gr.update(choices=choices, value=choices[0] if choices else None))
                        updates.append(overview(protocol, choices[0] if choices else None, None, "descending"))
                    names = [entry.name for entry in state.board.entries]
                    return [f"**Stored** as `{stored.relative_to(folder).as_posix()}`.", *updates,
                            gr.update(choices=names), state.problems()]

                outputs = [message]
                for dataset, table in tables.values():
                    outputs += [dataset, table]
                upload.upload(accept, upload, [*outputs, model, problems])
    return app


def serve(results_dir: str | Path, port: int = 7860, host: str = "127.0.0.1", allow_upload: bool = True,
          block: bool = True) -> Any:
    """Serve the leaderboard on ``host:port`` (localhost by default); returns the app."""
    app = build_app(results_dir, allow_upload)
    app.launch(server_name=host, server_port=port, prevent_thread_lock=not block, share=False, show_error=True)
    return app

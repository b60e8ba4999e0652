"""The leaderboard: results documents to tables (unit), and the Gradio app driven end to end in
headless Chromium: the page loads, lists the demo's models, sorts, and refuses a bad upload."""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from shovir.leaderboard import UploadRejected, load_board, store_upload, validate_upload
from shovir.leaderboard.data import MAX_UPLOAD_BYTES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MODELS = ["reference-context", "reference-grounded", "reference-prior"]


def _doc(alias: str, flip_rate, dataset: str = "synthetic") -> dict:
    return {"schema_version": "2.0", "run": {"config": {"dataset": {"name": dataset}, "models": [{"alias": alias}]},
                                             "config_hash": "abc123"},
            "coverage": {alias: {"oco_p100": {"expected": 40, "present": 40}}},
            "models": {alias: {"adapter": "reference", "protocols": {"shovir": {"flip_rate": {"oco_p100": {
                "flip_rate": flip_rate, "denominators": {"Edema": 40}, "ci": {"flip_rate": {"low": 0.1, "high": 0.9}}}}}}}}}


def test_board_names_clashing_aliases_by_file_and_lists_unreadable_files(tmp_path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "results.json").write_text(json.dumps(_doc("m", 0.5)))
    (tmp_path / "b.json").write_text(json.dumps(_doc("m", 0.7)))
    (tmp_path / "mimic.json").write_text(json.dumps(_doc("m", 0.2, dataset="mimic_cxr")))
    (tmp_path / "broken.json").write_text("{")
    board = load_board(tmp_path)
    assert sorted(e.name for e in board.entries) == ["m", "m (b.json)", "m (run1/results.json)"]
    assert board.datasets() == ["mimic_cxr", "synthetic"]
    headers, rows = board.metric_table("shovir", "synthetic", "FR OCO")
    assert headers == ["model", "FR OCO", "95% CI low", "95% CI high", "n", "note"]
    assert rows == [["m (b.json)", 0.7, 0.1, 0.9, 40, ""], ["m (run1/results.json)", 0.5, 0.1, 0.9, 40, ""]]
    assert board.problems == {"broken.json": "not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)"}
    detail = board.entry("m (b.json)").detail()
    assert (detail["config_hash"], detail["model_config"], detail["coverage"]) == (
        "abc123", {"alias": "m"}, {"oco_p100": {"expected": 40, "present": 40}})
    with pytest.raises(ValueError, match="sort_by: 'nope' is not a shovir column"):
        board.overview("shovir", "synthetic", "nope")


@pytest.mark.parametrize("data, message", [
    (b"\xff\xfe", "not UTF-8 text"),
    (b"[1]", "expected a JSON object, got list"),
    (json.dumps({"schema_version": "1.0", "models": {}}).encode(), "schema_version '1.0' is not supported"),
    (json.dumps({"schema_version": "2.0", "models": {"m": {"protocols": {"nope": {}}}}}).encode(), "unknown protocol 'nope'"),
    (json.dumps({"schema_version": "2.0", "models": {"m": {"protocols": {"shovir": []}}}}).encode(),
     r"models\['m'\].protocols\['shovir'\] must be an object"),
    (json.dumps(_doc("m", "0.5")).encode(), "column 'FR OCO' is '0.5', not a number"),
    (json.dumps(_doc("m", None) | {"models": {"m": {"adapter": "a", "protocols": {"shovir": {"flip_rate": {
        "oco_p100": [1, 2]}}}}}}).encode(), r"\['oco_p100'\] must be an object \(a metric's result\), got list"),
])
def test_bad_uploads_are_refused_with_the_reason_and_nothing_is_stored(tmp_path, data, message):
    with pytest.raises(UploadRejected, match=message):
        store_upload(tmp_path, data)
    assert list(tmp_path.iterdir()) == []


def test_uploads_have_a_size_limit_and_content_derived_names(tmp_path):
    with pytest.raises(UploadRejected, match=f"more than the {MAX_UPLOAD_BYTES} allowed"):
        validate_upload(b" " * (MAX_UPLOAD_BYTES + 1))
    data = json.dumps(_doc("m", 0.5)).encode()
    stored = store_upload(tmp_path, data)
    assert stored.parent == tmp_path / "uploads" and stored.read_bytes() == data
    assert store_upload(tmp_path, data) == stored  # the same file twice is stored once


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(demo_run, tmp_path_factory):
    pytest.importorskip("gradio", reason='the leaderboard needs Gradio: pip install "shovir[leaderboard]"')
    from shovir.leaderboard import build_app

    demo, _, _ = demo_run
    folder = tmp_path_factory.mktemp("board")
    shutil.copy(demo / "shovir" / "results.json", folder / "shovir.json")
    shutil.copy(demo / "vqa" / "results.json", folder / "vqa.json")
    port = _free_port()
    app = build_app(folder, figures_dir=tmp_path_factory.mktemp("figures"))
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, share=False)
    yield folder, f"http://127.0.0.1:{port}"
    app.close()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here: `apt-get install chromium` (.ci/run installs it)")
def test_the_leaderboard_in_a_real_browser(served, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra has it)")
    folder, url = served
    before = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector("#shovir-overview [role=gridcell]", timeout=60_000)
            page.screenshot(path=str(tmp_path / "leaderboard.png"))
            assert (tmp_path / "leaderboard.png").stat().st_size > 10_000

            def column(index: int) -> list[str]:
                return page.locator(f'#shovir-overview [role=gridcell][data-col="{index}"]').all_inner_texts()

            def settled(read, check, seconds: float = 20.0):
                """Poll the page until ``check(read())`` holds (events re-render the table asynchronously)."""
                for _ in range(int(seconds * 4)):
                    value = read()
                    if check(value):
                        return value
                    page.wait_for_timeout(250)
                raise AssertionError(f"the page never settled; last read {value!r}")

            assert sorted(column(0)) == MODELS  # the demo's three reference models

            headers = page.locator("#shovir-overview [role=columnheader]").all_inner_texts()
            fr_oco = [h.strip() for h in headers].index("FR OCO")
            page.locator("#shovir-sort input").click()
            page.get_by_role("option", name="FR OCO", exact=True).click()
            values = settled(lambda: [float(v) for v in column(fr_oco)], lambda v: v == sorted(v, reverse=True))
            descending = column(0)
            assert descending[0] == "reference-grounded" and len(set(values)) == 3  # it loses what OCO hides
            page.locator("#shovir-order").get_by_text("ascending").click()
            settled(lambda: [float(v) for v in column(fr_oco)], lambda v: v == sorted(v))
            assert column(0) == list(reversed(descending))

            bad = tmp_path / "results.json"
            bad.write_text(json.dumps({"schema_version": "2.0", "models": {"m": {"protocols": {"nope": {}}}}}))
            page.get_by_role("tab", name="Upload").click()
            page.locator("#upload-file input[type=file]").set_input_files(str(bad))
            page.wait_for_selector("#upload-message :text('Upload refused')", timeout=20_000)
            assert "unknown protocol 'nope'" in page.locator("#upload-message").inner_text()
        finally:
            browser.close()
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == before  # nothing was written

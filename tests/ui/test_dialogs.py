"""History browser, model manager, settings, and File > Export / Import."""

from __future__ import annotations

import json

import pytest

WAIT = 30000


def generate(qtbot, window):
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT) as blocker:
        window.takes.generate()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    return blocker.args[0]


def test_history_lists_compares_inserts_and_restores(qtbot, window, make_project):
    window.projects.open_project(make_project(docs=(("A", "Before."),)))
    window.takes.measure_baseline = False
    window.panel.creative.setChecked(True)
    first = generate(qtbot, window)
    second = generate(qtbot, window)
    dialog = window.tools.open_history()
    qtbot.addWidget(dialog)
    assert dialog.table.rowCount() == 2
    assert dialog.table.item(0, 0).text() == str(second["generation_id"])  # newest first
    assert dialog.table.item(0, 8).text() == "Creative"
    dialog.select_rows([1])
    assert "Sampling:" in dialog.details.text() and dialog.left.toPlainText() == first["text"]
    dialog.select_rows([0, 1])
    assert dialog.compare_selected() == (second["text"], first["text"])
    assert dialog.right.isVisible()
    dialog.select_rows([1])
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    dialog.insert_selected()
    assert window.editor.toPlainText().startswith(first["text"])
    dialog.select_rows([0])  # the document as it was before the second generation
    assert dialog.restore_selected()
    assert window.editor.toPlainText() == "Before." + first["text"]
    assert window.project.document(window.doc_id).text == "Before." + first["text"]


def test_model_manager_refuses_a_bad_folder_and_adds_a_good_one(qtbot, window, tmp_path):
    from swiftwriter.modelstore import registry

    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    default = registry.default_entry()
    assert dialog.table.item(0, 1).text() == default.id
    assert dialog.table.item(0, 3).text() == "present"  # the shipped drafter, read from its card
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    assert dialog.add_folder(str(empty), "broken") is None
    assert "Not added" in dialog.message.text() and "config.json" in dialog.message.text()
    (empty / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert dialog.add_folder(str(empty), "broken") is None
    assert "no weights" in dialog.message.text()
    assert dialog.add_folder("", "x") is None
    assert "broken" not in registry.load_registry()
    good = tmp_path / "good-model"
    window.loaded_model.model.save_pretrained(good)
    entry = dialog.add_folder(str(good), "tiny-good")
    assert entry is not None and entry.is_ready()
    assert "tiny-good" in registry.load_registry()
    assert any(
        dialog.table.item(r, 1).text() == "tiny-good" for r in range(dialog.table.rowCount())
    )
    dialog.device.setCurrentText("cpu")
    dialog.dtype.setCurrentText("float32")
    assert (window.settings.device, window.settings.dtype) == ("cpu", "float32")
    chosen = []
    dialog.use_model.connect(chosen.append)
    row = next(
        r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 1).text() == "tiny-good"
    )
    dialog.table.selectRow(row)
    dialog.use_selected()
    assert chosen == ["tiny-good"]


def test_the_model_manager_estimates_memory_per_device(qtbot, window, tmp_path):
    """The estimate follows the selected model, precision, context and placement; a spread
    that cannot hold the KV cache says what it needs; the limits are remembered."""
    from swiftwriter.modelstore import placement, registry

    tiny = tmp_path / "tiny-estimate"
    window.loaded_model.model.save_pretrained(tiny)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    assert dialog.add_folder(str(tiny), "tiny-estimate") is not None
    row = next(
        r for r in range(dialog.table.rowCount())
        if dialog.table.item(r, 1).text() == "tiny-estimate"
    )  # fmt: skip
    dialog.table.selectRow(row)
    dialog.device.setCurrentText("cpu")
    dialog.dtype.setCurrentText("float32")
    dialog.context.setValue(4096)
    config = window.loaded_model.model.config
    est = placement.estimate(config, "float32", 4096)
    text = dialog.estimate.text()
    assert "float32, 4,096 tokens of context, cpu" in text
    assert placement.fmt_bytes(est.kv["device"]) + " KV cache" in text
    assert placement.fmt_bytes(est.weights["device"]) + " weights" in text
    assert not dialog.max_memory.isEnabled()
    dialog.device.setCurrentText("spread")
    assert dialog.max_memory.isEnabled()
    dialog.max_memory.setText("cpu=1KiB")
    dialog.max_memory.editingFinished.emit()
    assert "cannot hold the KV cache of 4,096 tokens" in dialog.estimate.text()
    assert window.settings.max_memory == "cpu=1KiB"
    dialog.max_memory.setText("cpu=64MiB")
    dialog.max_memory.editingFinished.emit()
    assert "spread by accelerate" in dialog.estimate.text() and "cpu: " in dialog.estimate.text()
    registry.load_registry()  # the registry stays readable


def test_settings_are_remembered_in_the_test_settings_file(qtbot, tmp_path):
    from PySide6.QtGui import QFont
    from swiftwriter.ui.settings import AppSettings, SettingsDialog

    settings = AppSettings()
    assert str(tmp_path) in settings.qs.fileName()  # never the writer's real settings
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.theme.setCurrentText("Dark")
    dialog.font_box.setCurrentFont(QFont("Monospace"))
    dialog.font_size.setValue(15)
    dialog.autosave.setValue(7)
    dialog.preset.setCurrentText("Fast")
    dialog.accept()
    again = AppSettings()
    assert again.theme == "Dark" and again.autosave_s == 7 and again.default_preset == "Fast"
    assert again.editor_font.pointSize() == 15


def test_settings_apply_to_the_window(qtbot, window):
    window.settings.theme = "Dark"
    window.settings.autosave_s = 9
    window.tools.apply_settings()
    assert window.autosave_timer.interval() == 9000
    qtbot.waitUntil(lambda: window.palette().window().color().lightness() < 100)
    assert window.editor.generated_color.lightness() < 100
    window.settings.theme = "Light"
    window.tools.apply_settings()
    qtbot.waitUntil(lambda: window.palette().window().color().lightness() > 200)


def test_presets_and_modes_map_to_engine_settings(qtbot, window):
    from swiftwriter.engine.decoding.settings import DraftSettings

    panel = window.panel
    panel.preset.setCurrentText("Conservative")
    assert panel.drafting().max_nodes < DraftSettings().max_nodes
    panel.preset.setCurrentText("Fast")
    assert panel.drafting().max_nodes > DraftSettings().max_nodes
    assert panel.sampling().greedy
    panel.creative.setChecked(True)
    panel.temperature.setValue(0.7)
    panel.seed.setValue(42)
    sampling = panel.sampling()
    assert not sampling.greedy and sampling.temperature == pytest.approx(0.7)
    assert sampling.seed == 42


def test_export_and_import(qtbot, window, make_project, tmp_path):
    window.projects.open_project(make_project(docs=(("Chapter 1", "The sea was grey."),)))
    md, docx = tmp_path / "out.md", tmp_path / "out.docx"
    for out in (md, docx):  # one at a time: a second export waits for the first
        with qtbot.waitSignal(window.export_done, timeout=20000):
            assert window.exchange.export_to(out, out.suffix[1:])
    assert "The sea was grey." in md.read_text() and "Chapter 1" in md.read_text()
    assert docx.stat().st_size > 1000
    source = tmp_path / "more.md"
    source.write_text("# Chapter 2\n\nThe wall held.\n\n# Chapter 3\n\nThe tide turned.\n")
    with qtbot.waitSignal(window.import_done, timeout=10000) as done:
        assert window.exchange.import_from(source)
    assert done.args == [2]
    assert [d.title for d in window.project.documents()][-2:] == ["Chapter 2", "Chapter 3"]
    with qtbot.waitSignal(window.import_done, timeout=10000) as done:
        assert window.exchange.import_from(tmp_path / "missing.md")
    assert done.args == [0] and "No such file" in window.last_error
    bad = tmp_path / "broken.docx"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with qtbot.waitSignal(window.import_done, timeout=10000) as done:
        assert window.exchange.import_from(bad)
    assert done.args == [0] and "broken.docx" in window.last_error  # the writer is told


def test_model_manager_converts_with_progress(qtbot, window, monkeypatch, tmp_path):
    from swiftwriter.errors import UserError
    from swiftwriter.modelstore import auto_convert

    calls = []

    def fake_convert(entry, progress=None, force=False):
        for step in ("Reading the GGUF…", "Writing safetensors…"):
            progress(step)
            calls.append(step)
        if len(calls) > 2:
            raise UserError("disk full")
        return tmp_path / entry.id

    monkeypatch.setattr(auto_convert, "convert", fake_convert)
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    assert dialog.selected().default and not dialog.selected().is_ready()  # a fresh data folder
    assert dialog.convert_button.isEnabled()
    dialog.convert_selected()
    assert dialog.progress.isVisible() and not dialog.convert_button.isEnabled()
    dialog._thread.wait(10000)  # the worker is done before the GUI sees a single event:
    qtbot.waitUntil(lambda: dialog._thread is None, timeout=10000)  # nothing may be lost
    assert "Ready: converted into" in dialog.message.text()
    assert not dialog.progress.isVisible()
    dialog.convert_selected()
    qtbot.waitUntil(lambda: dialog._thread is None, timeout=10000)
    assert dialog.message.text() == "Conversion failed: disk full"


def test_the_models_dialog_offers_stored_weights_and_sizes_them_by_their_file(
    qtbot, tmp_path, monkeypatch
):
    """The guidance may say "Set Precision to stored" (auto loads a GGUF in float32 first to
    measure) and the CLI takes --dtype stored: the Precision list once lacked it, so a kept
    "stored" showed as auto, and the estimate had no bytes for it."""
    from swiftwriter import paths
    from swiftwriter.modelstore import registry
    from swiftwriter.ui.model_manager import ModelManagerDialog
    from swiftwriter.ui.settings import AppSettings
    from transformers import LlamaConfig

    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"\0" * 5000)
    entry = registry.ModelEntry(id="mine", name="mine", source="gguf", file=str(gguf), sha256="s")
    folder = paths.models_dir() / "mine"
    LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256).save_pretrained(folder)  # fmt: skip
    (folder / registry.MANIFEST).write_text(json.dumps({"gguf_sha256": "s", "dtype": "stored"}))
    settings = AppSettings()
    settings.dtype = "stored"
    dialog = ModelManagerDialog(settings)
    qtbot.addWidget(dialog)
    assert dialog.dtype.currentText() == "stored"
    monkeypatch.setattr(dialog, "selected", lambda: entry)
    dialog.device.setCurrentText("cpu")
    dialog.update_estimate()
    assert "4.9 KiB weights (the GGUF file)" in dialog.estimate.text()
    plain = registry.ModelEntry(id="plain", name="plain", source="folder", path=folder)
    monkeypatch.setattr(dialog, "selected", lambda: plain)  # no GGUF: once a ValueError
    dialog.update_estimate()
    assert "Only a GGUF model's weights run as stored" in dialog.estimate.text()

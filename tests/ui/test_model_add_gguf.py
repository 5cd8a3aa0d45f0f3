"""Models > Add with a GGUF file: converted in a worker thread with its steps shown, added to
the list when done; Cancel and a refused file leave nothing behind."""

from __future__ import annotations

import threading

from swiftwriter import paths
from swiftwriter.modelstore import gguf_file, registry

from tests.modelstore.tiny_gguf import write_gguf

WAIT = 120000


def _models() -> list[str]:
    folder = paths.models_dir()
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _finish(qtbot, dialog):
    adding = dialog.gguf_dialog
    assert adding is not None
    qtbot.addWidget(adding)
    if adding.running:
        with qtbot.waitSignal(adding.ended, timeout=WAIT):
            pass
    return adding


def test_models_add_converts_a_gguf_with_progress(qtbot, window, tmp_path):
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.dtype.setCurrentText("bfloat16")  # stored as the writer runs it (no measuring)
    path = write_gguf(tmp_path / "tiny.gguf", qtype="Q8_0")
    dialog.add_folder_edit.setText(str(path))
    dialog.add_name.setText("tiny-gguf")
    dialog.add_button.click()
    adding = _finish(qtbot, dialog)
    steps = adding.log.toPlainText()
    assert "on disk" in steps and "In memory: " in steps and "in bfloat16" in steps
    assert "Added tiny-gguf" in dialog.message.text() and "Added tiny-gguf" in steps
    entry = registry.load_registry()["tiny-gguf"]
    assert entry.is_ready() and entry.stored_dtype() == "bfloat16" and entry.context_length
    row = next(r for r in range(dialog.table.rowCount())
               if dialog.table.item(r, 1).text() == "tiny-gguf")  # fmt: skip
    assert dialog.table.item(row, 2).text() == "ready"
    assert _models() == ["tiny-gguf"]


def test_cancel_and_a_refused_file_leave_nothing(qtbot, window, tmp_path, monkeypatch):
    dialog = window.models.open_models()
    qtbot.addWidget(dialog)
    dialog.dtype.setCurrentText("float32")
    read, cancel_pressed = threading.Event(), threading.Event()
    inspect = gguf_file.inspect

    def held(path):  # the worker waits here until Cancel is pressed
        info = inspect(path)
        read.set()
        cancel_pressed.wait(30)
        return info

    monkeypatch.setattr(gguf_file, "inspect", held)
    dialog.add_folder(str(write_gguf(tmp_path / "c.gguf")), "cancel-me")
    assert read.wait(30)
    dialog.gguf_dialog.cancel()
    cancel_pressed.set()
    adding = _finish(qtbot, dialog)
    assert adding.outcome.startswith("Cancelled") and dialog.message.text() == adding.outcome
    assert _models() == [] and "cancel-me" not in registry.load_registry()

    monkeypatch.setattr(gguf_file, "inspect", inspect)
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    dialog.add_folder(str(notes), "notes")
    adding = _finish(qtbot, dialog)
    refusal = "notes.gguf is not a GGUF file (it does not start with 'GGUF')"
    assert adding.outcome == f"Not added: {refusal}"
    shown = adding.status.text() + "\n" + adding.log.toPlainText()
    assert shown.count(refusal) == 1  # it stood in the dialog twice (issue 63)
    assert _models() == [] and "notes" not in registry.load_registry()

"""A CPU model whose tree-attention kernel could not be built says why when it is ready (the
status bar), and says nothing about the kernel when it was built."""

from __future__ import annotations

from swiftwriter.engine.passes import native


def test_a_failed_kernel_build_is_said_when_the_model_is_ready(qtbot, tiny_words, monkeypatch):
    from swiftwriter.ui.main_window import MainWindow

    win = MainWindow(load_model=False)
    qtbot.addWidget(win)
    monkeypatch.setattr(native, "_loaded", {"error": "OSError: no C++ compiler: c++ not found"})
    win.models.set_model(tiny_words)
    shown = win.statusBar().currentMessage()
    assert shown.startswith("Model ready; tree-attention kernel unavailable (OSError: no C++")
    monkeypatch.setattr(native, "_loaded", {"module": object()})
    win.models.set_model(tiny_words)
    assert win.statusBar().currentMessage() == "Model ready"

"""The window stays within its screen (issue 63): a measured sentence in the Speed dock (auto's
choice of precision, measured on a busy machine) took a 1280-pixel window to 1475 pixels on a
1400-pixel screen, focus mode with the find bar open to 1995, and the window could not be made
narrower again; the cramped layout came back at the next start. Labels that carry such
sentences wrap (or, in the status bar, are cut short with the whole text in a tooltip), the
find bar folds onto more lines, and a kept layout is fitted to the screen.

The offscreen screen these tests run on is 800 pixels wide: a stricter bound than the issue's."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from tests.ui.desk import generate, open_doc

# What auto's measurement says on a busy machine, as the Speed dock's Precision line shows it.
BUSY = (
    "auto: measured 23.1 ms vs bfloat16 36.2 ms per token, now, not remembered: other "
    "processes took 62% of the CPUs; auto's remembered choice is measured again at the next "
    "load: a take ran float32 at 20.1 ms per token, remembered 36.0 ms"
)


def settle(qtbot) -> None:
    QApplication.processEvents()
    qtbot.wait(20)  # layouts activate and the window takes its new minimum


def assert_within_screen(window) -> None:
    room = window.screen().availableGeometry().width()
    assert window.width() <= room
    assert window.minimumSizeHint().width() <= room and window.minimumWidth() <= room


def test_a_measured_sentence_never_widens_the_window_past_its_screen(
    qtbot, window, make_project, monkeypatch
):
    monkeypatch.setattr(window.loaded_model, "dtype_why", BUSY)  # what the take reports
    open_doc(window, make_project)
    window.takes.measure_baseline = False
    settle(qtbot)
    assert_within_screen(window)
    width = window.width()
    generate(qtbot, window)
    settle(qtbot)
    precision = window.stats_dock.labels["precision"]
    assert "other processes took 62% of the CPUs" in precision.text()
    assert_within_screen(window)
    assert window.width() == width
    assert precision.height() >= precision.heightForWidth(precision.width())  # all of it shown

    window.focus.enter()
    window.find_bar.open()
    settle(qtbot)
    assert_within_screen(window)
    window.focus.leave()  # the docks come back beside the open find bar
    settle(qtbot)
    assert_within_screen(window)

    whole = "Tiny test model with a very long name " * 8
    window.model_label.setText(whole)  # the status bar: cut short, the whole in its tooltip
    settle(qtbot)
    assert_within_screen(window)
    assert window.model_label.text() == whole and window.model_label.toolTip() == whole


def test_a_layout_kept_from_a_grown_window_is_fitted_at_the_next_start(qtbot, window, make_project):
    from swiftwriter.ui.main_window import MainWindow

    path = open_doc(window, make_project)
    room = window.screen().availableGeometry().width()
    body = window.stats_dock.widget()
    body.setMinimumWidth(room + 300)  # as wide as the unwrapped sentence made the dock
    settle(qtbot)
    assert window.width() > room
    body.setMinimumWidth(0)
    window.projects.close_project()
    window.settings.save_layout(window)  # what closing the window keeps

    again = MainWindow(load_model=False)
    qtbot.addWidget(again)
    again.ask = lambda title, text: True
    again.show()
    settle(qtbot)
    assert_within_screen(again)
    assert again.projects.open_project(path)
    settle(qtbot)
    assert_within_screen(again)
    assert again.stack.width() >= again.width() / 3  # the editor, not a dock, has the room
    again.projects.close_project()

"""Generation settings stick with the project (across a restart of the app) and as named
presets (saved, renamed, deleted; the shipped ones stay)."""

from __future__ import annotations

import pytest
from swiftwriter.ui.panel_state import SHIPPED, Presets, apply_state, state_of

WAIT = 30000


def test_panel_settings_survive_a_restart_with_the_project(qtbot, window, make_project, tiny_words):
    from swiftwriter.ui.main_window import MainWindow

    path = make_project()
    assert window.projects.open_project(path)
    panel = window.panel
    panel.set_target(1234, "words")
    panel.creative.setChecked(True)
    panel.temperature.setValue(0.65)
    panel.min_p.setValue(0.12)
    panel.dry.setValue(0.6)
    panel.keep_writing.setChecked(False)
    panel.keep_writing.clicked.emit()
    panel.story_mode.setCurrentText("The previous document")
    panel.set_stop_sequences(["THE END"])
    window.takes.measure_baseline = False
    with qtbot.waitSignal(window.takes.finished, timeout=WAIT):
        window.actions_by_name["generate"].trigger()
    qtbot.waitUntil(lambda: not window.takes.busy, timeout=WAIT)
    saved = state_of(panel)
    assert window.projects.close_project()
    window.close()

    again = MainWindow(load_model=False)  # a new start of the app
    qtbot.addWidget(again)
    again.ask = lambda title, text: True
    assert again.panel.length.value() != 1234
    assert again.projects.open_project(path)
    assert state_of(again.panel) == saved
    assert again.panel.sampling().dry_multiplier == pytest.approx(0.6)
    assert again.panel.stop_sequences() == ["THE END"]
    again.projects.close_project()


def test_presets_save_rename_delete_and_keep_the_shipped_ones(qtbot, window):
    window.panel.set_target(777, "tokens")
    window.panel.penalty.setValue(1.35)
    window.ask_text = lambda title, label, text="": "My thriller"
    window.presets.save_dialog()
    assert "My thriller" in window.presets.stored.names()
    window.panel.set_target(10, "tokens")
    applied = window.presets.apply("My thriller")
    assert window.panel.length.value() == 777 and window.panel.penalty.value() == pytest.approx(
        1.35
    )
    assert "length" in applied
    window.ask_text = lambda title, label, text="": "Night thriller"
    window.presets.rename_dialog("My thriller")
    assert (
        "Night thriller" in window.presets.stored.names()
        and "My thriller" not in window.presets.stored.names()
    )
    window.presets.delete("Night thriller")
    assert "Night thriller" not in window.presets.stored.names()
    for name in SHIPPED:
        assert name in window.presets.stored.names()
        with pytest.raises(ValueError):
            window.presets.stored.delete(name)
    window.presets.fill()  # the menu builds
    assert window.presets.menu.actions()


def test_bad_stored_settings_are_skipped(qtbot, window):
    applied = apply_state(window.panel, {"length": "many", "unit": "pages", "penalty": 1.1,
                                         "keep_writing": "yes", "stops": [1, 2]})  # fmt: skip
    assert applied == ["penalty"]
    presets = Presets(window.settings.qs)
    window.settings.qs.setValue(Presets.KEY, "{not json")
    assert presets.names() == list(SHIPPED)


def test_a_fresh_panel_samples_with_the_measured_default(qtbot):
    """Greedy text loops over long takes with this model (Distinct-4 0.51 over 7,819 tokens);
    the default samples (temperature 0.8, top-p 0.95, min-p 0.05, penalty 1.1 over 1,024 with
    DRY 0.8: readable over long takes where penalty 1.2 alone turned to word salad), see the
    README's long-form figures."""
    from swiftwriter.ui.main_window import MainWindow
    from swiftwriter.ui.take_panel import TakePanel

    window = MainWindow(load_model=False)
    qtbot.addWidget(window)
    sampling = window.panel.sampling()
    assert isinstance(window.panel, TakePanel) and not sampling.greedy
    assert (sampling.temperature, sampling.top_p, sampling.min_p) == pytest.approx(
        (0.8, 0.95, 0.05)
    )
    assert (sampling.penalty, sampling.window) == (pytest.approx(1.1), 1024)
    assert sampling.dry_multiplier == pytest.approx(0.8)
    window.presets.apply("Precise prose")
    assert window.panel.sampling().greedy and window.panel.sampling().dry_multiplier == 0.0
    assert window.panel.sampling().penalty == pytest.approx(1.2)


def test_preferences_live_in_the_one_config_folder_and_old_ones_move_once(tmp_path, monkeypatch):
    """An earlier version's Qt per-organisation file (another folder, `SwiftWriter`) is moved
    into `settings.ini` in the config folder once (the old file kept beside it as a backup);
    later starts read only the new file; a moved config folder never takes the old file."""
    from PySide6.QtCore import QSettings, QStandardPaths
    from swiftwriter import paths
    from swiftwriter.ui import settings as settings_mod

    old_root, new_dir = tmp_path / "old-config", tmp_path / "swiftwriter"
    new_dir.mkdir()
    monkeypatch.delenv("SWIFTWRITER_SETTINGS_PATH")
    formats = (QSettings.Format.NativeFormat, QSettings.Format.IniFormat)
    default = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    for scope_format in formats:
        QSettings.setPath(scope_format, QSettings.Scope.UserScope, str(old_root))
    try:
        old = QSettings(settings_mod.ORGANISATION, settings_mod.APPLICATION)
        old.setValue("appearance/theme", "Dark")
        old.sync()
        del old
        assert (old_root / "SwiftWriter").exists()

        monkeypatch.setenv("SWIFTWRITER_CONFIG_DIR", str(tmp_path / "elsewhere"))
        assert settings_mod.AppSettings().theme == "Auto"  # a moved folder: nothing taken
        assert (old_root / "SwiftWriter").exists()

        monkeypatch.delenv("SWIFTWRITER_CONFIG_DIR")
        monkeypatch.setattr(paths, "config_dir", lambda: new_dir)
        moved = settings_mod.AppSettings()
        assert moved.theme == "Dark"
        assert moved.qs.fileName() == str(new_dir / "settings.ini")
        assert not (old_root / "SwiftWriter").exists()  # one config folder left
        assert "Dark" in (new_dir / "settings-before-move.conf").read_text()  # the old file kept
        moved.theme = "Light"
        moved.qs.sync()
        assert settings_mod.AppSettings().theme == "Light"  # no second migration
    finally:
        for scope_format in formats:
            QSettings.setPath(scope_format, QSettings.Scope.UserScope, default)

"""The app's preferences (QSettings), the Settings dialog and the light/dark themes.

One place reads and writes every preference: an INI file in the one config folder
(`paths.config_dir()`, beside the model registry and the logs' settings), so tests can point it
at a temporary file (SWIFTWRITER_SETTINGS_PATH) and never touch the writer's real settings.
Earlier versions kept preferences in Qt's own per-organisation file; they move over once."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFontComboBox,
    QFormLayout,
    QSpinBox,
)

from swiftwriter import paths
from swiftwriter.spelling import LANGUAGES

ORGANISATION = "SwiftWriter"
APPLICATION = "SwiftWriter"
THEMES = ("Auto", "Light", "Dark")
PRESETS = ("Conservative", "Balanced", "Fast")
MAX_RECENT = 8
SETTINGS_FILE = "settings.ini"


def migrate_old_settings(target: str) -> bool:
    """Move the preferences an earlier version kept in Qt's per-organisation file (a second
    folder, `SwiftWriter`, beside `swiftwriter`) into `target`, once. The old file is kept, as
    `settings-before-move.conf` beside `target`, and only after the new one is written; the
    old folder goes when nothing else is left in it."""
    old = QSettings(ORGANISATION, APPLICATION)
    keys = old.allKeys()
    if not keys:
        return False
    new = QSettings(target, QSettings.Format.IniFormat)
    for key in keys:
        new.setValue(key, old.value(key))
    new.sync()
    if new.status() != QSettings.Status.NoError:
        return False
    old_file = Path(old.fileName())
    del old
    if old_file.is_file():
        old_file.replace(Path(target).with_name("settings-before-move.conf"))
    if old_file.parent.is_dir() and not any(old_file.parent.iterdir()):
        old_file.parent.rmdir()
    return True


class AppSettings:
    """Typed access to the preferences; values survive restarts."""

    def __init__(self, path: str | None = None):
        path = path or os.environ.get("SWIFTWRITER_SETTINGS_PATH")
        if not path:
            path = str(paths.config_dir() / SETTINGS_FILE)
            # a moved config folder (tests, portable installs) never takes the real old file
            if not Path(path).exists() and not os.environ.get("SWIFTWRITER_CONFIG_DIR"):
                migrate_old_settings(path)
        self.qs = QSettings(str(path), QSettings.Format.IniFormat)

    def _get(self, key: str, default, kind=str):
        value = self.qs.value(key, default)
        try:
            if kind is bool:
                return value in (True, "true", "1", 1)
            return kind(value)
        except (TypeError, ValueError):
            return default

    @property
    def theme(self) -> str:
        value = self._get("appearance/theme", "Auto")
        return value if value in THEMES else "Auto"

    @theme.setter
    def theme(self, value: str) -> None:
        self.qs.setValue("appearance/theme", value)

    @property
    def editor_font(self) -> QFont:
        font, saved = QFont(), self._get("editor/font", "")
        if not saved or not font.fromString(saved):
            font = QFont("Serif")
            font.setPointSize(12)
        return font

    @editor_font.setter
    def editor_font(self, font: QFont) -> None:
        self.qs.setValue("editor/font", font.toString())

    @property
    def autosave_s(self) -> int:
        return max(1, min(600, self._get("editor/autosave_s", 3, int)))

    @autosave_s.setter
    def autosave_s(self, seconds: int) -> None:
        self.qs.setValue("editor/autosave_s", int(seconds))

    @property
    def spelling(self) -> bool:
        return self._get("spelling/on", True, bool)

    @spelling.setter
    def spelling(self, on: bool) -> None:
        self.qs.setValue("spelling/on", bool(on))

    @property
    def spelling_language(self) -> str:

        value = self._get("spelling/language", "en")
        return value if value in LANGUAGES else "en"

    @spelling_language.setter
    def spelling_language(self, language: str) -> None:
        self.qs.setValue("spelling/language", language)

    @property
    def typewriter(self) -> bool:
        """Typewriter scrolling: the cursor's line stays in the middle of the editor."""
        return self._get("editor/typewriter", False, bool)

    @typewriter.setter
    def typewriter(self, on: bool) -> None:
        self.qs.setValue("editor/typewriter", bool(on))

    @property
    def default_preset(self) -> str:
        value = self._get("generation/preset", "Balanced")
        return value if value in PRESETS else "Balanced"

    @default_preset.setter
    def default_preset(self, value: str) -> None:
        self.qs.setValue("generation/preset", value)

    @property
    def device(self) -> str:
        return self._get("model/device", "auto")

    @device.setter
    def device(self, value: str) -> None:
        self.qs.setValue("model/device", value)

    @property
    def dtype(self) -> str:
        return self._get("model/dtype", "auto")

    @dtype.setter
    def dtype(self, value: str) -> None:
        self.qs.setValue("model/dtype", value)

    @property
    def max_memory(self) -> str:
        """With device "spread": accelerate's limits, e.g. "cuda:0=20GiB,cpu=64GiB"."""
        return self._get("model/max_memory", "")

    @max_memory.setter
    def max_memory(self, value: str) -> None:
        self.qs.setValue("model/max_memory", value)

    @property
    def model(self) -> str:
        return self._get("model/id", "")

    @model.setter
    def model(self, value: str) -> None:
        self.qs.setValue("model/id", value)

    # -- recent projects --------------------------------------------------------------------
    def recent_projects(self) -> list[str]:
        value = self.qs.value("projects/recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or []) if Path(str(v)).exists()]

    def add_recent(self, path) -> None:
        path = str(Path(path).resolve())
        recent = [p for p in self.recent_projects() if p != path]
        self.qs.setValue("projects/recent", [path, *recent][:MAX_RECENT])

    # -- window layout ----------------------------------------------------------------------
    def save_layout(self, window) -> None:
        self.qs.setValue("window/geometry", window.saveGeometry())
        self.qs.setValue("window/state", window.saveState())

    def restore_layout(self, window) -> bool:
        """True when a saved layout of the docks was put back."""
        geometry = self.qs.value("window/geometry")
        state = self.qs.value("window/state")
        if geometry is not None:
            window.restoreGeometry(geometry)
        return state is not None and bool(window.restoreState(state))

    def sync(self) -> None:
        self.qs.sync()


def _palette(dark: bool) -> QPalette:
    """Calm, low-contrast palettes: paper white or warm charcoal, one quiet accent."""
    p = QPalette()
    if dark:
        colors = {
            QPalette.ColorRole.Window: "#25272b",
            QPalette.ColorRole.WindowText: "#dcdcdc",
            QPalette.ColorRole.Base: "#1e1f22",
            QPalette.ColorRole.AlternateBase: "#2b2d31",
            QPalette.ColorRole.Text: "#e2e2e2",
            QPalette.ColorRole.Button: "#303236",
            QPalette.ColorRole.ButtonText: "#dcdcdc",
            QPalette.ColorRole.Highlight: "#4a6d8c",
            QPalette.ColorRole.HighlightedText: "#ffffff",
            QPalette.ColorRole.ToolTipBase: "#303236",
            QPalette.ColorRole.ToolTipText: "#e2e2e2",
            QPalette.ColorRole.PlaceholderText: "#8a8a8a",
        }
    else:
        colors = {
            QPalette.ColorRole.Window: "#f3f2ef",
            QPalette.ColorRole.WindowText: "#2b2b2b",
            QPalette.ColorRole.Base: "#fdfcfa",
            QPalette.ColorRole.AlternateBase: "#f0eee9",
            QPalette.ColorRole.Text: "#222222",
            QPalette.ColorRole.Button: "#ebe9e4",
            QPalette.ColorRole.ButtonText: "#2b2b2b",
            QPalette.ColorRole.Highlight: "#9fc1de",
            QPalette.ColorRole.HighlightedText: "#111111",
            QPalette.ColorRole.ToolTipBase: "#fffbe6",
            QPalette.ColorRole.ToolTipText: "#222222",
            QPalette.ColorRole.PlaceholderText: "#9a9a9a",
        }
    for role, color in colors.items():
        p.setColor(role, QColor(color))
    return p


def is_dark(theme: str) -> bool:
    if theme == "Dark":
        return True
    if theme == "Light":
        return False
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(theme: str) -> None:
    """Auto follows the system's light or dark scheme; Light and Dark force one."""
    app = QApplication.instance()
    if app is None:
        return
    app.setStyle("Fusion")
    app.setPalette(_palette(is_dark(theme)))


class SettingsDialog(QDialog):
    """Theme, editor font, autosave interval and the default strategy preset."""

    def __init__(self, settings: AppSettings, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.settings = settings
        form = QFormLayout(self)
        self.theme = QComboBox()
        self.theme.addItems(THEMES)
        self.theme.setCurrentText(settings.theme)
        self.font_box = QFontComboBox()
        self.font_box.setCurrentFont(settings.editor_font)
        self.font_size = QSpinBox()
        self.font_size.setRange(8, 36)
        self.font_size.setValue(max(8, settings.editor_font.pointSize()))
        self.autosave = QSpinBox()
        self.autosave.setRange(1, 600)
        self.autosave.setSuffix(" s idle")
        self.autosave.setValue(settings.autosave_s)
        self.preset = QComboBox()
        self.preset.addItems(PRESETS)
        self.preset.setCurrentText(settings.default_preset)

        self.language = QComboBox()
        self.language.addItems(LANGUAGES)
        self.language.setCurrentText(settings.spelling_language)
        form.addRow("Theme", self.theme)
        form.addRow("Editor font", self.font_box)
        form.addRow("Font size", self.font_size)
        form.addRow("Autosave after", self.autosave)
        form.addRow("Default strategy", self.preset)
        form.addRow("Spelling language", self.language)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def accept(self) -> None:
        font = self.font_box.currentFont()
        font.setPointSize(self.font_size.value())
        self.settings.theme = self.theme.currentText()
        self.settings.editor_font = font
        self.settings.autosave_s = self.autosave.value()
        self.settings.default_preset = self.preset.currentText()
        self.settings.spelling_language = self.language.currentText()
        self.settings.sync()
        super().accept()

"""Generation settings that stick: the panel's state as plain data, kept per project (in the
project file, so it travels with the book) and as named presets (in the app's settings; the
shipped presets are always there and cannot be deleted)."""

from __future__ import annotations

import json
import math

from PySide6.QtCore import QObject

from swiftwriter.application import MODES
from swiftwriter.ui.take_panel import CONTEXT_POLICIES, PRESETS, STORY_LABELS, UNITS

_P, _C = MODES["precise"], MODES["creative"]

SHIPPED = {
    "Precise prose": {
        "mode": "precise",
        "penalty": _P.penalty,
        "window": _P.window,
        "dry": _P.dry_multiplier,
    },
    "Creative draft": {
        "mode": "creative",
        "temperature": _C.temperature,
        "top_p": _C.top_p,
        "min_p": _C.min_p,
        "penalty": _C.penalty,
        "window": _C.window,
        "dry": _C.dry_multiplier,
    },  # fmt: skip
    "Long chapter": {"length": 3000, "unit": "words", "keep_writing": True, "story": "fit"},
}
PROJECT_KEY = "generation_settings"


def state_of(panel) -> dict:
    """Everything the writer set in the panel (not the direction: it belongs to one take)."""
    return {
        "length": panel.length.value(),
        "unit": panel.unit.currentText(),
        "strategy": panel.preset.currentText(),
        "mode": "precise" if panel.precise.isChecked() else "creative",
        "temperature": panel.temperature.value(),
        "top_k": panel.top_k.value(),
        "top_p": panel.top_p.value(),
        "min_p": panel.min_p.value(),
        "penalty": panel.penalty.value(),
        "window": panel.window.value(),
        "dry": panel.dry.value(),
        "seed": panel.seed.value(),
        "keep_writing": panel.keep_writing.isChecked(),
        "keep_writing_by_hand": panel.keep_writing_by_hand,
        "stops": panel.stop_sequences(),
        "story": panel.story()[1],
        "context_policy": panel.context_policy.currentText(),
        "history": panel.history.isChecked(),
        "story_only": panel.story_only.isChecked(),
    }


def apply_state(panel, state: dict) -> list[str]:
    """Set the panel from `state` (from a project or a preset); keys missing or of the wrong
    kind are skipped, never an error. Returns the keys applied."""
    applied = []

    def number(key, widget, kind):
        value = state.get(key)  # a hostile file may hold 1e300, NaN or -10**30: clamp or skip
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            widget.setValue(kind(min(max(value, widget.minimum()), widget.maximum())))
            applied.append(key)

    def choice(key, widget, allowed):
        value = state.get(key)
        if value in allowed:
            widget.setCurrentText(value)
            applied.append(key)

    number("length", panel.length, int)
    choice("unit", panel.unit, UNITS)
    choice("strategy", panel.preset, PRESETS)
    if state.get("mode") in ("precise", "creative"):
        (panel.precise if state["mode"] == "precise" else panel.creative).setChecked(True)
        applied.append("mode")
    for key, kind in (("temperature", float), ("top_p", float), ("min_p", float),
                      ("penalty", float), ("dry", float), ("top_k", int), ("window", int),
                      ("seed", int)):  # fmt: skip
        number(key, getattr(panel, key), kind)
    if isinstance(state.get("keep_writing"), bool):
        # Only a choice saved as made by hand sticks; a value the length chose (and every value
        # kept before this flag, read as by hand, which left a 500-word take off) follows the
        # length again
        by_hand = state.get("keep_writing_by_hand") is True
        panel.set_keep_writing(state["keep_writing"], by_hand)
        applied.append("keep_writing")
    if isinstance(state.get("stops"), list) and all(isinstance(s, str) for s in state["stops"]):
        panel.set_stop_sequences(state["stops"])
        applied.append("stops")
    labels = {mode: label for label, mode in STORY_LABELS.items()}
    if state.get("story") in labels:
        panel.story_mode.setCurrentText(labels[state["story"]])
        applied.append("story")
    choice("context_policy", panel.context_policy, CONTEXT_POLICIES)
    for key, box in (("history", panel.history), ("story_only", panel.story_only)):
        if isinstance(state.get(key), bool):
            box.setChecked(state[key])
            applied.append(key)
    return applied


def load_project_state(project) -> dict:
    try:
        state = json.loads(project.meta.get(PROJECT_KEY, "") or "{}")
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def save_project_state(project, state: dict) -> None:
    text = json.dumps(state, sort_keys=True)
    if not project.readonly and project.meta.get(PROJECT_KEY) != text:
        project.update_meta(**{PROJECT_KEY: text})


class Presets:
    """Named presets: the shipped ones, then the writer's own (kept in the app's settings)."""

    KEY = "generation/presets"

    def __init__(self, qsettings):
        self.qs = qsettings

    def _own(self) -> dict:
        try:
            own = json.loads(self.qs.value(self.KEY, "{}") or "{}")
        except (TypeError, ValueError):
            return {}
        return (
            {k: v for k, v in own.items() if isinstance(v, dict)} if isinstance(own, dict) else {}
        )

    def names(self) -> list[str]:
        return list(SHIPPED) + [n for n in self._own() if n not in SHIPPED]

    def get(self, name: str) -> dict:
        return dict(SHIPPED.get(name) or self._own().get(name) or {})

    def save(self, name: str, state: dict) -> None:
        name = name.strip()
        if not name or name in SHIPPED:
            raise ValueError(f"'{name}' is a shipped preset or empty: choose another name")
        own = self._own()
        own[name] = state
        self._write(own)

    def rename(self, old: str, new: str) -> None:
        own = self._own()
        new = new.strip()
        if old not in own or not new or new in SHIPPED or new in own:
            raise ValueError(f"Cannot rename '{old}' to '{new}'")
        own = {new if k == old else k: v for k, v in own.items()}
        self._write(own)

    def delete(self, name: str) -> None:
        if name in SHIPPED:
            raise ValueError(f"'{name}' is shipped with SwiftWriter and stays")
        own = self._own()
        own.pop(name, None)
        self._write(own)

    def _write(self, own: dict) -> None:
        self.qs.setValue(self.KEY, json.dumps(own, sort_keys=True))
        self.qs.sync()


class PresetController(QObject):
    """Generate > Presets: apply, save the current settings as, rename, delete. The window's
    controller for its presets (`stored`: the presets kept); asks through the window."""

    def __init__(self, window, presets: Presets):
        super().__init__(window)
        self.window = window
        self.stored = presets
        self.menu = None

    def attach(self, menu) -> None:
        """The Presets menu, filled each time it opens."""
        self.menu = menu
        menu.aboutToShow.connect(self.fill)

    def fill(self) -> None:
        menu = self.menu
        menu.clear()
        for name in self.stored.names():
            menu.addAction(name, lambda n=name: self.apply(n))
        menu.addSeparator()
        menu.addAction("Save current settings as…", self.save_dialog)
        own = [n for n in self.stored.names() if n not in SHIPPED]
        for label, slot in (("Rename", self.rename_dialog), ("Delete", self.delete)):
            sub = menu.addMenu(label)
            sub.setEnabled(bool(own))
            for name in own:
                sub.addAction(name, lambda n=name, f=slot: f(n))

    def apply(self, name: str) -> list[str]:
        applied = apply_state(self.window.panel, self.stored.get(name))
        self.window.statusBar().showMessage(f"Preset “{name}” applied", 5000)
        return applied

    def save_dialog(self) -> None:
        name = self.window.ask_text("Save preset", "Name of the new preset:")
        if name:
            try:
                self.stored.save(name, state_of(self.window.panel))
            except ValueError as exc:
                self.window.show_error("Cannot save the preset", str(exc))

    def rename_dialog(self, old: str) -> None:
        new = self.window.ask_text("Rename preset", f"New name for “{old}”:", old)
        if new and new != old:
            try:
                self.stored.rename(old, new)
            except ValueError as exc:
                self.window.show_error("Cannot rename the preset", str(exc))

    def delete(self, name: str) -> None:
        if self.window.ask("Delete preset", f"Delete the preset “{name}”?"):
            self.stored.delete(name)

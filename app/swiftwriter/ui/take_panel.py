"""The generation panel: how much to write and how, in the writer's terms.

Presets hide the drafting knobs (Conservative drafts small tries, Fast large ones; the output
is the same text either way, only the speed differs). Precise is greedy decoding, Creative
samples; the advanced box exposes the sampler itself."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from swiftwriter import application
from swiftwriter.application import DEFAULT_SAMPLER, MODES, STRATEGIES
from swiftwriter.ui.settings import PRESETS

PRESET_DRAFTING = {name.capitalize(): drafting for name, drafting in STRATEGIES.items()}
CREATIVE = MODES["creative"]
UNITS = ("words", "tokens")
# Creative's two ways of checking drafts (engine settings.SAMPLERS)
SAMPLER_LABELS = {"Fastest": "fastest", "Same text per seed": "same-text"}
CONTEXT_POLICIES = {"Stop": "stop", "Slide window": "slide"}


STORY_LABELS = {"None": "none", "The previous document": "previous", "As many as fit": "fit"}
LONG_TAKE_WORDS = 500  # from this length on, a take keeps writing to the full length by default


def drafting_for(preset: str) -> application.DraftSettings:
    return PRESET_DRAFTING.get(preset, PRESET_DRAFTING["Balanced"])


# the window's actions the panel shows as buttons, two to a row
PANEL_ACTIONS = ("generate", "stop", "continue", "regenerate", "three_takes", "undo")


class TakePanel(QWidget):
    settings_changed = Signal()
    take_chosen = Signal(int)  # index into the takes of the last spot

    def __init__(self, actions: dict, default_preset: str = "Balanced", parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        form = self._build_length()
        self._build_mode(form, default_preset)
        layout.addLayout(form)
        self._build_advanced(layout)
        self._build_buttons(layout, actions)
        self._connect_changes()

    def _build_length(self) -> QFormLayout:
        """Length, keep writing, direction (and the advanced box's earlier-text choice)."""
        form = QFormLayout()
        length_row = QHBoxLayout()
        self.length = QSpinBox()
        self.length.setRange(1, 100_000)
        self.length.setSingleStep(100)
        self.length.setValue(300)
        self.length.setGroupSeparatorShown(True)
        self.unit = QComboBox()
        self.unit.addItems(UNITS)
        length_row.addWidget(self.length, 1)
        length_row.addWidget(self.unit)
        form.addRow("Length", length_row)
        self.keep_writing = QCheckBox("Keep writing to the full length")
        self.keep_writing.setToolTip(
            "The model may not end the text before the length is reached; the take then stops "
            "at the next sentence end. On by default for long takes"
        )
        self._keep_set_by_hand = False
        self.keep_writing.clicked.connect(lambda: setattr(self, "_keep_set_by_hand", True))
        self.length.valueChanged.connect(self._default_keep_writing)
        self.unit.currentTextChanged.connect(self._default_keep_writing)
        form.addRow("", self.keep_writing)
        self.direction = QLineEdit()
        self.direction.setPlaceholderText("What happens next (optional)")
        self.direction.setClearButtonEnabled(True)
        self.direction.setToolTip(
            "A direction for this take: given to the model through its chat template, or as an "
            "author's note just above the end of the text"
        )
        form.addRow("Direction", self.direction)
        self.story_mode = QComboBox()  # in the advanced box: set once per project
        self.story_mode.addItems(list(STORY_LABELS))
        self.story_mode.setCurrentText("As many as fit")
        self.story_mode.setToolTip(
            "How much of the earlier documents (in the project's order) the model sees; a "
            "document's synopsis stands in for its text where it has one"
        )
        return form

    def _build_mode(self, form: QFormLayout, default_preset: str) -> None:
        """Strategy, mode and sampler rows."""
        self.preset = QComboBox()
        self.preset.addItems(PRESETS)
        self.preset.setCurrentText(default_preset)
        self.preset.setToolTip("How boldly to draft: the text is the same, only the speed differs")
        form.addRow("Strategy", self.preset)
        mode_row = QHBoxLayout()
        self.precise = QRadioButton("Precise")
        self.precise.setToolTip("Greedy: always the model's most likely next word")
        self.creative = QRadioButton("Creative")
        self.creative.setToolTip("Sampling: varied text, different on each take")
        self.creative.setChecked(True)  # measured: greedy loops over long takes (README)
        group = QButtonGroup(self)
        group.addButton(self.precise)
        group.addButton(self.creative)
        mode_row.addWidget(self.precise)
        mode_row.addWidget(self.creative)
        mode_row.addStretch(1)
        form.addRow("Mode", mode_row)
        self.sampler = QComboBox()
        self.sampler.addItems(list(SAMPLER_LABELS))
        self.sampler.setCurrentText(
            next(label for label, name in SAMPLER_LABELS.items() if name == DEFAULT_SAMPLER)
        )
        self.sampler.setToolTip(
            "Creative only. Fastest: more drafts accepted (rejection sampling), the model's own "
            "distribution, but another text than plain decoding's for a seed. Same text per "
            "seed: a seed writes exactly plain decoding's text"
        )
        form.addRow("Sampler", self.sampler)

    def _build_advanced(self, layout: QVBoxLayout) -> None:
        """The advanced sampler's box, shown on demand."""
        self.advanced = QCheckBox("Advanced sampler")
        self.advanced.setChecked(False)
        self._advanced_body = QWidget()
        adv = QFormLayout(self._advanced_body)
        adv.setContentsMargins(0, 0, 0, 0)
        self.penalty = self._double(
            0.5, 3.0, CREATIVE.penalty, 0.05, "Repetition penalty (1 = off)"
        )
        self.window = QSpinBox()
        self.window.setRange(1, 32_768)
        self.window.setValue(CREATIVE.window)
        self.dry = self._double(
            0.0, 5.0, CREATIVE.dry_multiplier, 0.1,
            "DRY: punishes only a word that would continue a passage already written (0 = off)",
        )  # fmt: skip
        self.temperature = self._double(0.05, 3.0, CREATIVE.temperature, 0.05, "Creative only")
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_k.setSpecialValueText("off")
        self.top_p = self._double(0.01, 1.0, CREATIVE.top_p, 0.01, "Creative only")
        self.min_p = self._double(0.0, 0.99, CREATIVE.min_p, 0.01, "Creative only")
        self.seed = QSpinBox()
        self.seed.setRange(-1, 2_000_000_000)
        self.seed.setValue(-1)
        self.seed.setSpecialValueText("random")
        self.stops = QLineEdit()
        self.stops.setPlaceholderText("e.g. THE END | re:^Chapter [0-9]+")
        self.stops.setToolTip(
            "This project's stop sequences, separated by |: a take ends once it writes one "
            "('re:' starts a regular expression)"
        )
        self.history = QCheckBox("Draft from the project's earlier text")
        self.history.setChecked(True)
        self.story_only = QCheckBox("Keep to the story")
        self.story_only.setToolTip(
            "Never write the marks only an assistant's chatter uses (headings' #, bold's **, "
            "code fences, chat markers) nor letters in scripts your text does not use (the "
            "take stays exact: plain decoding bans them too)"
        )
        self.context_policy = QComboBox()
        self.context_policy.addItems(CONTEXT_POLICIES)
        self.context_policy.setToolTip(
            "Stop: end the take when the model's context is full. Slide window: keep the pinned "
            "notes and the most recent text in view and write on (exact for that window)"
        )
        for label, widget in (
            ("Penalty", self.penalty),
            ("Penalty window", self.window),
            ("Against loops (DRY)", self.dry),
            ("Temperature", self.temperature),
            ("Top-k", self.top_k),
            ("Top-p", self.top_p),
            ("Min-p", self.min_p),
            ("Seed", self.seed),
            ("At the context limit", self.context_policy),
            ("Stop at", self.stops),
            ("Earlier text", self.story_mode),
        ):
            adv.addRow(label, widget)
        adv.addRow(self.history)
        adv.addRow(self.story_only)
        self.advanced.toggled.connect(self._show_advanced)
        self._show_advanced(False)
        layout.addWidget(self.advanced)
        layout.addWidget(self._advanced_body)

    def _build_buttons(self, layout: QVBoxLayout, actions: dict) -> None:
        """The window's actions as buttons, two to a row, and the takes box."""
        grid = QGridLayout()
        for i, name in enumerate(PANEL_ACTIONS):
            button = QToolButton()
            button.setDefaultAction(actions[name])
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
            grid.addWidget(button, i // 2, i % 2)
        layout.addLayout(grid)

        takes_row = QHBoxLayout()
        takes_row.addWidget(QLabel("Takes"))
        self.takes = QComboBox()
        self.takes.setToolTip("Earlier takes of this spot: choose one to put it back")
        self.takes.setEnabled(False)
        takes_row.addWidget(self.takes, 1)
        layout.addLayout(takes_row)
        self.takes.activated.connect(self.take_chosen.emit)
        layout.addStretch(1)

    def _connect_changes(self) -> None:
        """Any setting the writer changes says so (`settings_changed`: they stick per project)."""
        for w in (self.length, self.window, self.top_k, self.seed):
            w.valueChanged.connect(lambda *_: self.settings_changed.emit())
        for w in (self.penalty, self.dry, self.temperature, self.top_p, self.min_p):
            w.valueChanged.connect(lambda *_: self.settings_changed.emit())
        self.unit.currentIndexChanged.connect(lambda *_: self.settings_changed.emit())
        self.preset.currentIndexChanged.connect(lambda *_: self.settings_changed.emit())
        self.context_policy.currentIndexChanged.connect(lambda *_: self.settings_changed.emit())
        self.precise.toggled.connect(lambda *_: self.settings_changed.emit())
        self.precise.toggled.connect(lambda on: self.sampler.setEnabled(not on))
        self.sampler.currentIndexChanged.connect(lambda *_: self.settings_changed.emit())

    @staticmethod
    def _double(low, high, value, step, tip) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(low, high)
        box.setDecimals(2)
        box.setSingleStep(step)
        box.setValue(value)
        box.setToolTip(tip)
        return box

    def _default_keep_writing(self) -> None:
        """Long takes keep writing by default (a short one may end where the model ends it);
        a choice made by hand sticks."""
        if not self._keep_set_by_hand:
            words = self.length.value() * (1 if self.unit.currentText() == "words" else 0.75)
            self.keep_writing.setChecked(words >= LONG_TAKE_WORDS)

    @property
    def keep_writing_by_hand(self) -> bool:
        return self._keep_set_by_hand

    def set_keep_writing(self, on: bool, by_hand: bool) -> None:
        """A kept setting: a choice made by hand sticks; otherwise the length decides."""
        self._keep_set_by_hand = by_hand
        if by_hand:
            self.keep_writing.setChecked(on)
        else:
            self._default_keep_writing()

    def story(self) -> tuple[str, str]:
        """(direction, story mode) for the next take."""
        return self.direction.text().strip(), STORY_LABELS[self.story_mode.currentText()]

    def stop_sequences(self) -> list[str]:
        return [part.strip() for part in self.stops.text().split("|") if part.strip()]

    def set_stop_sequences(self, stops: list[str]) -> None:
        self.stops.setText(" | ".join(stops))

    def _show_advanced(self, on: bool) -> None:
        self._advanced_body.setVisible(on)

    # -- what the worker needs --------------------------------------------------------------
    def sampling(self) -> application.SamplingSettings:
        seed = self.seed.value()
        return application.SamplingSettings(
            greedy=self.precise.isChecked(),
            penalty=self.penalty.value(),
            window=self.window.value(),
            temperature=self.temperature.value(),
            top_k=self.top_k.value(),
            top_p=self.top_p.value(),
            min_p=self.min_p.value(),
            seed=None if seed < 0 else seed,
            dry_multiplier=self.dry.value(),
        )

    def drafting(self) -> application.DraftSettings:
        sampler = SAMPLER_LABELS[self.sampler.currentText()]
        return replace(drafting_for(self.preset.currentText()), sampler=sampler)

    def context(self) -> application.ContextSettings:
        return application.ContextSettings(
            policy=CONTEXT_POLICIES[self.context_policy.currentText()]
        )

    def target(self) -> tuple[int, str]:
        return self.length.value(), self.unit.currentText()

    def set_target(self, n: int, unit: str = "tokens") -> None:
        self.length.setValue(n)
        self.unit.setCurrentText(unit)

    def use_history(self) -> bool:
        return self.history.isChecked()

    def set_takes(self, labels: list[str], current: int) -> None:
        self.takes.clear()
        self.takes.addItems(labels)
        self.takes.setCurrentIndex(current)
        self.takes.setEnabled(len(labels) > 1)

"""The model manager: which models are known and ready, converting the shipped default model,
what the built-in model is for and which size of model to add here (modelstore/guidance.py),
adding a local Hugging Face folder (validated before it is registered) or a GGUF file
(converted in a worker thread with progress and Cancel: ui/gguf_dialog.py), the drafting heads'
state (present, missing or mismatched; trained here or shipped) with training them, and the
device and dtype to load on (auto by default) or accelerate's spread over GPUs, CPU and disk
within memory limits, with an estimate of what the selected model and its KV cache need.

Everything here goes through swiftwriter.modelstore, the same code as `swiftwriter models`, so
the app and the command line never disagree about a model."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from swiftwriter import application
from swiftwriter.application import ModelEntry, drafter_dirs
from swiftwriter.errors import UserError
from swiftwriter.ui.gguf_dialog import AddGgufDialog
from swiftwriter.ui.heads_training import TrainHeadsDialog, fmt_top1, heads_folder
from swiftwriter.ui.model_worker import start_converter

DEVICES = ("auto", "cpu", "cuda", "mps", "spread")
ESTIMATE_CONTEXT = 8192  # tokens of context the estimate starts at
DTYPES = ("auto", "stored", "float32", "bfloat16", "float16")  # as the CLI's --dtype
COLUMNS = ("Model", "Id", "Status", "Drafting heads", "Heads", "Where")
# engine.decoding.drafter_files' names, repeated here so that listing models never imports torch
# (a test checks they agree)
CARD, WEIGHTS, FORMAT = "card.json", "drafter.safetensors", "swiftwriter-drafter/1"


@dataclass
class HeadsInfo:
    """A model's drafter as the loader would find it (the first folder holding a card)."""

    state: str  # "present", "missing" or "mismatched"
    where: str = ""  # "trained here" or "shipped"
    folder: Path | None = None
    kind: str = ""
    top1: list = field(default_factory=list)  # held-out top-1 per head, from the card
    why: str = ""

    def detail(self) -> str:
        if self.state == "missing":
            return "none yet (Train heads… makes some)"
        if self.state == "mismatched":
            return f"{self.where}, not usable: {self.why}"
        top1 = fmt_top1({"top1": self.top1})
        return f"{self.where} · {self.kind}" + (f" · top-1 {top1}" if top1 else "")


def _model_config(entry: ModelEntry) -> dict:
    try:
        config = json.loads((entry.folder() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, AssertionError):
        return {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return {**text, **{k: v for k, v in config.items() if k != "text_config"}}


def heads_info(entry: ModelEntry, loaded=None) -> HeadsInfo:
    """Read the drafter's card (cheap, no torch); when `loaded` is this model, check the drafter
    against it the way generation will (engine.decoding.drafter_files.load)."""
    for folder in drafter_dirs(entry):
        if not (folder / CARD).is_file():
            continue
        where = "trained here" if folder == heads_folder(entry.id) else "shipped"
        try:
            card = json.loads((folder / CARD).read_text(encoding="utf-8"))
            if not isinstance(card, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            return HeadsInfo("mismatched", where, folder, why=f"unreadable card ({exc})")
        info = HeadsInfo("present", where, folder, kind=str(card.get("kind", "")),
                         top1=list((card.get("validation") or {}).get("top1") or []))  # fmt: skip
        problems = []
        if card.get("format") != FORMAT:
            problems.append(f"not a {FORMAT} card")
        if not (folder / WEIGHTS).is_file():
            problems.append(f"{WEIGHTS} is missing")
        if not problems and loaded is not None and loaded.entry.id == entry.id:
            try:
                application.check_drafter(folder, loaded.model)
            except UserError as exc:
                problems.append(str(exc))
        elif not problems:
            config = _model_config(entry)
            for key, name in (("hidden_size", "hidden size"), ("vocab_size", "vocabulary")):
                if key in card and key in config and card[key] != config[key]:
                    problems.append(f"{name} {card[key]} vs the model's {config[key]}")
        if problems:
            info.state, info.why = "mismatched", "; ".join(problems)
        return info
    return HeadsInfo("missing")


def heads_state(entry: ModelEntry, loaded=None) -> str:
    """'present', 'missing' or 'mismatched' (trained for another model, or unreadable)."""
    return heads_info(entry, loaded).state


class ModelManagerDialog(QDialog):
    use_model = Signal(str)
    drafter_trained = Signal(str)  # a model id: its new drafter is in the data folder
    model_busy = Signal(bool)  # heads are training on the app's loaded model

    def __init__(self, settings, current: str | None = None, parent=None, loaded=None,
                 generation_busy=None):  # fmt: skip
        super().__init__(parent)
        self.loaded = loaded  # the app's LoadedModel (its drafter is checked against it)
        self.generation_busy = generation_busy
        self.trainer: TrainHeadsDialog | None = None
        self.setWindowTitle("Models")
        self.resize(820, 560)
        self.settings = settings
        self.current = current
        self.entries: list[ModelEntry] = []
        self._thread = None
        self._converter = None
        self.gguf_dialog = None  # the GGUF being added (ui/gguf_dialog.py)
        self._build_table()
        buttons = self._build_buttons()
        self._build_messages(current)
        add = self._build_add_form()
        load = self._build_load_form(settings)
        self._lay_out(buttons, add, load)
        self.reload()
        self._save_load_settings()

    def _build_table(self) -> None:
        """The registered models, one row each, selected one at a time."""
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._update_buttons)

    def _build_buttons(self) -> QHBoxLayout:
        """Convert, Train heads… and Use this model, for the selected row."""
        self.convert_button = QPushButton("Convert")
        self.convert_button.setToolTip("Turn the shipped model into a loadable folder (once)")
        self.train_button = QPushButton("Train heads…")
        self.train_button.setEnabled(False)
        self.train_button.setToolTip("Train drafting heads for this model (it stays frozen)")
        self.train_button.clicked.connect(self.train_selected)
        self.use_button = QPushButton("Use this model")
        self.convert_button.clicked.connect(self.convert_selected)
        self.use_button.clicked.connect(self.use_selected)
        row = QHBoxLayout()
        for b in (self.convert_button, self.train_button, self.use_button):
            row.addWidget(b)
        row.addStretch(1)
        return row

    def _build_messages(self, current: str | None) -> None:
        """The converter's progress, a message line, and advice on choosing and adding models."""
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # the converter reports steps, not a percentage
        self.progress.hide()
        self.message = QLabel("")
        self.message.setWordWrap(True)
        advice = application.advice_for_this_machine(current)
        self.guidance = QLabel(advice.choosing_text())
        self.guidance.setWordWrap(True)
        self.adding = QLabel(advice.adding_text())
        self.adding.setWordWrap(True)
        self.adding.setVisible(bool(advice.adding_text()))

    def _build_add_form(self) -> QFormLayout:
        """Name and folder (or GGUF file) of a model to add."""
        add = QFormLayout()
        self.add_name = QLineEdit(placeholderText="my-model")
        self.add_folder_edit = QLineEdit(
            placeholderText="/path/to/hugging-face-folder or model.gguf"
        )
        browse = QPushButton("Folder…")
        browse.clicked.connect(self._browse)
        browse_file = QPushButton("GGUF file…")
        browse_file.clicked.connect(self._browse_gguf)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.add_folder_edit, 1)
        folder_row.addWidget(browse)
        folder_row.addWidget(browse_file)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(
            lambda: self.add_folder(self.add_folder_edit.text(), self.add_name.text())
        )
        add.addRow("Name", self.add_name)
        add.addRow("Folder or GGUF", folder_row)
        add.addRow("", self.add_button)
        return add

    def _build_load_form(self, settings) -> QFormLayout:
        """Device, precision and memory limits (saved as they change), and the memory estimate."""
        load = QFormLayout()
        self.device = QComboBox()
        self.device.addItems(DEVICES)
        self.device.setCurrentText(settings.device if settings.device in DEVICES else "auto")
        self.dtype = QComboBox()
        self.dtype.addItems(DTYPES)
        self.dtype.setCurrentText(settings.dtype if settings.dtype in DTYPES else "auto")
        self.max_memory = QLineEdit(settings.max_memory)
        self.max_memory.setPlaceholderText("cuda:0=20GiB,cpu=64GiB (the rest goes to disk)")
        self.context = QSpinBox()
        self.context.setRange(256, 1 << 20)
        self.context.setSingleStep(1024)
        self.context.setValue(ESTIMATE_CONTEXT)
        self.context.setSuffix(" tokens")
        self.estimate = QLabel("")
        self.estimate.setWordWrap(True)
        self.device.currentTextChanged.connect(self._save_load_settings)
        self.dtype.currentTextChanged.connect(self._save_load_settings)
        self.max_memory.editingFinished.connect(self._save_load_settings)
        self.context.valueChanged.connect(self.update_estimate)
        self.table.itemSelectionChanged.connect(self.update_estimate)
        load.addRow("Device", self.device)
        load.addRow("Precision", self.dtype)
        load.addRow("Memory limits", self.max_memory)
        load.addRow("Context", self.context)
        load.addRow("Needs", self.estimate)
        return load

    def _lay_out(self, buttons: QHBoxLayout, add: QFormLayout, load: QFormLayout) -> None:
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.message)
        layout.addWidget(QLabel("<b>Which model</b>"))
        layout.addWidget(self.guidance)
        layout.addSpacing(6)
        layout.addWidget(
            QLabel(
                "<b>Add a model</b>: a Hugging Face folder, or a GGUF file "
                "(converted once into the models folder)"
            )
        )
        layout.addWidget(self.adding)
        layout.addLayout(add)
        layout.addWidget(QLabel("<b>Loading</b> (auto measures what is fastest here)"))
        layout.addLayout(load)

    # -- the list ---------------------------------------------------------------------------
    def reload(self) -> None:
        try:
            self.entries = sorted(
                application.load_registry().values(), key=lambda e: (not e.default, e.name.lower())
            )
        except UserError as exc:
            self.entries = []
            self.message.setText(str(exc))
        self.table.setRowCount(len(self.entries))
        for row, entry in enumerate(self.entries):
            name = entry.name + (" (default)" if entry.default else "")
            if entry.id == self.current:
                name += " · in use"
            heads = heads_info(entry, self.loaded)
            values = (
                name,
                entry.id,
                entry.status(),
                heads.state,
                heads.detail(),
                str(entry.folder()),
            )
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col in (3, 4) and heads.folder is not None:
                    item.setToolTip(f"{heads.detail()}\n{heads.folder}")
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        if self.entries and not self.table.selectedIndexes():
            self.table.selectRow(0)
        self._update_buttons()

    def selected(self) -> ModelEntry | None:
        rows = {i.row() for i in self.table.selectedIndexes()}
        return self.entries[min(rows)] if rows else None

    def _update_buttons(self) -> None:
        entry = self.selected()
        converting = self._thread is not None
        self.convert_button.setEnabled(
            entry is not None and entry.source in ("pypi-gguf", "gguf")
            and not entry.is_ready() and not converting
        )  # fmt: skip
        self.use_button.setEnabled(entry is not None and not converting)
        training = self.trainer is not None and self.trainer.running
        self.train_button.setEnabled(
            entry is not None and entry.is_ready() and not converting and not training
        )

    # -- actions ----------------------------------------------------------------------------
    def add_folder(self, folder: str, name: str = "") -> ModelEntry | None:
        """Validate and register a folder; an unusable one is refused with the reason. A GGUF
        file is converted in the background instead (`add_gguf`): None here."""
        folder = (folder or "").strip()
        if not folder:
            self.message.setText("Choose a Hugging Face model folder or a GGUF file.")
            return None
        path = Path(folder).expanduser()
        if application.is_gguf_path(path):
            self.add_gguf(path, (name or "").strip() or path.stem)
            return None
        model_id = (name or "").strip() or path.name
        try:
            application.validate_folder(path)
            entry = application.add_user_model(model_id, path)
        except UserError as exc:
            self.message.setText(f"Not added: {exc}")
            return None
        except OSError as exc:
            self.message.setText(f"Not added: {exc}")
            return None
        self.message.setText(f"Added {entry.id}: choose it and press “Use this model”.")
        self.reload()
        return entry

    def convert_selected(self) -> None:
        entry = self.selected()
        if entry is None or self._thread is not None:
            return
        self.progress.show()
        self.message.setText(f"Converting {entry.name}…")
        self._thread, self._converter = start_converter(
            self, entry.id, progress=self.message.setText, done=self._on_converted,
            failed=self._on_convert_failed, finished=self._on_thread_done)  # fmt: skip
        self._update_buttons()

    def _on_converted(self, folder: str) -> None:
        self.message.setText(f"Ready: converted into {folder}")

    def _on_convert_failed(self, message: str) -> None:
        self.message.setText(f"Conversion failed: {message}")

    def _on_thread_done(self) -> None:
        self._thread, self._converter = None, None
        self.progress.hide()
        self.reload()

    def train_selected(self) -> TrainHeadsDialog | None:
        """Open the training dialog for the selected (ready) model."""
        entry = self.selected()
        if entry is None or not entry.is_ready():
            return None
        if self.trainer is not None:
            if self.trainer.running:
                self.trainer.raise_()
                return self.trainer
            self.trainer.close()
            self.trainer.deleteLater()
        self.trainer = TrainHeadsDialog(entry, self.loaded, self.settings.device,
                                        self.generation_busy, self)  # fmt: skip
        self.trainer.trained.connect(self._on_trained)
        self.trainer.model_busy.connect(self.model_busy.emit)
        self.trainer.running_changed.connect(lambda _running: self._update_buttons())
        self.trainer.show()
        return self.trainer

    def _on_trained(self, model_id: str) -> None:
        self.drafter_trained.emit(model_id)  # the app reloads its drafter first
        self.reload()

    def use_selected(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        if not entry.is_ready() and entry.source not in ("pypi-gguf", "gguf"):
            self.message.setText(f"{entry.name} is not usable: {entry.status()}")
            return
        self.use_model.emit(entry.id)
        self.message.setText(f"Loading {entry.name}…")

    def add_gguf(self, path: Path, model_id: str):
        """Convert and register a GGUF file in a worker thread, in a dialog of its own with
        each step and Cancel; the list reloads when it ends."""
        if self.gguf_dialog is not None and self.gguf_dialog.running:
            self.gguf_dialog.raise_()
            return self.gguf_dialog

        dialog = AddGgufDialog(model_id, path, self.settings.dtype or "auto", self)
        dialog.ended.connect(lambda: self._gguf_ended(dialog))
        self.gguf_dialog = dialog
        self.message.setText(f"Adding {path.name} as {model_id}…")
        dialog.show()
        return dialog

    def _gguf_ended(self, dialog) -> None:
        self.message.setText(dialog.outcome)
        self.reload()

    def _browse_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "GGUF model file", "", "GGUF (*.gguf)")
        if path:
            self.add_folder_edit.setText(path)
            if not self.add_name.text():
                self.add_name.setText(Path(path).stem)

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Hugging Face model folder")
        if folder:
            self.add_folder_edit.setText(folder)
            if not self.add_name.text():
                self.add_name.setText(Path(folder).name)

    def _save_load_settings(self) -> None:
        self.settings.device = self.device.currentText()
        self.settings.dtype = self.dtype.currentText()
        self.settings.max_memory = self.max_memory.text().strip()
        self.max_memory.setEnabled(self.device.currentText() == "spread")
        self.update_estimate()

    def update_estimate(self) -> None:
        """What the selected model needs here: weights and the KV cache at the context asked
        for, per device when spread (modelstore.placement)."""
        entry = self.selected()
        if entry is None or not entry.is_ready():
            self.estimate.setText("– (select a model that is ready)")
            return
        device = self.device.currentText()
        device = "cpu" if device == "auto" else device
        dtype = self.dtype.currentText()
        self.estimate.setText(
            application.placement_estimate(entry, device, dtype, self.context.value(),
                                           self.max_memory.text().strip())
        )  # fmt: skip

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self.trainer is not None:
            self.trainer.close()  # a running training stops between two steps, progress kept
        if self._thread is not None:
            self._thread.wait(120000)  # a conversion is never cut in half
        if self.gguf_dialog is not None:
            self.gguf_dialog.close()  # a GGUF being added stops at its next step, nothing kept
        super().closeEvent(event)

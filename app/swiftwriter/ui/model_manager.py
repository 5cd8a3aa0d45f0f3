"""The model manager: which models are known and ready, converting the shipped default model,
adding a local Hugging Face folder (validated before it is registered), the drafting heads'
state, and the device and dtype to load on (auto by default).

Everything here goes through swiftwriter.modelstore, the same code as `swiftwriter models`, so
the app and the command line never disagree about a model."""

from __future__ import annotations

import json
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
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from swiftwriter.errors import UserError
from swiftwriter.modelstore import registry
from swiftwriter.modelstore.registry import ModelEntry
from swiftwriter.ui.model_worker import start_converter

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
COLUMNS = ("Model", "Id", "Status", "Drafting heads", "Where")


def heads_state(entry: ModelEntry) -> str:
    """'present', 'missing', 'mismatched' (trained for another model) or 'none'."""
    folder = entry.heads_dir()
    if folder is None:
        return "none"
    if not folder.is_dir() or not any(folder.iterdir()):
        return "missing"
    meta = folder / "config.json"
    model_config = entry.folder() / "config.json"
    if meta.is_file() and model_config.is_file():
        try:
            heads, model = json.loads(meta.read_text()), json.loads(model_config.read_text())
        except ValueError:
            return "mismatched"
        for key in ("hidden_size", "vocab_size"):
            if key in heads and key in model and heads[key] != model[key]:
                return "mismatched"
    return "present"


class ModelManagerDialog(QDialog):
    use_model = Signal(str)

    def __init__(self, settings, current: str | None = None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Models")
        self.resize(820, 460)
        self.settings = settings
        self.current = current
        self.entries: list[ModelEntry] = []
        self._thread = None
        self._converter = None
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._update_buttons)

        self.convert_button = QPushButton("Convert")
        self.convert_button.setToolTip("Turn the shipped model into a loadable folder (once)")
        self.train_button = QPushButton("Train heads…")
        self.train_button.setEnabled(False)
        self.train_button.setToolTip("Head training comes with the drafting-heads engine")
        self.use_button = QPushButton("Use this model")
        self.convert_button.clicked.connect(self.convert_selected)
        self.use_button.clicked.connect(self.use_selected)
        row = QHBoxLayout()
        for b in (self.convert_button, self.train_button, self.use_button):
            row.addWidget(b)
        row.addStretch(1)

        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # the converter reports steps, not a percentage
        self.progress.hide()
        self.message = QLabel("")
        self.message.setWordWrap(True)

        add = QFormLayout()
        self.add_name = QLineEdit(placeholderText="my-model")
        self.add_folder_edit = QLineEdit(placeholderText="/path/to/hugging-face-folder")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.add_folder_edit, 1)
        folder_row.addWidget(browse)
        self.add_button = QPushButton("Add folder")
        self.add_button.clicked.connect(
            lambda: self.add_folder(self.add_folder_edit.text(), self.add_name.text())
        )
        add.addRow("Name", self.add_name)
        add.addRow("Folder", folder_row)
        add.addRow("", self.add_button)

        load = QFormLayout()
        self.device = QComboBox()
        self.device.addItems(DEVICES)
        self.device.setCurrentText(settings.device if settings.device in DEVICES else "auto")
        self.dtype = QComboBox()
        self.dtype.addItems(DTYPES)
        self.dtype.setCurrentText(settings.dtype if settings.dtype in DTYPES else "auto")
        self.device.currentTextChanged.connect(self._save_load_settings)
        self.dtype.currentTextChanged.connect(self._save_load_settings)
        load.addRow("Device", self.device)
        load.addRow("Precision", self.dtype)

        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addLayout(row)
        layout.addWidget(self.progress)
        layout.addWidget(self.message)
        layout.addWidget(QLabel("<b>Add a local Hugging Face model</b>"))
        layout.addLayout(add)
        layout.addWidget(QLabel("<b>Loading</b> (auto measures what is fastest here)"))
        layout.addLayout(load)
        self.reload()

    # -- the list ---------------------------------------------------------------------------
    def reload(self) -> None:
        try:
            self.entries = sorted(
                registry.load_registry().values(), key=lambda e: (not e.default, e.name.lower())
            )
        except UserError as exc:
            self.entries = []
            self.message.setText(str(exc))
        self.table.setRowCount(len(self.entries))
        for row, entry in enumerate(self.entries):
            name = entry.name + (" (default)" if entry.default else "")
            if entry.id == self.current:
                name += " · in use"
            values = (
                name,
                entry.id,
                entry.status(),
                heads_state(entry),
                str(entry.folder()),
            )
            for col, value in enumerate(values):
                self.table.setItem(row, col, QTableWidgetItem(value))
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
            entry is not None and entry.source == "pypi-gguf" and not entry.is_ready()
            and not converting
        )  # fmt: skip
        self.use_button.setEnabled(entry is not None and not converting)

    # -- actions ----------------------------------------------------------------------------
    def add_folder(self, folder: str, name: str = "") -> ModelEntry | None:
        """Validate and register a folder; an unusable one is refused with the reason."""
        folder = (folder or "").strip()
        if not folder:
            self.message.setText("Choose a folder that holds a Hugging Face model.")
            return None
        path = Path(folder).expanduser()
        model_id = (name or "").strip() or path.name
        try:
            registry.validate_folder(path)
            entry = registry.add_user_model(model_id, path)
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
        self._thread, self._converter = start_converter(self, entry.id)
        self._converter.progress.connect(self.message.setText)
        self._converter.done.connect(self._on_converted)
        self._converter.failed.connect(self._on_convert_failed)
        self._thread.finished.connect(self._on_thread_done)
        self._update_buttons()

    def _on_converted(self, folder: str) -> None:
        self.message.setText(f"Ready: converted into {folder}")

    def _on_convert_failed(self, message: str) -> None:
        self.message.setText(f"Conversion failed: {message}")

    def _on_thread_done(self) -> None:
        self._thread, self._converter = None, None
        self.progress.hide()
        self.reload()

    def use_selected(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        if not entry.is_ready() and entry.source != "pypi-gguf":
            self.message.setText(f"{entry.name} is not usable: {entry.status()}")
            return
        self.use_model.emit(entry.id)
        self.message.setText(f"Loading {entry.name}…")

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Hugging Face model folder")
        if folder:
            self.add_folder_edit.setText(folder)
            if not self.add_name.text():
                self.add_name.setText(Path(folder).name)

    def _save_load_settings(self) -> None:
        self.settings.device = self.device.currentText()
        self.settings.dtype = self.dtype.currentText()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self._thread is not None:
            self._thread.wait(120000)  # a conversion is never cut in half
        super().closeEvent(event)

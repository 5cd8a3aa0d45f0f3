"""The main window: welcome screen or the writing desk (project tree, editor, notes, generation
panel, speed dock) and its menus. The window builds the desk and holds one controller per job,
each with its own state: the project's life (projects.py), never losing text (safekeeping.py),
takes (takes.py), presets (panel_state.py), files in and out (exchange.py), the model
(models.py) and the tool windows (tools.py). The questions it asks the writer (`ask`, `choose`,
`ask_text`, `ask_save_path`) stay here, so a test replaces them in one place.

Safety rules: the editor's text is saved a few seconds after the writer stops typing, before
every generation, when another document is chosen and on close; interrupted generations are
offered for recovery on open; a project open in another SwiftWriter opens read-only and the
window says so; closing while a generation runs asks first."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from swiftwriter import logs
from swiftwriter.errors import UserError
from swiftwriter.store import Project, ProjectError
from swiftwriter.store.search import find_in_documents, utf16_offset
from swiftwriter.ui import help as help_windows
from swiftwriter.ui.context_dialog import ContextDialog, MemoryDialog, SynopsisDialog, next_take
from swiftwriter.ui.editor import Editor, FindBar
from swiftwriter.ui.exchange import ExportImport
from swiftwriter.ui.fitting import EDITOR_SHARE, ElidedLabel, fit_to_screen, scrolled
from swiftwriter.ui.focus import FocusMode
from swiftwriter.ui.models import ModelController
from swiftwriter.ui.notes import NotesPanel
from swiftwriter.ui.outline import OutlineDialog
from swiftwriter.ui.panel_state import (
    PresetController,
    Presets,
)
from swiftwriter.ui.project_search import ProjectSearchDialog
from swiftwriter.ui.project_tree import ProjectTree
from swiftwriter.ui.projects import ProjectController
from swiftwriter.ui.safekeeping import Safekeeping
from swiftwriter.ui.selection_tools import SelectionTools
from swiftwriter.ui.settings import AppSettings, apply_theme, is_dark
from swiftwriter.ui.spelling_control import SpellingControl
from swiftwriter.ui.stats_dock import StatsDock
from swiftwriter.ui.take_panel import TakePanel
from swiftwriter.ui.takes import TakeController
from swiftwriter.ui.tools import ToolWindows
from swiftwriter.ui.welcome import WelcomePage
from swiftwriter.ui.wordcount import TargetsDialog, WordCounter
from swiftwriter.writing.history import Histories

IGNORED = QSizePolicy.Policy.Ignored


class MainWindow(QMainWindow):
    model_ready = Signal(object)
    model_failed = Signal(str)
    project_opened = Signal(object)
    import_done = Signal(int)  # documents added by an import (0: failed or cancelled)
    export_done = Signal(str)  # the file an export wrote ("": failed or cancelled)

    def __init__(
        self,
        model: str | None = None,
        load_model: bool = True,
        project: str | Path | None = None,
        settings: AppSettings | None = None,
    ):
        super().__init__()
        self.setWindowTitle("SwiftWriter")
        self.resize(1280, 820)
        self.settings = settings or AppSettings()
        apply_theme(self.settings.theme)
        self.project: Project | None = None
        self.doc_id: int | None = None
        self.loaded_model = None
        self.model_training = False  # heads train on the loaded model: generation waits
        self.last_error = ""
        self.location_warning = ""  # the open project sits in a synced or network folder
        self.loading_doc = False
        self.histories: Histories | None = None  # the open project's drafting histories
        self._last_deleted: int | None = None
        self._layout_kept = False  # the docks' sizes came from the last session
        self._desk_laid_out = False
        self.open_dialogs: list = []  # open tool windows: closed (and their threads waited) with us
        self.takes = TakeController(self)
        self.projects = ProjectController(self)
        self.models = ModelController(self)
        self.tools = ToolWindows(self)
        self.exchange = ExportImport(self)
        self.safekeeping = Safekeeping(self)
        self.selection = SelectionTools(self)
        self.presets = PresetController(self, Presets(self.settings.qs))
        self._build_actions()
        self._build_ui()
        self.focus = FocusMode(self)
        self.focus.set_typewriter(self.settings.typewriter)
        self.spelling = SpellingControl(self)
        self.spelling.apply()
        self._build_menus()
        self._layout_kept = self.settings.restore_layout(self)
        fit_to_screen(self)  # a window kept from a larger screen, or one that outgrew this one
        self.update_actions()
        if project:
            self.projects.open_project(project)
        if load_model:
            self.models.load_model(model or self.settings.model or None)

    # -- building ---------------------------------------------------------------------------
    def _action(self, name: str, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcuts(shortcut if isinstance(shortcut, list) else [shortcut])
        action.setToolTip(tip or text)
        action.triggered.connect(lambda _checked=False: slot())
        self.actions_by_name[name] = action
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        self.actions_by_name: dict[str, QAction] = {}
        a = self._action
        g = self.takes
        a("generate", "Generate", g.generate,
          [QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")],
          "Write from the cursor (Ctrl+Enter)")  # fmt: skip
        a("stop", "Stop", g.stop, QKeySequence(Qt.Key.Key_Escape), "Stop the generation (Esc)")
        a("continue", "Continue", g.continue_, QKeySequence("Ctrl+Shift+Return"),
          "Write on from the end of the document")  # fmt: skip
        # Ctrl+R and Ctrl+E align text in every word processor: not ours to take
        a("regenerate", "Regenerate", g.regenerate, QKeySequence("Ctrl+Alt+Return"),
          "Another take at the same spot; the previous one is kept")  # fmt: skip
        a("three_takes", "Write 3 takes", g.write_takes, QKeySequence("Ctrl+Alt+3"),
          "Three takes at the cursor written together; swap them in the takes box")  # fmt: skip
        a("undo", "Undo generation", g.undo_generation, QKeySequence("Ctrl+Alt+Z"),
          "Remove the last generated text (one step)")  # fmt: skip
        a("new", "New project…", self.projects.new_project, QKeySequence.StandardKey.New)
        a("open", "Open project…", self.projects.open_project_dialog, QKeySequence.StandardKey.Open)
        a("sample", "Open sample project", self.projects.open_sample)
        a("close_project", "Close project", self.projects.close_project)
        a("backups", "Backups…", self.safekeeping.open_backups)
        a(
            "save",
            "Save",
            lambda: self.safekeeping.save_now(force=True),
            QKeySequence.StandardKey.Save,
        )
        a("import", "Import…", self.exchange.import_dialog)
        a("export", "Export…", self.exchange.export_dialog, QKeySequence("Ctrl+Shift+X"))
        a("quit", "Quit", self.close, QKeySequence.StandardKey.Quit)
        a("bold", "Bold", lambda: self._emphasis("**"),
          QKeySequence.StandardKey.Bold, "Bold: **text** (Ctrl+B)")  # fmt: skip
        a("italic", "Italic", lambda: self._emphasis("*"),
          QKeySequence.StandardKey.Italic, "Italic: *text* (Ctrl+I)")  # fmt: skip
        a("find", "Find…", self._open_find, QKeySequence.StandardKey.Find)
        a("replace", "Replace…", lambda: self._open_find(replace=True), QKeySequence("Ctrl+H"))
        a("find_next", "Find next", lambda: self._find_again(False), QKeySequence("F3"))
        a("find_previous", "Find previous", lambda: self._find_again(True),
          QKeySequence("Shift+F3"))  # fmt: skip
        a("search_project", "Find in project…", self.search_project, QKeySequence("Ctrl+Shift+F"))
        a("undo_delete", "Undo delete", self.undo_delete)
        a("history", "History…", self.tools.open_history, QKeySequence("Ctrl+Shift+H"))
        a("show_context", "Show context…", self.show_context,
          tip="What the model is given for the next take, part by part")  # fmt: skip
        a("memory", "Project memory…", self.edit_memory)
        a("lorebook", "Lorebook…", self.tools.open_lorebook, QKeySequence("Ctrl+Shift+L"),
          "Entries the prompt takes in when their keys appear, and the author's note")  # fmt: skip
        a("models", "Models…", self.models.open_models)
        a("targets", "Word targets…", lambda: self.project and TargetsDialog(self).open())
        a("settings", "Settings…", self.tools.open_settings, QKeySequence.StandardKey.Preferences)
        a("outline", "Outline", self.open_outline, QKeySequence("Ctrl+Shift+O"))
        a("focus", "Focus mode", lambda: self.focus.toggle(), QKeySequence("F8"))
        a("fullscreen", "Full screen", lambda: self.focus.toggle_fullscreen(), QKeySequence("F11"))
        a("typewriter", "Typewriter scrolling",
          lambda: self.focus.set_typewriter(self.actions_by_name["typewriter"].isChecked()))  # fmt: skip
        a("spelling", "Check spelling",
          lambda: self.spelling.toggle(self.actions_by_name["spelling"].isChecked()),
          QKeySequence("F7"))  # fmt: skip
        for name in ("focus", "fullscreen", "typewriter", "spelling"):
            self.actions_by_name[name].setCheckable(True)
        self.actions_by_name["spelling"].setChecked(self.settings.spelling)
        self.actions_by_name["typewriter"].setChecked(self.settings.typewriter)
        a("manual", "Manual", lambda: help_windows.show_manual(self), QKeySequence("F1"))
        a("shortcuts", "Keyboard shortcuts",
          lambda: help_windows.show_shortcuts(self, self.actions_by_name))  # fmt: skip
        a("about", "About SwiftWriter", lambda: help_windows.show_about(self))

    def _build_ui(self) -> None:
        self.welcome = WelcomePage()
        self.welcome.new_requested.connect(self.projects.new_project)
        self.welcome.open_requested.connect(self.projects.open_project_dialog)
        self.welcome.sample_requested.connect(self.projects.open_sample)
        self.welcome.recent_requested.connect(self.projects.open_project)
        self.welcome.set_recent(self.settings.recent_projects())

        self.editor = Editor(dark=is_dark(self.settings.theme))
        self.editor.setFont(self.settings.editor_font)
        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("background: #f6e7b4; color: #3b3000; padding: 6px 10px;")
        self.banner.hide()
        self.find_bar = FindBar(self.editor)
        self.find_bar.next_document = self._next_document_with_phrase
        desk = QWidget()
        column = QVBoxLayout(desk)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.banner)
        column.addWidget(self.find_bar)
        column.addWidget(self.editor, 1)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(desk)
        self.setCentralWidget(self.stack)

        self.tree = ProjectTree()
        self.tree.setMinimumWidth(190)
        self.tree.confirm = self.ask
        self.tree.document_selected.connect(self.show_document)
        self.tree.deleted.connect(self._on_deleted)
        self.notes = NotesPanel()
        self.tree.synopsis_requested.connect(self.edit_synopsis)
        self.notes.save_failed.connect(lambda message: self.show_error("Could not save", message))
        self.notes.setMinimumWidth(190)
        self.panel = TakePanel(self.actions_by_name, self.settings.default_preset)
        self.panel.take_chosen.connect(self.takes.choose_take)
        self.stats_dock = StatsDock(self)
        self.docks = {}
        for name, title, widget, area in (
            ("project", "Project", self.tree, Qt.DockWidgetArea.LeftDockWidgetArea),
            ("notes", "Notes", self.notes, Qt.DockWidgetArea.LeftDockWidgetArea),
            ("generate", "Generate", scrolled(self.panel), Qt.DockWidgetArea.RightDockWidgetArea),
        ):
            dock = QDockWidget(title, self)
            dock.setObjectName(f"{name}_dock")
            dock.setWidget(widget)
            self.addDockWidget(area, dock)
            self.docks[name] = dock
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.stats_dock)
        self.docks["stats"] = self.stats_dock

        self.word_counter = WordCounter(self)
        self.words_label = self.word_counter.label
        self.save_label = QLabel("")
        self.model_label = ElidedLabel("No model", self)  # a model's name may be long
        for label in (self.word_counter, self.save_label, self.model_label):
            self.statusBar().addPermanentWidget(label)
        self.undo_delete_button = QPushButton("Undo delete")
        self.undo_delete_button.setFlat(True)
        self.undo_delete_button.clicked.connect(self.undo_delete)
        self.undo_delete_button.hide()
        self.statusBar().addWidget(self.undo_delete_button)

        self.autosave_timer = QTimer(self, singleShot=True)
        self.autosave_timer.setInterval(self.settings.autosave_s * 1000)
        self.autosave_timer.timeout.connect(self.safekeeping.save_now)
        self.editor.textChanged.connect(self.safekeeping.on_text_changed)
        self.editor.word_count_changed.connect(self.word_counter.update_current)
        self.takes.busy_changed.connect(lambda _busy: self.update_actions())
        self.show_page()

    def _build_menus(self) -> None:
        act = self.actions_by_name
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        for name in ("new", "open", "sample"):
            file_menu.addAction(act[name])
        self.recent_menu = file_menu.addMenu("Open recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        file_menu.addSeparator()
        for name in ("save", "backups", "import", "export", "close_project"):
            file_menu.addAction(act[name])
        file_menu.addSeparator()
        file_menu.addAction(act["quit"])
        edit = bar.addMenu("&Edit")
        edit.addAction("Undo", self.editor.undo, QKeySequence.StandardKey.Undo)
        edit.addAction("Redo", self.editor.redo, QKeySequence.StandardKey.Redo)
        edit.addSeparator()
        for name in ("bold", "italic"):
            edit.addAction(act[name])
        edit.addSeparator()
        for name in ("find", "replace", "find_next", "find_previous", "search_project"):
            edit.addAction(act[name])
        edit.addAction(act["undo_delete"])
        gen = bar.addMenu("&Generate")
        for name in ("generate", "stop", "continue", "regenerate", "three_takes", "undo",
                     "show_context"):  # fmt: skip
            gen.addAction(act[name])
        gen.addMenu(self.selection.menu)
        self.editor.selection_menu = self.selection.menu
        self.presets.attach(gen.addMenu("Presets"))
        view = bar.addMenu("&View")
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        for name in ("outline", "focus", "fullscreen", "typewriter", "spelling"):
            view.addAction(act[name])
        tools = bar.addMenu("&Tools")
        for name in ("history", "memory", "lorebook", "targets", "models", "settings"):
            tools.addAction(act[name])
        help_menu = bar.addMenu("&Help")
        for name in ("manual", "shortcuts"):
            help_menu.addAction(act[name])
        help_menu.addAction("Show log folder", self.show_log_folder)
        help_menu.addSeparator()
        help_menu.addAction(act["about"])

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.settings.recent_projects():
            self.recent_menu.addAction(
                Path(path).stem, lambda p=path: self.projects.open_project(p)
            )

    def show_page(self) -> None:
        has_project = self.project is not None
        self.stack.setCurrentIndex(1 if has_project else 0)
        for i in range(self.stack.count()):  # the page not shown asks for no room
            policy = QSizePolicy.Policy.Preferred if i == self.stack.currentIndex() else IGNORED
            self.stack.widget(i).setSizePolicy(policy, policy)
        for dock in self.docks.values():
            dock.setVisible(has_project)
        if has_project and not self._desk_laid_out:  # first time shown
            self._desk_laid_out = True
            QTimer.singleShot(0, self._size_docks)  # once the shown docks are laid out

    def _size_docks(self) -> None:
        """The docks' sizes, unless the last session's were kept and leave the editor its
        share of the window (a layout kept from a window that had outgrown its screen, with
        docks as wide as the editor should be, is not)."""
        if self._layout_kept and self.stack.width() >= EDITOR_SHARE * self.width():
            return
        width = self.width()  # on a small screen the docks go down to their least width
        self.resizeDocks([self.docks["project"], self.docks["generate"]],
                         [min(250, width // 5), min(310, width // 4)],
                         Qt.Orientation.Horizontal)  # fmt: skip
        self.resizeDocks([self.docks["generate"], self.stats_dock], [320, 480],
                         Qt.Orientation.Vertical)  # fmt: skip

    def update_actions(self) -> None:
        busy = self.takes.busy
        has_doc = self.project is not None and self.doc_id is not None
        writable = has_doc and not self.project.readonly
        act = self.actions_by_name
        can_write = writable and not busy and not self.model_training
        act["generate"].setEnabled(can_write)
        act["continue"].setEnabled(can_write)
        act["regenerate"].setEnabled(can_write)
        act["three_takes"].setEnabled(can_write)
        act["undo"].setEnabled(writable and not busy)
        act["bold"].setEnabled(writable)
        act["italic"].setEnabled(writable)
        act["stop"].setEnabled(busy)
        for name in ("import", "export", "close_project", "history", "save",
                     "backups", "memory", "lorebook", "show_context"):  # fmt: skip
            act[name].setEnabled(self.project is not None)
        writable_project = self.project is not None and not self.project.readonly
        act["import"].setEnabled(writable_project)
        act["targets"].setEnabled(writable_project)
        act["outline"].setEnabled(self.project is not None)
        act["undo_delete"].setEnabled(self._last_deleted is not None)
        self.tree.setEnabled(not busy)

    def _emphasis(self, marker: str) -> None:
        """Ctrl+B / Ctrl+I mark up the manuscript where it has the keyboard, never behind a
        note or a field that has it."""
        focus = QApplication.focusWidget()
        if focus is None or focus is self.editor:
            self.editor.toggle_emphasis(marker)

    # -- questions and messages (tests replace `ask`) ---------------------------------------
    def ask(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text)
        return answer == QMessageBox.StandardButton.Yes

    def choose(self, title: str, text: str, choices) -> str:
        """One of `choices` (button labels; the last one is Cancel). Tests replace this."""
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=self)
        buttons = {box.addButton(c, QMessageBox.ButtonRole.ActionRole): c for c in choices}
        box.exec()
        return buttons.get(box.clickedButton(), choices[-1])

    def ask_save_path(self) -> str:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the text as", "", "Text (*.txt);;Markdown (*.md)"
        )
        return path

    def ask_text(self, title: str, label: str, text: str = "") -> str:
        """A line of text from the writer ('' when cancelled). Tests replace this."""
        value, ok = QInputDialog.getText(self, title, label, text=text)
        return value.strip() if ok else ""

    def show_error(self, title: str, message: str) -> None:
        """Never blocks: the message box is window-modal and opened, not executed."""
        self.last_error = message
        self.statusBar().showMessage(message, 10000)
        box = QMessageBox(QMessageBox.Icon.Warning, title, message, parent=self)
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    # -- the model --------------------------------------------------------------------------
    # -- documents and autosave -------------------------------------------------------------
    def show_document(self, doc_id: int) -> None:
        if self.project is None or doc_id == self.doc_id:
            return
        if self.takes.busy:
            self.statusBar().showMessage("Wait for the generation, or stop it, first", 5000)
            return
        if not self.safekeeping.save_before_leaving():
            self.tree.select(self.doc_id)
            return
        self.takes.reset()
        try:
            doc = self.project.document(doc_id)
        except ProjectError as exc:
            self.show_error("Cannot show the document", str(exc))
            return
        self.loading_doc = True
        try:
            self.doc_id = doc_id
            self.editor.set_text(doc.text)
            self.safekeeping.saved_text = doc.text
        finally:
            self.loading_doc = False
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)
        self.save_label.setText("Saved")
        self.word_counter.reload()
        self.update_actions()

    def _on_deleted(self, doc_id: int, title: str) -> None:
        self._last_deleted = doc_id
        if doc_id == self.doc_id or self.doc_id not in self.tree.ids_in_order():
            self.doc_id = None
            self.editor.set_text("")
            current = self.tree.current_id()
            if current is not None:
                self.show_document(current)
        self.statusBar().showMessage(f"“{title}” moved to the trash", 15000)
        self.word_counter.reload()
        self.undo_delete_button.show()
        QTimer.singleShot(15000, self.undo_delete_button.hide)
        self.update_actions()

    def undo_delete(self) -> None:
        if self._last_deleted is None or self.project is None:
            return
        doc_id, self._last_deleted = self._last_deleted, None
        self.tree.undelete(doc_id)
        self.undo_delete_button.hide()
        self.update_actions()

    def show_context(self):
        """The context viewer for the next take (needs the model: its tokenizer and context)."""

        if self.project is None or self.doc_id is None or self.loaded_model is None:
            self.statusBar().showMessage("Open a document and wait for the model first", 5000)
            return None
        self.tools.save_lorebook()
        try:
            built = next_take(self).session.story_context()
        except UserError as exc:
            self.show_error("Cannot show the context", str(exc))
            return None
        dialog = ContextDialog(
            self,
            built.render(),
            built.lore,
            project=self.project,
            doc_id=self.doc_id,
            rebuild=lambda: next_take(self).session.story_context().render(),
        )
        self.open_dialogs.append(dialog)
        dialog.show()
        return dialog

    def edit_synopsis(self, doc_id: int):

        if self.project is None or doc_id is None:
            return None
        dialog = SynopsisDialog(self, self.project, doc_id)
        self.open_dialogs.append(dialog)
        dialog.open()
        return dialog

    def edit_memory(self):

        if self.project is None:
            return None
        dialog = MemoryDialog(self, self.project)
        self.open_dialogs.append(dialog)
        dialog.open()
        return dialog

    def show_log_folder(self) -> str:
        """Open the folder of the app's log (tracebacks of anything unexpected) for a report."""

        folder = logs.log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
        self.statusBar().showMessage(f"The log is in {folder}", 10000)
        return str(folder)

    def _open_find(self, replace: bool = False) -> None:
        if self.project is not None:
            self.find_bar.open(replace)

    def _find_again(self, backward: bool) -> None:
        if self.project is not None:
            self.find_bar.show()
            self.find_bar.find_next(backward)

    def searchable_documents(self) -> list:
        """The project's documents in tree order, the open one with the editor's text."""
        if self.project is None:
            return []
        docs = self.project.documents()
        current = self.editor.toPlainText()
        return [dataclasses.replace(d, text=current) if d.id == self.doc_id else d for d in docs]

    def _next_document_with_phrase(self, backward: bool) -> bool:
        """F3 past the last match: open the next document (in tree order, wrapping) that holds
        the phrase; False when no other document does."""

        case, whole = self.find_bar.options()
        docs = self.searchable_documents()
        ids = [d.id for d in docs]
        if self.doc_id not in ids:
            return False
        here = ids.index(self.doc_id)
        before, after = ids[:here], ids[here + 1 :]
        order = before[::-1] + after[::-1] if backward else after + before
        holding = {
            m.doc_id for m in find_in_documents(docs, self.find_bar.find_edit.text(), case, whole)
        }
        for doc_id in order:
            if doc_id in holding:
                self.tree.select(doc_id)
                self.show_document(doc_id)
                return self.doc_id == doc_id
        return False

    def open_outline(self):
        if self.project is None:
            return None

        self.safekeeping.save_now(quiet=True)  # the word counts read the store
        dialog = OutlineDialog(self)
        self.tree.changed.connect(dialog.fill)
        dialog.finished.connect(lambda _=0: self.forget_dialog(dialog, dialog.fill))
        self.open_dialogs.append(dialog)
        dialog.show()
        return dialog

    def forget_dialog(self, dialog, refill=None) -> None:
        """A project's tool window closed: no more refills, no reference kept."""
        if refill is not None:
            with contextlib.suppress(RuntimeError, TypeError):
                self.tree.changed.disconnect(refill)
        if dialog in self.open_dialogs:
            self.open_dialogs.remove(dialog)

    def search_project(self):
        if self.project is None:
            return None

        case, whole = self.find_bar.options()
        needle = self.editor.textCursor().selectedText() or self.find_bar.find_edit.text()
        dialog = ProjectSearchDialog(self, needle.split("\u2029")[0], case, whole)
        dialog.finished.connect(lambda _=0: self.forget_dialog(dialog))
        self.open_dialogs.append(dialog)
        dialog.show()
        if needle:
            dialog.search()
        return dialog

    def open_match(self, match) -> None:
        """Show a project-search match: its document, the match selected (a lorebook
        entry's: the lorebook, the entry chosen)."""

        if match.lore_id is not None:
            self.tools.open_lorebook(match.lore_id)
            return

        if match.doc_id != self.doc_id:
            self.tree.select(match.doc_id)
            self.show_document(match.doc_id)
        if match.doc_id != self.doc_id:
            return
        text = self.editor.toPlainText()
        cursor = self.editor.textCursor()
        cursor.setPosition(utf16_offset(text, match.start))
        cursor.setPosition(utf16_offset(text, match.end), cursor.MoveMode.KeepAnchor)
        self.editor.setTextCursor(cursor)
        self.editor.setFocus()

    # -- closing ----------------------------------------------------------------------------
    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self.exchange.exporting:
            if not self.ask("Export running", "An export is running. Cancel it and quit?"):
                event.ignore()
                return
            self.exchange.wait_for_export()
        if not self.projects.close_project():
            event.ignore()
            return
        for dialog in self.open_dialogs:
            dialog.close()  # a model conversion finishes first: never cut in half
        self.open_dialogs.clear()
        self.settings.save_layout(self)
        self.settings.sync()
        self.models.wait()
        super().closeEvent(event)

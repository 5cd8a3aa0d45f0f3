"""A project's life in the window: open, create, the sample, close. The window's controller for
its project; the window keeps the open project (`project`, `doc_id`, `histories`), which the
rest of the window reads. Closing saves first, asks while a take runs, and backs up; opening
offers back interrupted generations and text a failed save kept."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QFileDialog

from swiftwriter.errors import UserError
from swiftwriter.store import Project
from swiftwriter.ui.panel_state import apply_state, load_project_state
from swiftwriter.ui.welcome import create_sample_project
from swiftwriter.writing.history import Histories

FILTER = "SwiftWriter projects (*.swiftwriter);;All files (*)"


class ProjectController(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window

    def open_project(self, path) -> bool:
        if not self.close_project():
            return False
        try:
            project = Project.open(Path(path), fallback_readonly=True)
        except UserError as exc:
            self.window.show_error("Cannot open the project", str(exc))
            return False
        self.adopt(project)
        return True

    def adopt(self, project: Project) -> None:
        self.window.project = project
        self.window.histories = Histories(project)
        self.window.settings.add_recent(project.path)
        self.window.welcome.set_recent(self.window.settings.recent_projects())
        self.window.setWindowTitle(
            f"{project.meta.get('title') or project.path.stem} — SwiftWriter"
        )
        if project.readonly:
            self.window.banner.setText(
                f"Read-only: {project.readonly_reason}. You can read and export, not change it."
            )
        self.window.banner.setVisible(project.readonly)
        self.window.editor.setReadOnly(project.readonly)
        self.window.safekeeping.project_opened()
        self._offer_recovery()
        self.window.safekeeping.offer_emergency_copies()
        self.window.doc_id = None
        self.window.show_page()
        self.window.notes.set_project(project)
        apply_state(self.window.panel, load_project_state(project))
        self.window.panel.set_stop_sequences(project.stop_sequences)
        self.window.spelling.learn_names(project)  # before a document is shown and checked
        self.window.tree.set_project(project)
        if self.window.doc_id is None:
            self.window.editor.set_text("")
        self.window.word_counter.reload(new_session=True)
        self.window.update_actions()
        self.window.project_opened.emit(project)

    def _offer_recovery(self) -> None:
        if self.window.project.readonly:
            return
        lost = self.window.project.interrupted_generations()
        if not lost:
            return
        words = sum(len(g.text.split()) for g in lost)
        if self.window.ask(
            "Recover generations",
            f"{len(lost)} generation(s) were interrupted when SwiftWriter last stopped "
            f"({words:,} words saved). Put their text back where it was written?",
        ):
            for gen in lost:
                self.window.project.recover_generation(gen.id, append=True)
        else:  # keep them in the history only, closed as failed
            for gen in lost:
                self.window.project.recover_generation(gen.id, append=False)

    def close_project(self) -> bool:
        """Save and close the open project; False when the writer chose to keep it open."""
        if self.window.focus.active:  # the docks come back (and the saved layout keeps them)
            self.window.focus.leave()
        if self.window.project is None:
            return True
        for dialog in [d for d in self.window.open_dialogs if getattr(d, "project_bound", False)]:
            dialog.close()  # an outline or a search of this project: it goes with it
        if self.window.takes.busy:
            if not self.window.ask(
                "Generation running", "A generation is running. Stop it and close?"
            ):
                return False
            self.window.takes.stop()
            if not self.window.takes.wait():
                self.window.safekeeping.save_now(force=True)  # the text around the take, at least
                self.window.show_error(
                    "Still stopping",
                    "The generation has not stopped yet; your text is saved. Close again in a "
                    "moment.",
                )
                return False
            QApplication.processEvents()  # deliver its last text and result before closing
        self.window.exchange.wait_for_import()
        if not self.window.safekeeping.save_before_leaving():
            return False
        if not self.window.project.readonly:
            self.window.safekeeping.backup_now()
        self.window.takes.reset()
        self.window.stats_dock.reset()  # the last take's figures belong to this project
        project, self.window.project, self.window.doc_id = self.window.project, None, None
        self.window.histories = None
        self.window.tree.set_project(None)
        self.window.notes.set_project(None)
        self.window.editor.set_text("")
        project.close()
        self.window.banner.hide()
        self.window.setWindowTitle("SwiftWriter")
        self.window.word_counter.reload()
        self.window.show_page()
        self.window.update_actions()
        return True

    def new_project(self, path=None) -> bool:
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self.window, "New project", "", FILTER)
            if not path:
                return False
            if not path.endswith(".swiftwriter"):
                path += ".swiftwriter"
        if not self.close_project():
            return False
        try:
            project = Project.create(Path(path), title=Path(path).stem)
            project.add_document("Chapter 1")
        except UserError as exc:
            self.window.show_error("Cannot create the project", str(exc))
            return False
        self.adopt(project)
        return True

    def open_project_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open project", "", FILTER)
        if path:
            self.open_project(path)

    def open_sample(self, folder=None) -> bool:
        try:
            path = create_sample_project(folder)
        except UserError as exc:
            self.window.show_error("Cannot create the sample project", str(exc))
            return False
        return self.open_project(path)

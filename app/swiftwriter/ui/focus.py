"""Writing comfort: focus mode (F8: the docks step aside and the text stands centred at a
comfortable measure), full screen (F11), and optional typewriter scrolling (the line being
written stays in the middle of the window)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt

MEASURE = 72  # characters per line in focus mode: a book page's measure


class FocusMode(QObject):
    """Switches the window into and out of focus mode, putting back exactly the docks that
    were showing before."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.active = False
        self._docks_shown: list[str] = []
        self._status_shown = True
        window.editor.cursorPositionChanged.connect(self._keep_line_centred)

    def toggle(self) -> bool:
        return self.leave() if self.active else self.enter()

    def enter(self) -> bool:
        window = self.window
        if window.project is None:
            window.actions_by_name["focus"].setChecked(False)
            return False
        self._docks_shown = [n for n, d in window.docks.items() if d.isVisible()]
        for dock in window.docks.values():
            dock.hide()
        window.editor.set_measure(MEASURE)
        self.active = True
        window.actions_by_name["focus"].setChecked(True)
        window.statusBar().showMessage("Focus mode: F8 to leave", 4000)
        return True

    def leave(self) -> bool:
        window = self.window
        for name in self._docks_shown:
            window.docks[name].show()
        window.editor.set_measure(None)
        self.active = False
        window.actions_by_name["focus"].setChecked(False)
        return False

    def toggle_fullscreen(self) -> bool:
        window = self.window
        if window.isFullScreen():
            window.setWindowState(window.windowState() & ~Qt.WindowState.WindowFullScreen)
        else:
            window.setWindowState(window.windowState() | Qt.WindowState.WindowFullScreen)
        full = bool(window.windowState() & Qt.WindowState.WindowFullScreen)
        window.actions_by_name["fullscreen"].setChecked(full)
        return full

    def set_typewriter(self, on: bool) -> None:
        self.window.settings.typewriter = on
        self.window.editor.setCenterOnScroll(on)
        self._keep_line_centred()

    def _keep_line_centred(self) -> None:
        editor = self.window.editor
        if self.window.settings.typewriter and not editor.streaming_now():
            editor.centerCursor()

"""Keeping the window within its screen: a label never asks for the width of its whole sentence
(it wraps in a panel, or is cut short with the whole of it in a tooltip in the status bar), a
panel scrolls instead of growing, and a window or a layout kept from a larger screen (or from
a window that had grown past its screen) is fitted to this one.

Qt widens a window to its layout's minimum width, and a label that does not wrap asks for its
longest line: one measured sentence in the Speed dock took a 1280-pixel window to 1475 on a
1400-pixel screen, where the window could no longer be narrowed."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

# The editor keeps at least this share of a window when a kept layout is put back.
EDITOR_SHARE = 1 / 3


def scrolled(widget: QWidget) -> QScrollArea:
    """A panel in a scroll area, so a small screen can still fit the window (it scrolls), and
    wrapped labels get the height their width needs (the area asks the panel's height for
    its width, which a dock does not)."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setMinimumWidth(widget.minimumSizeHint().width() + 12)
    return area


class ElidedLabel(QLabel):
    """One line that asks for little width: cut short with '…' where the room ends, the whole
    text then in its tooltip. `text()` is always the whole text."""

    MIN_CHARS = 12

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        hint = super().minimumSizeHint()
        room = self.fontMetrics().averageCharWidth() * self.MIN_CHARS
        return QSize(min(hint.width(), room), hint.height())

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self._tell_whole()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._tell_whole()

    def _shown(self) -> str:
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, width)

    def _tell_whole(self) -> None:
        self.setToolTip(self.text() if self._shown() != self.text() else "")

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt's name)
        painter = QPainter(self)
        flags = int(self.alignment() | Qt.AlignmentFlag.AlignVCenter)
        self.style().drawItemText(painter, self.contentsRect(), flags, self.palette(),
                                  self.isEnabled(), self._shown(), self.foregroundRole())  # fmt: skip
        painter.end()


class WrappedLabel(QLabel):
    """Wraps at spaces, so it asks for no more width than its longest word, and holds the
    height its lines need at its width as a plain minimum height (without it, the Speed dock's
    form laid its rows out from stale heights and cut a wrapped sentence to its first lines)."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.setWordWrap(True)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self._hold_height()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._hold_height()

    def _hold_height(self) -> None:
        height = self.heightForWidth(self.width())
        if height > 0 and height != self.minimumHeight():
            self.setMinimumHeight(height)


def fit_to_screen(window: QWidget) -> None:
    """The window's frame within the available part of its screen (kept geometry from a
    larger screen, or from a window that had grown past this one, included)."""
    screen = window.screen()
    if screen is None:
        return
    room = screen.availableGeometry()
    frame = window.frameGeometry()
    extra = QSize(frame.width() - window.width(), frame.height() - window.height())
    width = min(window.width(), room.width() - extra.width())
    height = min(window.height(), room.height() - extra.height())
    if (width, height) != (window.width(), window.height()):
        window.resize(width, height)
    frame = window.frameGeometry()
    x = min(max(frame.x(), room.left()), room.right() + 1 - frame.width())
    y = min(max(frame.y(), room.top()), room.bottom() + 1 - frame.height())
    if (x, y) != (frame.x(), frame.y()):
        window.move(x, y)


class FoldingRow(QWidget):
    """Groups of (widget, stretch) on one line where the width allows it, else a line per
    group: it asks for no more width than its widest group needs."""

    MARGINS = (8, 4, 8, 4)

    def __init__(self, groups: list[list[tuple[QWidget, int]]], parent=None):
        super().__init__(parent)
        self._groups = groups
        self._lines = QVBoxLayout(self)
        self._lines.setContentsMargins(*self.MARGINS)
        self._folded: bool | None = None
        self._arrange(folded=True)

    def _needs(self, group) -> int:
        spacing = max(self._lines.spacing(), 0)
        widths = [max(w.minimumWidth(), w.minimumSizeHint().width()) for w, _ in group]
        return sum(widths) + spacing * (len(widths) - 1) + self.MARGINS[0] + self.MARGINS[2]

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        width = max(self._needs(group) for group in self._groups)
        return QSize(width, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._arrange(folded=self.width() < self._needs([p for g in self._groups for p in g]))

    def _arrange(self, folded: bool) -> None:
        if folded == self._folded:
            return
        self._folded = folded
        while self._lines.count():
            line = self._lines.takeAt(0).layout()
            while line.count():
                line.takeAt(0)
            line.deleteLater()
        for group in self._groups if folded else [[p for g in self._groups for p in g]]:
            line = QHBoxLayout()
            self._lines.addLayout(line)
            for widget, stretch in group:
                line.addWidget(widget, stretch)

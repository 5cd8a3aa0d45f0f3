"""The manuscript editor: plain text with light Markdown highlighting, a word count, a find and
replace bar, and streamed text that stays marked as generated until the writer edits it.

Generated text is inserted through one tracked span (a QTextCursor whose selection Qt keeps in
place while the rest of the text changes), so Undo generation removes exactly what was streamed
even after the writer typed elsewhere, and plain Ctrl+Z undoes it in one step when nothing else
was edited in between."""

from __future__ import annotations

import re

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from swiftwriter.export.mdparse import MarkdownParser
from swiftwriter.ui.fitting import FoldingRow
from swiftwriter.words import count_words


def qt_len(text: str) -> int:
    """Length in Qt's text positions (UTF-16 units): an emoji counts two, not one."""
    return len(text.encode("utf-16-le")) // 2


def text_before(text: str, qt_position: int) -> str:
    """The Python string before a Qt text position (they differ after any emoji)."""
    return text.encode("utf-16-le")[: 2 * qt_position].decode("utf-16-le", errors="ignore")


# Qt highlights a whole paragraph on every change to it; past this length the cost of
# parsing and spell-checking it on each keystroke (or each streamed piece) would show.
LONGEST_HIGHLIGHTED = 6000
_MAY_BE_MARKED = re.compile(r"[*_~#>]|^\s*-{3,}\s*$")


class MarkdownHighlighter(QSyntaxHighlighter):
    """Headings, emphasis, strikethrough, scene breaks and block quotes, read line by line by
    the app's one Markdown parser (export.mdparse: what is shown is what exports); nothing that
    hides the text."""

    MARKUP = "*_~"

    def __init__(self, document: QTextDocument, dark: bool = False):
        super().__init__(document)
        self.formats: dict[str, QTextCharFormat] = {}
        self.parser = MarkdownParser()
        self.speller = None  # a spelling.Speller while spell checking is on
        self.set_dark(dark)

    def set_speller(self, speller) -> None:
        self.speller = speller
        self.rehighlight()

    def set_dark(self, dark: bool) -> None:
        accent = QColor("#8fb3d9" if dark else "#2f5d8a")
        muted = QColor("#8a8a8a" if dark else "#8c8c8c")
        heading = QTextCharFormat()
        heading.setFontWeight(QFont.Weight.Bold)
        heading.setForeground(accent)
        bold = QTextCharFormat()
        bold.setFontWeight(QFont.Weight.Bold)
        italic = QTextCharFormat()
        italic.setFontItalic(True)
        strike = QTextCharFormat()
        strike.setFontStrikeOut(True)
        brk = QTextCharFormat()
        brk.setForeground(muted)
        quote = QTextCharFormat()
        quote.setForeground(muted)
        quote.setFontItalic(True)
        misspelt = QTextCharFormat()
        misspelt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SpellCheckUnderline)
        misspelt.setUnderlineColor(QColor("#e06c75" if dark else "#c0392b"))
        self.formats = {
            "heading": heading,
            "bold": bold,
            "italic": italic,
            "strike": strike,
            "break": brk,
            "quote": quote,
            "misspelt": misspelt,
        }
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt's name)
        if len(text) > LONGEST_HIGHLIGHTED:
            return  # a pasted blob or a take without paragraph breaks: typing stays instant
        marks: list[tuple[int, int, str]] = []  # (start, end, format name)
        if _MAY_BE_MARKED.search(text):  # most lines of prose have no markup to parse
            marks += self._markdown(text)
        if self.speller is not None:
            marks += [(a, b, "misspelt") for a, b in self.speller.misspelt(text)]
        if marks and any(ord(c) > 0xFFFF for c in text):  # Qt counts UTF-16 units
            units = [0]
            for c in text:
                units.append(units[-1] + (2 if ord(c) > 0xFFFF else 1))
            marks = [(units[a], units[b], name) for a, b, name in marks]
            self._apply(units[-1], marks)
        else:
            self._apply(len(text), marks)

    def _markdown(self, text: str) -> list[tuple[int, int, str]]:
        blocks = self.parser.blocks(text)
        if not blocks:
            return []
        block = blocks[0]
        whole = {"heading": "heading", "rule": "break"}.get(block.kind)
        if whole is None and block.quote:
            whole = "quote"
        marks = [(0, len(text), whole)] if whole else []
        if block.kind not in ("rule", "code", "table"):
            marks += self._inline(text, block)
        return marks

    def _inline(self, text: str, block) -> list[tuple[int, int, str]]:
        """Each formatted span found in the line in order, with its own markup around it."""
        marks = []
        pos = 0
        for span in block.spans:
            if span.is_break or not span.text:
                continue
            start = text.find(span.text, pos)
            if start < 0:
                continue
            end = start + len(span.text)
            pos = end
            names = [n for n in ("bold", "italic", "strike") if getattr(span, n)]
            if not names:
                continue
            while start > 0 and text[start - 1] in self.MARKUP:
                start -= 1
            while end < len(text) and text[end] in self.MARKUP:
                end += 1
            marks += [(start, end, name) for name in names]
            pos = end
        return marks

    def _apply(self, length: int, marks: list[tuple[int, int, str]]) -> None:
        """One merged format per stretch of characters that carry the same marks."""
        if not marks:
            return
        cuts = sorted({0, length, *(a for a, _, _ in marks), *(b for _, b, _ in marks)})
        for a, b in zip(cuts, cuts[1:], strict=False):
            names = [n for s, e, n in marks if s <= a and b <= e]
            if not names or a >= b:
                continue
            fmt = QTextCharFormat()
            for name in names:
                fmt.merge(self.formats[name])
            self.setFormat(a, b - a, fmt)


class Editor(QPlainTextEdit):
    """QPlainTextEdit plus generated spans and a debounced word count."""

    word_count_changed = Signal(int)
    word_added = Signal(str)  # "Add to dictionary" in the context menu

    def __init__(self, parent=None, dark: bool = False):
        super().__init__(parent)
        self._measure: int | None = None  # focus mode's column width, in characters
        self.setPlaceholderText("Start writing, or give the model a first paragraph…")
        self.setTabChangesFocus(False)
        self.document().setDocumentMargin(28)
        self.highlighter = MarkdownHighlighter(self.document(), dark)
        self.generated_color = QColor("#33403a" if dark else "#e8f1e4")
        self.spans: list[QTextCursor] = []  # generated text not yet edited (shown tinted)
        self.selection_menu = None  # the selection tools (QMenu), offered over a selection
        self.stream: QTextCursor | None = None  # the span being streamed into now
        self._stream_revision = -1
        self._streaming = False
        self.words = 0
        self._count_timer = QTimer(self, singleShot=True, interval=250)
        self._count_timer.timeout.connect(self._count)
        self.document().contentsChange.connect(self._on_change)
        self.textChanged.connect(self._schedule_count)

    def _marked_misspelt(self, cursor: QTextCursor) -> bool:
        """Whether the word `cursor` selects is one the spell check underlines (the same rule:
        a capitalised word is checked at the start of a sentence only)."""
        speller = self.highlighter.speller
        if speller is None:
            return False
        block = cursor.block().text()
        start = len(text_before(block, cursor.selectionStart() - cursor.block().position()))
        return any(a == start for a, _ in speller.misspelt(block))

    def contextMenuEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        self.context_menu(event.pos()).exec(event.globalPos())

    def context_menu(self, pos):
        """Qt's menu, led by corrections when the word under the pointer is misspelt, and by
        the selection tools over a selection."""
        menu = self.createStandardContextMenu(pos)
        if self.selection_menu is not None and self.textCursor().hasSelection():
            first = menu.actions()[0] if menu.actions() else None
            menu.insertMenu(first, self.selection_menu)
            menu.insertSeparator(first)
        cursor = self.cursorForPosition(pos)
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        word = cursor.selectedText()
        if word and self._marked_misspelt(cursor):
            first = menu.actions()[0] if menu.actions() else None
            for suggestion in self.highlighter.speller.suggestions(word) or []:
                action = menu.addAction(suggestion)
                action.triggered.connect(lambda _=False, c=cursor, s=suggestion: c.insertText(s))
                menu.insertAction(first, action)
            add = menu.addAction(f"Add “{word}” to the dictionary")
            add.triggered.connect(lambda _=False, w=word: self.word_added.emit(w))
            menu.insertAction(first, add)
            menu.insertSeparator(first)
        return menu

    def set_measure(self, chars: int | None) -> None:
        """Centre the text in a column about `chars` characters wide (None: the full width)."""
        self._measure = chars
        self._apply_measure()

    def _apply_measure(self) -> None:
        chars = self._measure
        side = 0
        if chars:
            column = self.fontMetrics().averageCharWidth() * chars + 2 * 28  # + the margins
            side = max(0, (self.width() - column) // 2)
        self.setViewportMargins(side, 0, side, 0)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._apply_measure()

    def set_dark(self, dark: bool) -> None:
        self.highlighter.set_dark(dark)
        self.generated_color = QColor("#33403a" if dark else "#e8f1e4")
        self._paint()

    def set_text(self, text: str) -> None:
        """Load a document: a fresh undo history and no generated marks."""
        self.spans.clear()
        self.stream = None
        self.setPlainText(text)
        self._count()
        self._paint()

    # -- emphasis (Ctrl+B, Ctrl+I) ----------------------------------------------------------
    def toggle_emphasis(self, marker: str) -> None:
        """Ctrl+B (`**`) and Ctrl+I (`*`), in one undo step: the selection (trimmed of spaces)
        is wrapped in the marker, or unwrapped where it, or the text just around it, already
        has it (`***both***` holds both); with no selection an empty pair is put around the
        cursor, an empty pair taken out again, and at the end of emphasised text the cursor
        steps past its closing marker, so typing goes on plain."""
        if self.isReadOnly():
            return
        n = len(marker)
        cursor = self.textCursor()
        start, end = cursor.selectionStart(), cursor.selectionEnd()
        while start < end and self._char(start).isspace():
            start += 1
        while end > start and self._char(end - 1).isspace():
            end -= 1
        cursor.beginEditBlock()
        try:
            if start == end:
                start = end = self._emphasis_at(cursor, cursor.position(), n)
            else:
                start, end = self._emphasis_over(cursor, start, end, n)
        finally:
            cursor.endEditBlock()
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        self.setTextCursor(cursor)

    def _char(self, position: int) -> str:
        if 0 <= position < self.document().characterCount() - 1:
            return self.document().characterAt(position)
        return ""

    def _stars(self, position: int, step: int) -> int:
        """How many `*` in a row (at most 3) from `position` on (step 1) or before it (-1)."""
        count, at = 0, position if step > 0 else position - 1
        while count < 3 and self._char(at) == "*":
            count, at = count + 1, at + step
        return count

    @staticmethod
    def _has(n: int, stars: int) -> bool:
        """Whether a run of `stars` asterisks holds italic (n=1: 1 or 3) or bold (n=2: 2, 3)."""
        return stars % 2 == 1 if n == 1 else stars >= 2

    def _edit(self, cursor: QTextCursor, position: int, remove: int, text: str = "") -> None:
        cursor.setPosition(position)
        cursor.setPosition(position + remove, QTextCursor.MoveMode.KeepAnchor)
        cursor.insertText(text)

    def _emphasis_over(self, cursor: QTextCursor, start: int, end: int, n: int):
        marker = "*" * n
        lead, trail = self._stars(start, 1), self._stars(end, -1)
        if end - start > lead + trail and self._has(n, lead) and self._has(n, trail):
            self._edit(cursor, end - n, n)  # the markers are inside the selection
            self._edit(cursor, start, n)
            return start, end - 2 * n
        if self._has(n, self._stars(start, -1)) and self._has(n, self._stars(end, 1)):
            self._edit(cursor, end, n)  # the markers are just around it
            self._edit(cursor, start - n, n)
            return start - n, end - n
        self._edit(cursor, end, 0, marker)
        self._edit(cursor, start, 0, marker)
        return start + n, end + n

    def _emphasis_at(self, cursor: QTextCursor, position: int, n: int) -> int:
        before, after = self._stars(position, -1), self._stars(position, 1)
        if self._has(n, before) and self._has(n, after):  # an empty pair: take it out
            self._edit(cursor, position, n)
            self._edit(cursor, position - n, n)
            return position - n
        previous = self._char(position - 1)
        if self._has(n, after) and previous and not previous.isspace():
            return position + n  # the end of emphasised text: step past its closing marker
        self._edit(cursor, position, 0, "*" * 2 * n)
        return position + n

    # -- streaming --------------------------------------------------------------------------
    def begin_stream(self, position: int | None = None) -> QTextCursor:
        """Start a generated span at `position` (default: the cursor) and return it."""
        cursor = QTextCursor(self.document())
        pos = self.textCursor().position() if position is None else position
        cursor.setPosition(max(0, min(pos, self.document().characterCount() - 1)))
        self.stream = cursor
        self._stream_revision = -1
        self.spans.append(cursor)
        return cursor

    def append_stream(self, text: str) -> None:
        """Insert streamed text at the end of the current span, as one undo step overall."""
        if self.stream is None or not text:
            return
        cursor = self.stream
        start = cursor.selectionStart()
        end = cursor.selectionEnd()
        insert = QTextCursor(self.document())
        insert.setPosition(end)
        self._streaming = True
        try:
            if self._stream_revision == self.document().revision():
                insert.joinPreviousEditBlock()  # nothing else edited since: same undo step
            else:
                insert.beginEditBlock()
            insert.insertText(text)
            insert.endEditBlock()
        finally:
            self._streaming = False
        self._stream_revision = self.document().revision()
        cursor.setPosition(start)
        cursor.setPosition(end + qt_len(text), QTextCursor.MoveMode.KeepAnchor)
        self._paint()

    def end_stream(self) -> QTextCursor | None:
        span, self.stream = self.stream, None
        if span is not None and not span.hasSelection() and span in self.spans:
            self.spans.remove(span)
        self._paint()
        return span

    def streaming_now(self) -> bool:
        """True while a streamed piece (or a take swap) is being inserted."""
        return self._streaming

    def text_without_stream(self) -> str:
        """The text with the take being streamed left out (what the document holds while the
        take's own record keeps the take)."""
        text = self.toPlainText()
        span = self.stream
        if span is None or not span.hasSelection():
            return text
        raw = text.encode("utf-16-le")
        start, end = span.selectionStart(), span.selectionEnd()
        return (raw[: 2 * start] + raw[2 * end :]).decode("utf-16-le", errors="surrogatepass")

    def span_text(self, span: QTextCursor | None) -> str:
        return span.selectedText().replace("\u2029", "\n") if span is not None else ""

    def replace_span(self, span: QTextCursor, text: str) -> None:
        """Replace a span's text in one undo step (undo generation, swapping takes)."""
        start = span.selectionStart()
        self._streaming = True
        try:
            span.beginEditBlock()
            span.insertText(text)
            span.endEditBlock()
        finally:
            self._streaming = False
        span.setPosition(start)
        span.setPosition(start + qt_len(text), QTextCursor.MoveMode.KeepAnchor)
        if not text and span in self.spans:
            self.spans.remove(span)
        elif text and span not in self.spans:
            self.spans.append(span)
        self._paint()

    def generated_ranges(self) -> list[tuple[int, int]]:
        return [(c.selectionStart(), c.selectionEnd()) for c in self.spans if c.hasSelection()]

    def _on_change(self, position: int, removed: int, added: int) -> None:
        """An edit by the writer inside a generated span makes that span theirs."""
        if self._streaming:
            return
        end = position + added
        for span in list(self.spans):
            if span is self.stream:
                continue
            if span.selectionStart() <= end and position <= span.selectionEnd():
                self.spans.remove(span)
        if self.spans or removed or added:
            QTimer.singleShot(0, self._paint)

    def _paint(self) -> None:
        selections = []
        for span in self.spans:
            if not span.hasSelection():
                continue
            sel = QTextEdit.ExtraSelection()
            sel.cursor = span
            sel.format.setBackground(self.generated_color)
            selections.append(sel)
        self.setExtraSelections(selections)

    # -- words ------------------------------------------------------------------------------
    def _schedule_count(self) -> None:
        """At most four counts a second, also while text streams in (no restart)."""
        if not self._count_timer.isActive():
            self._count_timer.start()

    def _count(self) -> None:
        self.words = count_words(self.toPlainText())
        self.word_count_changed.emit(self.words)


class FindBar(QWidget):
    """Find and replace in the editor (Ctrl+F shows it, Ctrl+H with the replacement field,
    F3 / Shift+F3 find again, Esc hides it). `next_document(backward)`, when set, moves to the
    next document holding the phrase once this one has no more, so F3 walks the project."""

    def __init__(self, editor: Editor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.next_document = None
        self.find_edit = QLineEdit(placeholderText="Find")
        self.replace_edit = QLineEdit(placeholderText="Replace with")
        self.case = QCheckBox("Match case")
        self.whole = QCheckBox("Whole words")
        self.status = QLabel("")
        next_btn = QPushButton("Next")
        prev_btn = QPushButton("Previous")
        replace_btn = QPushButton("Replace")
        all_btn = QPushButton("Replace all")
        close_btn = QToolButton(text="×", toolTip="Close (Esc)", autoRaise=True)
        for edit in (self.find_edit, self.replace_edit):
            edit.setMinimumWidth(110)
        # one line where the editor is wide; three where it is not (focus mode's column, a
        # small screen): the bar never makes the window wider than its screen
        row = FoldingRow([
            [(self.find_edit, 2), (prev_btn, 0), (next_btn, 0)],
            [(self.replace_edit, 2), (replace_btn, 0), (all_btn, 0)],
            [(self.case, 0), (self.whole, 0), (self.status, 1), (close_btn, 0)],
        ])  # fmt: skip
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(row)
        self.find_edit.returnPressed.connect(self.find_next)
        next_btn.clicked.connect(self.find_next)
        prev_btn.clicked.connect(lambda: self.find_next(backward=True))
        replace_btn.clicked.connect(self.replace)
        all_btn.clicked.connect(self.replace_all)
        close_btn.clicked.connect(self.hide)
        # Esc in the bar hides it; an event filter rather than a window-wide shortcut, which
        # would collide with Stop (also Esc) while a generation runs.
        self.find_edit.installEventFilter(self)
        self.replace_edit.installEventFilter(self)
        self.hide()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Escape:
            self.hide()
            self.editor.setFocus()
            return True
        return super().eventFilter(watched, event)

    def open(self, replace: bool = False) -> None:
        self.show()
        selected = self.editor.textCursor().selectedText()
        if selected and "\u2029" not in selected:
            self.find_edit.setText(selected)
        field = self.replace_edit if replace and self.find_edit.text() else self.find_edit
        field.setFocus()
        field.selectAll()

    def options(self) -> tuple[bool, bool]:
        """(match case, whole words), for the project-wide search."""
        return self.case.isChecked(), self.whole.isChecked()

    def _flags(self, backward: bool = False) -> QTextDocument.FindFlag:
        flags = QTextDocument.FindFlag(0)
        if self.case.isChecked():
            flags |= QTextDocument.FindFlag.FindCaseSensitively
        if self.whole.isChecked():
            flags |= QTextDocument.FindFlag.FindWholeWords
        if backward:
            flags |= QTextDocument.FindFlag.FindBackward
        return flags

    def find_next(self, backward: bool = False) -> bool:
        needle = self.find_edit.text()
        if not needle:
            self.open()
            return False
        if self.editor.find(needle, self._flags(backward)):
            self.status.setText("")
            return True
        if self.next_document is not None:
            self.next_document(backward)
        cursor = self.editor.textCursor()  # the next document's start, or wrap around once
        cursor.movePosition(
            QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start
        )
        self.editor.setTextCursor(cursor)
        found = self.editor.find(needle, self._flags(backward))
        self.status.setText("" if found else "Not found")
        return found

    def _matches(self, selected: str) -> bool:
        needle = self.find_edit.text()
        if self.case.isChecked():
            return selected == needle
        return selected.lower() == needle.lower()

    def replace(self) -> None:
        cursor = self.editor.textCursor()
        if cursor.hasSelection() and self._matches(cursor.selectedText()):
            cursor.insertText(self.replace_edit.text())
        self.find_next()

    def replace_all(self) -> int:
        """Replace every match in one undo step; returns how many were replaced."""
        needle, repl = self.find_edit.text(), self.replace_edit.text()
        if not needle:
            return 0
        doc = self.editor.document()
        cursor = QTextCursor(doc)
        count = 0
        edit = QTextCursor(doc)
        edit.beginEditBlock()
        while True:
            cursor = doc.find(needle, cursor, self._flags())
            if cursor.isNull():
                break
            cursor.insertText(repl)
            count += 1
        edit.endEditBlock()
        self.status.setText(f"Replaced {count}")
        return count

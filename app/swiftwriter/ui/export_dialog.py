"""File > Export…: one dialog for every export. Format (Markdown, Word, EPUB, and ODT or PDF
where LibreOffice is installed), style (novel, report, Standard Manuscript Format), which
documents, chapter page breaks, paper size, a Word template whose styles are used, the title
page (title, author, contact details, and the word count publishers expect) and, shown only
for an EPUB, the e-book's pages around the text (title page, copyright, dedication, back
matter) and language. The choices become one `ExportRequest`, the same the command line
builds; what was typed is kept with the project for the next export."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
)

# docx_out brings python-docx and lxml: loaded with the dialog, on the GUI thread, because
# loading them inside the export's worker held the GIL for a noticeable stall of the window
from swiftwriter.export import docx_out, office  # noqa: F401
from swiftwriter.export.epub_out import default_language
from swiftwriter.export.layout import PageSetup, default_page_size, rounded_word_count
from swiftwriter.export.model import BookMatter
from swiftwriter.export.request import ExportRequest
from swiftwriter.store import ProjectError
from swiftwriter.ui.project_tree import tree_parent
from swiftwriter.words import count_words

FORMAT_NAMES = {"md": "Markdown (.md)", "docx": "Word (.docx)", "epub": "EPUB e-book (.epub)",
                "odt": "OpenDocument (.odt)", "pdf": "PDF (.pdf)"}  # fmt: skip
STYLE_NAMES = {"novel": "Novel", "report": "Report", "manuscript": "Standard Manuscript Format"}
ID_ROLE = Qt.ItemDataRole.UserRole
CONTACT_KEY = "export_contact"  # the project's metadata: the manuscript title page's contact
BACK_TITLE = BookMatter().back_title


class ExportDialog(QDialog):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        project = window.project
        meta = project.meta
        self.setWindowTitle("Export")
        template_row = self._build_look_fields()
        self.title = QLineEdit(meta.get("title") or project.path.stem)
        self.author = QLineEdit(meta.get("author") or "")
        self.contact = QPlainTextEdit(meta.get(CONTACT_KEY) or "")
        self.contact.setPlaceholderText("Name, address, e-mail, phone (manuscript title page)")
        self.contact.setMaximumHeight(80)
        self.book = self._book_pages(meta)
        self.documents = QTreeWidget()
        self.documents.setHeaderHidden(True)
        self._fill_documents()
        self.words = QLabel("")
        self._build_form(template_row)
        self.format.currentIndexChanged.connect(self._update)
        self.style.currentIndexChanged.connect(self._style_changed)
        self.documents.itemChanged.connect(self._update)
        self._update()
        self.resize(560, 640)
        # what is kept with the project when the export starts: each typed field's initial text
        self._typed = {
            "author": self.author.text,
            CONTACT_KEY: self.contact.toPlainText,
            "export_copyright": self.copyright.toPlainText,
            "export_dedication": self.dedication.toPlainText,
            "export_back_title": self.back_title.text,
            "export_back_matter": self.back_matter.toPlainText,
            "export_language": self.language.text,
        }
        self._initial = {key: read().strip() for key, read in self._typed.items()}

    def _build_look_fields(self) -> QHBoxLayout:
        """Format, style, page breaks, paper and Word template; returns the template's row."""
        self.format = QComboBox()
        formats = ["md", "docx", "epub"] + (["odt", "pdf"] if office.soffice() else [])
        for fmt in formats:
            self.format.addItem(FORMAT_NAMES[fmt], fmt)
        self.format.setCurrentIndex(1)
        self.style = QComboBox()
        for style, name in STYLE_NAMES.items():
            self.style.addItem(name, style)
        self.page_breaks = QCheckBox("Start each chapter on a new page")
        self.page_breaks.setChecked(True)
        self.page_size = QComboBox()
        self.page_size.addItem("A4", "a4")
        self.page_size.addItem("Letter", "letter")
        self.page_size.setCurrentIndex(0 if default_page_size() == "a4" else 1)
        self.template = QLineEdit(placeholderText="none: SwiftWriter's own look")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_template)
        template_row = QHBoxLayout()
        template_row.addWidget(self.template, 1)
        template_row.addWidget(browse)
        return template_row

    def _build_form(self, template_row: QHBoxLayout) -> None:
        """The fields in their rows, and Export… / Cancel."""
        form = QFormLayout(self)
        form.addRow("Format", self.format)
        form.addRow("Style", self.style)
        form.addRow("Documents", self.documents)
        form.addRow("", self.page_breaks)
        form.addRow("Paper", self.page_size)
        form.addRow("Template", template_row)
        form.addRow("Title", self.title)
        form.addRow("Author", self.author)
        form.addRow("Contact", self.contact)
        form.addRow("Word count", self.words)
        form.addRow(self.book)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Save).setText("Export…")
        buttons.accepted.connect(self._choose_file)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _book_pages(self, meta: dict) -> QGroupBox:
        """The EPUB's own fields, in a box shown only while EPUB is the format."""
        box = QGroupBox("E-book pages (EPUB)")
        self.title_page = QCheckBox("Title page (title and author)")
        self.title_page.setChecked(True)
        self.language = QLineEdit(meta.get("export_language") or default_language())
        self.language.setPlaceholderText("en, en-GB, pt-BR…")
        self.copyright = QPlainTextEdit(meta.get("export_copyright") or "")
        year = dt.date.today().year
        self.copyright.setPlaceholderText(f"© {year} Your Name. All rights reserved. (a page)")
        self.dedication = QPlainTextEdit(meta.get("export_dedication") or "")
        self.dedication.setPlaceholderText("For… (a page of its own)")
        self.back_title = QLineEdit(meta.get("export_back_title") or BACK_TITLE)
        self.back_matter = QPlainTextEdit(meta.get("export_back_matter") or "")
        self.back_matter.setPlaceholderText("A page after the text: about you, thanks… (Markdown)")
        for field, lines in ((self.copyright, 3), (self.dedication, 2), (self.back_matter, 4)):
            field.setMaximumHeight(field.fontMetrics().lineSpacing() * lines + 14)
        form = QFormLayout(box)
        form.addRow("", self.title_page)
        form.addRow("Language", self.language)
        form.addRow("Copyright", self.copyright)
        form.addRow("Dedication", self.dedication)
        form.addRow("Back matter", self.back_title)
        form.addRow("", self.back_matter)
        return box

    # -- what the writer chose ----------------------------------------------------------------
    def _fill_documents(self) -> None:
        items: dict[int, QTreeWidgetItem] = {}
        for doc in self.window.project.documents():
            item = QTreeWidgetItem([doc.title])
            item.setData(0, ID_ROLE, doc.id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(0, Qt.CheckState.Checked)
            parent = tree_parent(items, doc)
            (parent.addChild(item) if parent else self.documents.addTopLevelItem(item))
            items[doc.id] = item
        self.documents.expandAll()
        self._items = items

    def chosen_ids(self) -> list[int] | None:
        """The checked documents (a checked one takes what is below it); None: all of them."""
        checked = [
            i for i, item in self._items.items() if item.checkState(0) == Qt.CheckState.Checked
        ]
        return None if len(checked) == len(self._items) else checked

    def request(self) -> ExportRequest:
        fmt, style = self.format.currentData(), self.style.currentData()
        return ExportRequest(
            fmt=fmt,
            style=style,
            page_breaks=self.page_breaks.isChecked(),
            page=PageSetup(self.page_size.currentData(), self.contact.toPlainText().strip()),
            template=self.template.text().strip() or None,
            title=self.title.text().strip() or None,
            author=self.author.text().strip() or None,
            matter=BookMatter(
                title_page=self.title_page.isChecked(),
                copyright=self.copyright.toPlainText().strip(),
                dedication=self.dedication.toPlainText().strip(),
                back_title=self.back_title.text().strip(),
                back_matter=self.back_matter.toPlainText().strip(),
            ),
            language=self.language.text().strip(),
        )

    def _style_changed(self) -> None:
        self.page_breaks.setChecked(self.style.currentData() != "report")
        self._update()

    def _update(self) -> None:
        fmt = self.format.currentData()
        word_doc = fmt not in ("md", "epub")  # the style sets their scenes too
        self.book.setVisible(fmt == "epub")
        for widget in (self.page_breaks, self.page_size, self.template, self.contact):
            widget.setEnabled(word_doc)
        self.contact.setEnabled(word_doc and self.style.currentData() == "manuscript")
        chosen = self.chosen_ids()
        docs = self.window.project.documents()
        words = sum(count_words(d.text) for d in docs if chosen is None or d.id in chosen)
        self.words.setText(f"{words:,} ({rounded_word_count(words)} on a manuscript title page)")

    def _browse_template(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Word template", "", "Word (*.docx)")
        if path:
            self.template.setText(path)

    def _choose_file(self) -> None:
        if self.chosen_ids() == []:
            self.words.setText("Tick at least one document to export")
            return
        fmt = self.format.currentData()
        start = str(self.window.project.path.with_suffix(f".{fmt}"))
        path, _ = QFileDialog.getSaveFileName(self, "Export", start, f"*.{fmt}")
        if path:
            self.export_to(path)

    def export_to(self, path: str | Path) -> bool:
        chosen = self.chosen_ids()
        if chosen == []:
            self.words.setText("Tick at least one document to export")
            return False
        if self.window.exchange.export_to(path, self.request(), chosen):
            self._remember_typed()
            self.accept()
            return True
        return False

    def _remember_typed(self) -> None:
        """The author, contact and e-book pages typed here become the project's, so the next
        export (and the command line's author) starts from them instead of an empty field."""
        project = self.window.project
        typed = {key: read().strip() for key, read in self._typed.items()}
        changed = {k: v for k, v in typed.items() if v != self._initial[k]}
        if not changed or project.readonly:
            return
        try:
            project.update_meta(**changed)
        except ProjectError as exc:  # the export goes on; the writer hears why
            self.window.statusBar().showMessage(f"What you typed was not kept: {exc}", 10000)

"""File > Export…: the dialog's choices (format, style, documents, page breaks, paper,
template, title page) reach the file, read back with python-docx."""

from __future__ import annotations

import docx
from PySide6.QtCore import Qt
from swiftwriter.export import office

from tests.export.test_epub_export import NS, read_epub, section_type, text_of

DOCS = (
    ("Chapter 1", "The sea was grey.\n\n#\n\nLater, the wind."),
    ("Chapter 2", "The letter came on Tuesday."),
    ("Notes to self", "Not for the agent."),
)


def test_the_dialogs_choices_reach_the_file(qtbot, window, make_project, tmp_path):
    window.projects.open_project(make_project(docs=DOCS))
    dialog = window.actions_by_name["export"].trigger() or window.findChild(
        __import__("swiftwriter.ui.export_dialog", fromlist=["ExportDialog"]).ExportDialog
    )
    assert dialog is not None and dialog.format.currentData() == "docx"
    assert dialog.page_breaks.isChecked()  # on by default for a novel
    dialog.style.setCurrentIndex(dialog.style.findData("report"))
    assert not dialog.page_breaks.isChecked()  # off by default for a report
    dialog.style.setCurrentIndex(dialog.style.findData("manuscript"))
    assert dialog.page_breaks.isChecked() and dialog.contact.isEnabled()
    dialog._items[window.tree.ids_in_order()[2]].setCheckState(0, Qt.CheckState.Unchecked)
    assert dialog.words.text().startswith("12 (about 100 words")
    dialog.page_size.setCurrentIndex(dialog.page_size.findData("letter"))
    dialog.title.setText("The Grey Sea")
    dialog.author.setText("Elena Marsh")
    dialog.contact.setPlainText("Elena Marsh\nThe Lighthouse, Aldermouth")
    out = tmp_path / "submission.docx"
    with qtbot.waitSignal(window.export_done, timeout=20000) as done:
        assert dialog.export_to(out)
    assert done.args == [str(out)]
    document = docx.Document(str(out))
    texts = [p.text for p in document.paragraphs]
    assert texts[:2] == ["Elena Marsh\tabout 100 words", "The Lighthouse, Aldermouth"]
    assert "The Grey Sea" in texts and "by Elena Marsh" in texts
    assert "Not for the agent." not in texts and "#" in texts  # chosen documents only
    section = document.sections[0]
    assert section.page_width == docx.shared.Inches(8.5)
    assert section.header.paragraphs[0].text.startswith("Marsh / THE GREY SEA / ")
    chapter2 = next(p for p in document.paragraphs if p.text == "Chapter 2")
    assert chapter2.paragraph_format.page_break_before


def test_markdown_and_office_formats(qtbot, window, make_project, tmp_path):
    window.projects.open_project(make_project(docs=DOCS))
    dialog = window.exchange.export_dialog()
    dialog.format.setCurrentIndex(dialog.format.findData("md"))
    assert dialog.style.isEnabled() and not dialog.template.isEnabled()  # it sets scenes
    out = tmp_path / "book.md"
    with qtbot.waitSignal(window.export_done, timeout=20000):
        assert dialog.export_to(out)
    assert "* * *" in out.read_text(encoding="utf-8")
    has_office = office.soffice() is not None
    assert (dialog.format.findData("pdf") >= 0) == has_office  # offered only where it works


def test_no_document_ticked_exports_nothing(qtbot, window, make_project, tmp_path):
    window.projects.open_project(make_project(docs=DOCS))
    dialog = window.exchange.export_dialog()
    for item in dialog._items.values():
        item.setCheckState(0, Qt.CheckState.Unchecked)
    out = tmp_path / "nothing.docx"
    assert not dialog.export_to(out) and not out.exists()
    assert dialog.words.text() == "Tick at least one document to export"


def test_exporting_over_the_open_project_is_refused_and_saves_still_land(
    qtbot, window, make_project, tmp_path, monkeypatch
):
    path = make_project(docs=DOCS)
    window.projects.open_project(path)
    monkeypatch.chdir(tmp_path)
    dialog = window.exchange.export_dialog()
    dialog.format.setCurrentIndex(dialog.format.findData("md"))
    before = path.read_bytes()
    assert not dialog.export_to(path.name)  # the project itself, spelled relative
    assert "the project Novel.swiftwriter itself" in window.last_error
    assert path.read_bytes() == before
    window.project.add_document("Chapter 4", "Saved after the refused export.")
    window.projects.close_project()
    from swiftwriter.store import Project

    with Project.open(path, readonly=True) as proj:
        assert "Chapter 4" in [d.title for d in proj.documents()]


def test_the_author_typed_is_kept_for_the_next_export(qtbot, window, make_project, tmp_path):
    """Typed once, the author (and a manuscript's contact) is the project's from then on: the
    dialog used to open with an empty field every time (issue 63)."""
    path = make_project(docs=DOCS)
    window.projects.open_project(path)
    dialog = window.exchange.export_dialog()
    assert dialog.author.text() == ""
    dialog.author.setText("  Elena Marsh ")
    dialog.contact.setPlainText("Elena Marsh\nThe Lighthouse, Aldermouth")
    with qtbot.waitSignal(window.export_done, timeout=20000):
        assert dialog.export_to(tmp_path / "first.docx")
    window.projects.close_project()
    window.projects.open_project(path)
    again = window.exchange.export_dialog()
    assert again.author.text() == "Elena Marsh"
    assert again.contact.toPlainText() == "Elena Marsh\nThe Lighthouse, Aldermouth"
    again.reject()


def test_an_epub_gets_the_pages_typed_and_keeps_them(qtbot, window, make_project, tmp_path):
    """The e-book's own fields show only for an EPUB; what is typed there reaches the book and
    is the project's at the next export."""
    path = make_project(docs=DOCS)
    window.projects.open_project(path)
    dialog = window.exchange.export_dialog()
    assert dialog.book.isHidden()  # not for a Word document
    dialog.format.setCurrentIndex(dialog.format.findData("epub"))
    assert not dialog.book.isHidden() and not dialog.template.isEnabled()
    dialog._items[window.tree.ids_in_order()[2]].setCheckState(0, Qt.CheckState.Unchecked)
    dialog.author.setText("Elena Marsh")
    dialog.copyright.setPlainText("© 2025 Elena Marsh\nAll rights reserved.")
    dialog.dedication.setPlainText("For the keepers of the light")
    dialog.back_matter.setPlainText("Elena Marsh lives *by the sea*.")
    dialog.language.setText("en-GB")
    out = tmp_path / "book.epub"
    with qtbot.waitSignal(window.export_done, timeout=20000) as done:
        assert dialog.export_to(out)
    assert done.args == [str(out)]
    book = read_epub(out)
    kinds = [section_type(tree) for _, tree in book["spine"]]
    assert kinds == ["titlepage", "copyright-page", "dedication", "chapter", "chapter",
                     "backmatter"]  # fmt: skip
    whole = " ".join(text_of(tree) for _, tree in book["spine"])
    assert "The sea was grey. * * * Later, the wind." in whole  # the writer's '#' break
    assert "Not for the agent." not in whole and "lives by the sea." in whole
    assert book["opf"].xpath("//dc:language/text()", namespaces=NS) == ["en-GB"]
    window.projects.close_project()
    window.projects.open_project(path)
    again = window.exchange.export_dialog()
    assert again.dedication.toPlainText() == "For the keepers of the light"
    assert again.copyright.toPlainText() == "© 2025 Elena Marsh\nAll rights reserved."
    assert (again.language.text(), again.back_title.text()) == ("en-GB", "About the Author")
    again.reject()

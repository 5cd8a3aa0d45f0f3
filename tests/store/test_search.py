"""Project-wide search on plain text: literal phrases, case and whole-word options, tree order,
snippets, and Qt's UTF-16 offsets."""

from __future__ import annotations

from types import SimpleNamespace

from swiftwriter.store.search import find_in_documents, utf16_offset


def docs(*texts):
    return [SimpleNamespace(id=i + 1, title=f"Doc {i + 1}", text=t) for i, t in enumerate(texts)]


def test_matches_in_order_with_options():
    found = find_in_documents(docs("The Sea, the seaside.", "", "a sea (of troubles)"), "sea")
    assert [(m.doc_id, m.start) for m in found] == [(1, 4), (1, 13), (3, 2)]
    assert found[0].snippet == "The [Sea], the seaside."
    whole = find_in_documents(docs("The Sea, the seaside."), "sea", whole_words=True)
    assert [m.start for m in whole] == [4]
    cased = find_in_documents(docs("The Sea, the seaside."), "Sea", case=True)
    assert [m.start for m in cased] == [4]
    assert [m.start for m in find_in_documents(docs("a.b"), ".")] == [1]  # literal, no regex
    assert find_in_documents(docs("anything"), "") == []


def test_snippets_stay_on_the_matching_line():
    (match,) = find_in_documents(docs("first line\nthe storm came\nlast line"), "storm")
    assert match.snippet == "the [storm] came"


def test_offsets_count_characters_beyond_the_basic_plane_twice():
    text = "🌊 the sea"
    (match,) = find_in_documents(docs(text), "sea")
    assert match.start == 6 and utf16_offset(text, match.start) == 7

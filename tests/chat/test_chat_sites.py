"""A chat over every site: the same file ingested into two sites is one source naming both sites."""

from __future__ import annotations

import uuid

import pytest

from rag_core.chat.turn import distinct_passage_hits

SHARED = [
    {"source": "shared/quillfeather-kiln.md", "title": "Quillfeather kiln",
     "text": "The quillfeather kiln is calibrated by heating it to 640 degrees and reading the brass "
             "quillfeather gauge after ten minutes."},
    {"source": "shared/quillfeather-glaze.md", "title": "Quillfeather glaze",
     "text": "Quillfeather glaze is mixed from ash and feldspar and fired in the quillfeather kiln twice."},
]


@pytest.fixture
def two_sites(wb):
    """Two sites that hold the same two files."""
    sites = [f"t-shared-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for site_id in sites:
        assert wb.ingest_texts(SHARED, site_id=site_id).to_dict()["failed"] == 0
    yield sites
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = ANY(%s)", (sites,))
        conn.execute("DELETE FROM chat_sessions WHERE site_id = ANY(%s)", (sites,))


def test_a_passage_in_two_sites_is_one_source_naming_both(wb, two_sites, session_id) -> None:
    turn = wb.chat("How is the quillfeather kiln calibrated?", session_id=session_id)

    passages = [(s.source, s.text) for s in turn.sources]
    assert len(passages) == len(set(passages)), turn.rendered
    assert [s.n for s in turn.sources] == list(range(1, len(turn.sources) + 1))
    kiln = [s for s in turn.sources if s.source == "shared/quillfeather-kiln.md"]
    assert len(kiln) == 1 and sorted(kiln[0].sites) == sorted(two_sites)
    assert kiln[0].to_citation()["sites"] == kiln[0].sites
    assert f"shared/quillfeather-kiln.md (sites: {', '.join(kiln[0].sites)})" in turn.rendered
    # The model is given each passage once too.
    assert [p["source"] for p in turn.context["passages"]].count("shared/quillfeather-kiln.md") == 1


def test_one_site_sources_name_that_site_only(wb, two_sites, session_id) -> None:
    turn = wb.chat("How is the quillfeather kiln calibrated?", session_id=session_id, site_id=two_sites[0])

    assert turn.sources and all(s.sites == [two_sites[0]] for s in turn.sources)
    assert "sites:" not in turn.rendered and "sites" not in turn.sources[0].to_citation()


def test_repeats_across_sites_do_not_take_the_place_of_other_passages(wb, two_sites) -> None:
    hits = distinct_passage_hits(wb.store, "quillfeather kiln glaze", k=2, site_id=None)

    assert {h.source for h in hits} == {s["source"] for s in SHARED}
    assert {h.site_id for h in hits} == set(two_sites)

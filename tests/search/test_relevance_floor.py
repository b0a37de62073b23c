"""The relevance floor: hybrid results, totals and facets count only documents that match."""

from __future__ import annotations

from rag_core.providers.calibration import SCALES
from rag_core.search.hybrid import cosine_floor
from rag_core.search.service import SearchEngine

TOPICS = [
    "The quarterly budget report lists salaries, rent and travel costs.",
    "Tomatoes grow best in warm soil with plenty of sunlight and water.",
    "The football team trained twice a week before the championship.",
    "A violin has four strings tuned in perfect fifths.",
    "Glaciers carve deep valleys as they move slowly downhill.",
    "The recipe calls for flour, butter, sugar and two eggs.",
    "Railway timetables changed after the new tunnel opened.",
    "Owls hunt at night and swallow small prey whole.",
    "The museum opened a new wing for medieval tapestries.",
    "Printers jam when the paper is damp or folded.",
    "Volcanic islands form where magma rises through the ocean floor.",
    "The chess tournament ended in a draw after six hours.",
    "Bees communicate the direction of flowers by dancing.",
]


def _engine(wb, make_settings, **overrides) -> SearchEngine:
    return SearchEngine(wb.db, make_settings(**overrides), lambda: wb.embedder, wb.store.require_compatible)


def test_one_matching_document_is_one_result(wb, site, make_settings) -> None:
    records = [{"source": f"topic{i}.md", "title": f"Note {i}", "text": t} for i, t in enumerate(TOPICS)]
    records.append({"source": "metal.md", "title": "Metals", "text": "Zirconium resists corrosion in reactors."})
    assert wb.ingest_texts(records, site_id=site).to_dict()["failed"] == 0
    floored = _engine(wb, make_settings).search("zirconium", site_id=site, use_cache=False)
    assert floored["total_results"] == 1
    assert [r["file_path"] for r in floored["results"]] == ["metal.md"]
    assert sum(floored["facets"]["document_types"].values()) == 1
    # Without a floor every dense candidate counts: the 13 unrelated notes come back too.
    unfloored = _engine(wb, make_settings, search_cosine_floor=-1.0).search("zirconium", site_id=site, use_cache=False)
    assert unfloored["total_results"] == 14
    assert sum(unfloored["facets"]["document_types"].values()) == 14
    # A question with no shared word still finds its document through the embedding.
    semantic = _engine(wb, make_settings).search("How do honey insects tell their hive about blossoms?", site_id=site,
                                                 use_cache=False)
    assert "topic12.md" in [r["file_path"] for r in semantic["results"]]


def test_floor_comes_from_the_embedder_unless_set() -> None:
    assert cosine_floor("use-multilingual") == SCALES["use-multilingual"].chat_floor == 0.3
    assert cosine_floor("e5-small") == SCALES["e5-small"].chat_floor   # e5's cosines sit in a high band
    assert cosine_floor("e5-small") > 0.8
    assert cosine_floor("use-multilingual", 0.5) == 0.5
    assert cosine_floor("an-embedder-without-a-calibrated-floor") is None

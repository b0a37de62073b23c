"""Each embedder's cosine scale: the chat floor and the relevance users see, in one place."""

from __future__ import annotations

from rag_core.search.types import Citation
from rag_core.providers.calibration import CosineScale, chat_floor, cosine_scale
from rag_core.providers.embeddings import EMBEDDERS
from rag_core.search.types import ChunkHit
from rag_core.settings import RagSettings


def _settings(**overrides) -> RagSettings:
    return RagSettings(database_url="postgresql://unused/x", _env_file=None, **overrides)


def test_the_scale_reads_zero_half_and_full_and_clips() -> None:
    scale = CosineScale(zero=0.72, half=0.8, full=0.88, chat_floor=0.8)
    assert [scale.relevance(c) for c in (0.5, 0.72, 0.76, 0.8, 0.84, 0.88, 0.95)] == [0, 0, 0.25, 0.5, 0.75, 1, 1]
    assert not scale.is_identity and CosineScale().is_identity


def test_use_multilingual_reads_as_before_and_e5_small_spreads_its_narrow_band() -> None:
    use, e5 = cosine_scale("use-multilingual"), cosine_scale("e5-small")
    assert use.relevance(0.42) == 0.42 and use.chat_floor == 0.3
    # e5-small: the best passage of an unrelated collection (cosine ~0.79) must not read as a match
    assert e5.relevance(0.79) == 0.0 and e5.relevance(0.95) == 1.0 and e5.relevance(e5.half) == 0.5
    assert e5.zero < e5.chat_floor < e5.half
    assert cosine_scale("openai:text-embedding-3-small").is_identity
    assert set(("use-multilingual", "e5-small")) <= set(EMBEDDERS)


def test_the_chat_floor_follows_the_embedder_unless_set() -> None:
    assert chat_floor(_settings()) == cosine_scale("e5-small").chat_floor  # the default embedder's
    assert chat_floor(_settings(embedder="use-multilingual")) == 0.3
    assert chat_floor(_settings(embedder="e5-small")) == cosine_scale("e5-small").chat_floor
    assert chat_floor(_settings(embedder="e5-small", chat_similarity_floor=0.5)) == 0.5


def test_a_source_shows_the_calibrated_percentage_and_keeps_it_in_its_citation() -> None:
    hit = ChunkHit(chunk_id=1, document_id=2, site_id="s", source="a.md", title="A", file_type="md", text="t",
                   chunk_index=0, start_char=0, end_char=1, page_number=None, similarity=0.83, score=0.5)
    e5 = Citation.from_hit(1, hit, cosine_scale("e5-small"))
    assert e5.similarity_pct == 25.0 and e5.similarity == 0.83
    assert Citation.from_citation(e5.to_citation()).similarity_pct == 25.0
    use = Citation.from_hit(1, hit, cosine_scale("use-multilingual"))
    assert use.similarity_pct == 83.0 and "relevance" not in use.to_citation()


def test_e5_small_has_its_own_measured_fusion_and_other_embedders_keep_the_default() -> None:
    from rag_core.search.hybrid import DEFAULT_FUSION, fusion_for

    e5 = fusion_for("e5-small")
    assert e5 != DEFAULT_FUSION
    assert fusion_for("use-multilingual") == DEFAULT_FUSION == fusion_for("openai:text-embedding-3-small")
    # the search engine every surface uses picks it up from the configured embedder
    from rag_core.workbench import Workbench

    wb = Workbench(_settings(embedder="e5-small"), None, "", False)  # no query runs: no database needed
    from dataclasses import replace

    from rag_core.providers.calibration import SCALES

    assert replace(wb.search_engine.fusion, cosine_floor=None) == e5
    assert wb.search_engine.fusion.cosine_floor == SCALES["e5-small"].chat_floor   # its relevance floor too

"""Distinct sentence windows for the 1M-chunk benchmark: every window real text, none stored twice."""

from __future__ import annotations

import json
from pathlib import Path

from rag_core.bench.scale import distinct_windows, text_units, window_records

DOCS = [
    {"_id": "d1", "title": "Fire safety", "text": "Exits stay clear at all times. Doors open outward; locks need no key."},
    {"_id": "d2", "title": "Ventilation", "text": "Fans run at night. Exits stay clear at all times."},
    {"_id": "d3", "title": "Copy", "text": "EXITS stay  clear at all times."},
]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def test_units_split_at_sentence_and_clause_ends() -> None:
    assert text_units(DOCS[0]["text"]) == ["Exits stay clear at all times.", "Doors open outward;",
                                           "locks need no key."]
    assert text_units("東京は大きい。人が多い！本当？", japanese=True) == ["東京は大きい。", "人が多い！", "本当？"]


def test_every_window_is_distinct_and_fits_one_chunk() -> None:
    windows = list(distinct_windows(DOCS, "scifact", max_chars=80))
    keys = [_norm(w["text"]) for w in windows]
    assert len(keys) == len(set(keys)), "a text made twice would be a near-duplicate in the HNSW recall figure"
    assert all(20 <= len(w["text"]) <= 80 for w in windows)
    # the repeated sentence of d2 and the case/spacing variant in d3 are not made again
    assert sum(k == "exits stay clear at all times." for k in keys) == 1
    # windows of 1, 2 and 3 units from the first position, the widest within the limit
    assert [w["text"] for w in windows[:3]] == [
        "Exits stay clear at all times.", "Exits stay clear at all times. Doors open outward;",
        "Exits stay clear at all times. Doors open outward; locks need no key."]
    assert len({w["id"] for w in windows}) == len(windows)


def test_windows_run_on_into_the_next_document_and_keep_their_first_title() -> None:
    windows = list(distinct_windows(DOCS, "scifact", max_chars=200))
    crossing = [w for w in windows if w["text"] == "locks need no key. Fans run at night."]
    assert len(crossing) == 1 and crossing[0]["cross_document"] and crossing[0]["title"] == "Fire safety"
    assert not windows[0]["cross_document"]


def test_seen_texts_are_shared_across_sets_and_japanese_joins_without_spaces() -> None:
    seen: set[str] = set()
    first = list(distinct_windows(DOCS[:1], "scifact", max_chars=200, seen=seen))
    again = list(distinct_windows(DOCS[:1], "ru_construction", max_chars=200, seen=seen))
    assert first and not again
    ja = list(distinct_windows([{"_id": "a1", "title": "東京", "text": "東京は日本の首都である。人口は約千四百万人である。"}],
                               "jsquad", max_chars=200, min_chars=5))
    assert "東京は日本の首都である。人口は約千四百万人である。" in [w["text"] for w in ja]


def test_the_draw_is_storable_distinct_and_stops_at_what_exists(tmp_path: Path) -> None:
    for name, text in (("ru_construction", "Стены из бетона.\x00 Плиты перекрытия из бетона."),
                       ("scifact", DOCS[0]["text"]), ("jsquad", "東京は日本の首都である。人口は約千四百万人である。")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "corpus.jsonl").write_text(
            json.dumps({"_id": "d1", "title": "t", "text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
        (tmp_path / name / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "q"}) + "\n", encoding="utf-8")
        (tmp_path / name / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    records, stats = window_records(1000, max_chars=200, root=tmp_path)
    assert all("\x00" not in r["text"] for r in records), "PostgreSQL refuses a NUL: such a window would be lost"
    assert len(records) == stats["distinct windows available"] < 1000
    assert len({_norm(r["text"]) for r in records}) == len(records)
    assert window_records(1000, max_chars=200, root=tmp_path)[0] == records  # a resumed build draws the same

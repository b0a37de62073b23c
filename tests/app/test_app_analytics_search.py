"""Analytics counts what people typed and scores search on the user's own judged queries; the Search
page's smaller promises (hints, plurals, limits, related queries, downloads of every result)."""

from __future__ import annotations

import datetime as dt
import json

from test_app_pages import assert_clean, open_app, result_titles

import app_ui


def popular(wb, site: str) -> dict[str, int]:
    return {q["query"]: q["count"] for q in wb.search_metrics(site_id=site)["popular_queries"]}


def test_popular_queries_count_what_was_typed_not_page_or_filter_clicks(app_wb, app_site) -> None:
    for i in range(7):
        app_wb.ingest_text(f"notes/valve-{i}.md", f"Valve inspection record {i}: the seal was replaced.",
                           site_id=app_site, file_type="md", title=f"valve {i}")
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("valve seal inspection").run()
    at.select_slider(key="search_limit").set_value(5).run()  # a filter change: the same words again
    at.button(key="search_next").click().run()                # a page click
    at.radio(key="search_mode").set_value("fulltext").run()   # a mode change
    assert_clean(at)
    app_wb.flush_search_log()
    counts = popular(app_wb, app_site)
    assert counts == {"valve seal inspection": 1}, counts
    metrics = app_wb.search_metrics(site_id=app_site)
    assert metrics["typed_searches"] == 1 and metrics["searches"] >= 4

    at.text_input(key="search_query").input("seal replaced").run()  # new words: a new search
    app_wb.flush_search_log()
    assert popular(app_wb, app_site)["seal replaced"] == 1


def test_a_search_empty_only_by_its_date_filter_is_no_zero_result_query(app_wb, app_site) -> None:
    app_wb.ingest_text("notes/gasket.md", "Gasket torque values.", site_id=app_site, file_type="md")
    future = dt.date.today() + dt.timedelta(days=400)
    assert app_wb.search("gasket torque", site_id=app_site, date_from=future)["total_results"] == 0
    assert app_wb.search("zzqy nothing like it", site_id=app_site, mode="fulltext")["total_results"] == 0
    app_wb.flush_search_log()
    metrics = app_wb.search_metrics(site_id=app_site)
    assert [q["query"] for q in metrics["zero_result_queries"]] == ["zzqy nothing like it"]
    assert metrics["zero_results"] == 1


def test_judged_queries_from_the_search_page_and_a_file_are_evaluated_on_the_analytics_page(app_wb, app_site) -> None:
    app_wb.ingest_text("manuals/boiler.md", "The boiler pressure relief valve opens at 3 bar.", site_id=app_site,
                       file_type="md", title="Boiler")
    app_wb.ingest_text("manuals/chiller.md", "The chiller compressor oil is changed yearly.", site_id=app_site,
                       file_type="md", title="Chiller")
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("boiler relief valve pressure").run()
    assert result_titles(at)[0].endswith("Boiler")
    at.button(key="judge_1").click().run()
    assert_clean(at)
    assert at.button(key="judge_1").label == "Relevant"  # the hit shows its judgement
    judged = app_wb.judged_queries(app_site)
    assert judged["items"] == [{"id": judged["items"][0]["id"], "query": "boiler relief valve pressure",
                                "relevant": ["manuals/boiler.md"], "deleted": []}]

    at.switch_page("app_pages/analytics.py").run()
    assert_clean(at)
    assert any(s.value == "Developers' benchmark sets" for s in at.subheader)
    queries = "\n".join(json.dumps(q) for q in ({"_id": "c1", "text": "chiller compressor oil"},
                                                 {"_id": "c2", "text": "when does the relief valve open"}))
    qrels = "query-id\tcorpus-id\tscore\nc1\tmanuals/chiller.md\t1\nc2\tmanuals/boiler.md\t1\n"
    at.file_uploader(key="judged_queries_file").set_value([("queries.jsonl", queries.encode(), "application/json")])
    at.file_uploader(key="judged_qrels_file").set_value([("qrels.tsv", qrels.encode(), "text/tab-separated-values")])
    at.run()
    at.button(key="judged_import").click().run()
    assert_clean(at)
    assert app_wb.judged_queries(app_site)["queries"] == 3
    at.button(key="judged_run").click().run()
    assert_clean(at)
    table = next(t.value for t in at.dataframe if "ndcg@10" in t.value.columns and "evaluated" in t.value.columns)
    row = table.to_dict("records")[0]
    assert row["mode"] == "hybrid" and row["queries"] == 3 and row["hit@5"] == 1.0
    app_wb.flush_search_log()
    assert "chiller compressor oil" not in popular(app_wb, app_site)  # the evaluation's searches are not typed
    # The set is a BEIR folder: the CLI's runner reads it as it is.
    from rag_core.evaluation.datasets import load_beir

    ds = load_beir(judged["folder"])
    assert len(ds.judged_queries) == 3 and {d["_id"] for d in ds.corpus} == {"manuals/boiler.md", "manuals/chiller.md"}


def test_an_upload_naming_unknown_documents_is_refused_with_the_fix(app_wb, app_site) -> None:
    import pytest

    from rag_core.errors import InvalidInput

    app_wb.ingest_text("manuals/pump.md", "Pump text.", site_id=app_site, file_type="md")
    with pytest.raises(InvalidInput, match="Sources table"):
        app_wb.import_judged_queries(b"q1\tpump\n", b"q1\tmanuals/nope.md\t1\n", site_id=app_site)
    with pytest.raises(InvalidInput, match="queries file lacks"):
        app_wb.import_judged_queries(b"q1\tpump\n", b"q9\tmanuals/pump.md\t1\n", site_id=app_site)


def test_search_page_hints_plurals_limits_and_related_queries(app_wb, app_site) -> None:
    app_wb.ingest_text("notes/impeller.md", "The impeller of the feed pump is balanced yearly.", site_id=app_site,
                       file_type="md", title="impeller")
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("impeller balanced").run()
    assert any(m.value.startswith("**1 document**") for m in at.markdown)
    at.multiselect(key="search_types").select("pdf").run()  # no PDF here: nothing matches
    assert_clean(at)
    empty = [i.value for i in at.info if i.value.startswith("No documents match")]
    assert empty and "Hybrid mode" not in empty[0]  # already in Hybrid
    at.radio(key="search_mode").set_value("fulltext").run()
    assert any("Hybrid mode" in i.value for i in at.info if i.value.startswith("No documents match"))

    at.multiselect(key="search_types").unselect("pdf")
    at.radio(key="search_mode").set_value("hybrid").run()
    at.text_input(key="search_query").input("feed pump impeller").run()
    app_wb.flush_search_log()
    at.text_input(key="search_query").input("impeller").run()  # an earlier query shares a word
    related = [b for b in at.button if b.key and b.key.startswith("search_related_")]
    assert related and all(not b.label.lower().startswith("impeller ") for b in related)
    label = related[0].label
    related[0].click().run()  # a click searches for it
    assert at.text_input(key="search_query").value == label


def test_related_queries_drop_the_query_with_a_word_added() -> None:
    assert app_ui.related_queries("pump seal", ["pump seal leak", "valve seal", "Pump Seal", ""]) == ["valve seal"]


def test_the_uploader_states_the_stores_file_limit(empty_db_url, monkeypatch) -> None:
    monkeypatch.setenv("RAG_MAX_FILE_MB", "7")
    app_ui.workbench.clear()
    at = open_app()
    at.switch_page("app_pages/ingestion.py").run()
    assert at.get("file_uploader")[0].proto.max_upload_size_mb == 7


def test_downloads_hold_every_result_up_to_the_cap(app_wb, app_site) -> None:
    for i in range(8):
        app_wb.ingest_text(f"notes/filter-{i}.md", f"Air filter change log {i}.", site_id=app_site, file_type="md")
    params = {"query": "air filter change log", "mode": "hybrid", "limit": 5, "site_id": app_site}
    everything = app_ui.all_results(app_wb, params, page_size=3)
    assert len(everything) == 8 and len({r["file_path"] for r in everything}) == 8
    assert len(app_ui.all_results(app_wb, params, cap=6, page_size=3)) == 6
    app_wb.flush_search_log()
    assert "air filter change log" not in popular(app_wb, app_site)  # downloads are no typed searches


def test_a_query_past_the_length_limit_is_refused_with_a_message(app_wb, app_site, cli_env) -> None:
    """A pasted query over the limit is refused, saying the limit, on every surface: never cut short or emptied
    without a word (the Search page's box used to drop a paste past 500 characters)."""
    from typer.testing import CliRunner

    from rag_core.cli import app
    from rag_core.errors import InvalidInput

    app_wb.ingest_text("notes/valves.md", "Valves are checked every spring.", site_id=app_site, file_type="md")
    pasted = ("valves checked every spring " * 25)[:612]
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input(pasted).run()
    assert at.text_input(key="search_query").value == pasted  # the words stay in the box, whole
    assert any("Query is 612 characters; the limit is 500." in e.value for e in at.error)

    at.switch_page("app_pages/chat.py").run()
    at.chat_input[0].set_value("x" * 8_001).run()
    assert any("8001" in e.value.replace(",", "") and "8000" in e.value.replace(",", "") for e in at.error)

    result = CliRunner().invoke(app, ["search", pasted, "--site", app_site])
    assert result.exit_code != 0 and "Query is 612 characters; the limit is 500." in result.output

    import pytest

    with pytest.raises(InvalidInput, match="queries line 1 is 612 characters; the limit of a query is 500"):
        app_wb.import_judged_queries(f"q1\t{pasted}\n".encode(), b"q1\tnotes/valves.md\t1\n", site_id=app_site)


def bar_values(trace: dict) -> list[float]:
    """A bar trace's heights from the figure JSON (plotly writes arrays as typed base64 data)."""
    import base64

    import numpy as np

    y = trace["y"]
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"])).tolist()
    return list(y)


def test_analytics_totals_agree_with_its_charts(app_wb, app_site) -> None:
    """The tiles and the charts beside them come from one read of the query log: the Searches tile is the
    sum of the typed bars, all bars make every search, and the latency chart holds the searches that ran."""
    app_wb.ingest_text("notes/seals.md", "Pump seals are replaced every second year.", site_id=app_site, file_type="md")
    for words in ("pump seals", "seal replacement interval"):
        app_wb.search(words, site_id=app_site, typed=True)
    for page in (1, 2, 3):
        app_wb.search("pump seals", site_id=app_site, page=page, typed=False)  # clicks repeating a search
    app_wb.flush_search_log()
    metrics = app_wb.search_metrics(site_id=app_site)
    at = open_app(app_site)
    at.switch_page("app_pages/analytics.py").run()
    assert_clean(at)
    tiles = {m.label: m.value for m in at.metric}
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    volume = next(c for c in charts if "volume" in c["layout"]["title"]["text"].lower())
    latency = next(c for c in charts if "latency" in c["layout"]["title"]["text"].lower())
    assert int(tiles["Searches"]) == metrics["typed_searches"] == 2
    assert sum(bar_values(volume["data"][0])) == int(tiles["Searches"])  # the tile counts the first bars
    assert sum(sum(bar_values(trace)) for trace in volume["data"]) == metrics["searches"] == 5
    assert sum(bar_values(latency["data"][0])) == metrics["searches"] - metrics["errors"]
    assert f"{metrics['searches'] - metrics['errors']:,} searches" in latency["layout"]["title"]["text"]


def test_judged_queries_whose_source_was_deleted_are_flagged_and_not_counted_as_misses(app_wb, app_site) -> None:
    app_wb.ingest_text("manuals/boiler.md", "The boiler relief valve opens at 3 bar.", site_id=app_site,
                       file_type="md", title="Boiler")
    app_wb.ingest_text("manuals/chiller.md", "The chiller compressor oil is changed yearly.", site_id=app_site,
                       file_type="md", title="Chiller")
    app_wb.mark_relevant("boiler relief valve", "manuals/boiler.md", site_id=app_site)
    app_wb.mark_relevant("chiller compressor oil", "manuals/chiller.md", site_id=app_site)
    app_wb.mark_relevant("relief valve and compressor oil", "manuals/chiller.md", site_id=app_site)
    app_wb.mark_relevant("relief valve and compressor oil", "manuals/boiler.md", site_id=app_site)
    app_wb.delete_source("manuals/chiller.md", site_id=app_site)

    judged = app_wb.judged_queries(app_site)
    assert judged["deleted_sources"] == 1
    assert {i["query"]: i["deleted"] for i in judged["items"]} == {
        "boiler relief valve": [], "chiller compressor oil": ["manuals/chiller.md"],
        "relief valve and compressor oil": ["manuals/chiller.md"]}

    at = open_app(app_site)
    at.switch_page("app_pages/analytics.py").run()
    assert_clean(at)
    assert any("2 judged queries name relevant sources deleted" in w.value for w in at.warning)
    flagged = next(t.value for t in at.dataframe if "deleted sources" in t.value.columns).to_dict("records")
    assert {r["query"] for r in flagged} == {"chiller compressor oil", "relief valve and compressor oil"}
    at.button(key="judged_run").click().run()
    assert_clean(at)
    result = app_wb.judged_results(app_site)[0]
    # The query left with no stored source is reported, not scored as a miss; the other one is scored on the rest.
    assert result["queries"] == 2 and result["hit@5"] == 1.0
    assert {(d["query"], d["scored"]) for d in result["deleted_judgements"]} == {
        ("chiller compressor oil", False), ("relief valve and compressor oil", True)}
    assert any("Not scored: 1 query" in c.value and "chiller compressor oil" in c.value for c in at.caption)

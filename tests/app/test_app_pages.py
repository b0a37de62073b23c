"""AppTest over every page's main flows, on the test database, through the app's own Workbench."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import app_ui
from rag_core.security.ids import SAMPLE_SITE
from rag_core.ingest.sample import sample_corpus_paths

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("app_pages/chat.py", "app_pages/search.py", "app_pages/ingestion.py", "app_pages/retention.py", "app_pages/analytics.py")


def open_app(site: str | None = None) -> AppTest:
    """The app on its first page, scoped to one site."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    if site:
        at.session_state["site"] = site
    at.run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    """No exception element and no error box on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def result_titles(at: AppTest) -> list[str]:
    """The bold titles of the search results on the page ('**1. title**')."""
    return [m.value.split("**")[1] for m in at.markdown if m.value.startswith("**") and ". " in m.value.split("**")[1]
            and m.value.split("**")[1].split(". ")[0].isdigit()]


def test_filtered_search_pages_and_explains_hits(app_wb, app_site) -> None:
    for i in range(7):
        app_wb.ingest_text(f"notes/pump-{i}.md", f"Pump maintenance schedule number {i}: check the impeller.",
                           site_id=app_site, file_type="md", title=f"pump md {i}")
    app_wb.ingest_text("notes/pump.txt", "Pump maintenance schedule as plain text: check the impeller.",
                       site_id=app_site, file_type="txt", title="pump txt")
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("pump maintenance impeller").run()
    assert_clean(at)
    assert "pump txt" in " ".join(result_titles(at))
    assert any("**8 documents**" in m.value for m in at.markdown)

    at.multiselect(key="search_types").select("md").run()
    at.select_slider(key="search_limit").set_value(5).run()
    assert_clean(at)
    titles = result_titles(at)
    assert len(titles) == 5 and all("pump md" in t for t in titles)
    assert any("Page **1** of **2**" in m.value for m in at.markdown)
    # "Why this hit" shows both rankings and the fused score of the best result.
    assert any("dense rank **" in m.value and "full-text rank **" in m.value and "fused score" in m.value
               for m in at.markdown)

    at.button(key="search_next").click().run()
    assert_clean(at)
    second = result_titles(at)
    assert len(second) == 2 and not set(second) & set(titles)
    assert {b.label for b in at.get("download_button")} >= {"JSON", "CSV"}


def test_search_error_is_a_message_not_a_traceback(app_wb, app_site) -> None:
    app_wb.ingest_text("notes/a.md", "Something to search.", site_id=app_site, file_type="md")
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.date_input(key="search_from").set_value(dt.date(2024, 5, 1))
    at.date_input(key="search_to").set_value(dt.date(2024, 1, 1))
    at.text_input(key="search_query").input("something").run()
    assert not at.exception
    assert any("after date_to" in e.value and "INVALID_QUERY" in e.value for e in at.error)


def test_chat_turn_shows_sources_and_replays_them(app_wb, app_site) -> None:
    app_wb.ingest_text("guide/hybrid.md", "Hybrid search fuses full-text BM25 ranks with dense vector ranks. "
                       "The fused score orders the documents.", site_id=app_site, file_type="md")
    at = open_app(app_site)
    at.chat_input[0].set_value("What does hybrid search fuse?").run()
    assert_clean(at)
    assistant = [m for m in at.chat_message if m.name == "assistant"]
    assert len(assistant) == 1
    answer = assistant[0].markdown[0].value
    assert "BM25" in answer and "[1]" in answer
    panel = assistant[0].expander[0]
    assert panel.label == "Sources (1)"
    assert any("guide/hybrid.md" in m.value for m in panel.markdown)
    assert "[1] " in panel.get("progress")[0].text  # the similarity bar of source 1

    # A new run replays the conversation from the database with the same sources, and lists the session.
    at.run()
    assert_clean(at)
    replayed = [m for m in at.chat_message if m.name == "assistant"]
    assert replayed and replayed[0].expander[0].label == "Sources (1)"
    picker = at.selectbox(key="chat_session_pick")
    assert "What does hybrid search fuse?" in picker.format_func(picker.value)

    at.button(key="chat_reset").click().run()  # Reset asks first; the confirmation deletes the session
    at.button(key="chat_reset_yes").click().run()
    assert_clean(at)
    assert not [m for m in at.chat_message if m.name == "assistant"]


def test_a_chat_over_every_site_shows_a_passage_held_by_two_sites_once_naming_both(app_wb, app_site) -> None:
    other = app_site + "-b"
    text = ("The quillfeather kiln is calibrated by heating it to 640 degrees and reading the brass "
            "quillfeather gauge after ten minutes.")
    try:
        for site_id in (app_site, other):
            app_wb.ingest_text("shared/quillfeather-kiln.md", text, site_id=site_id, file_type="md")
        at = open_app()  # "All sites"
        at.chat_input[0].set_value("How is the quillfeather kiln calibrated?").run()
        assert_clean(at)
        panel = [m for m in at.chat_message if m.name == "assistant"][0].expander[0]
        kiln = [m.value for m in panel.markdown if "quillfeather-kiln.md" in m.value]
        assert len(kiln) == 1, kiln
        shown = kiln[0].split(" · sites: ")[1]
        assert sorted(shown.split(", ")) == sorted(app_ui.md_text(s) for s in (app_site, other))
    finally:
        with app_wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = %s", (other,))
            conn.execute("DELETE FROM chat_sessions WHERE site_id IS NULL AND title LIKE %s", ("%quillfeather%",))
        app_wb.store.after_write()


def test_uploaded_files_are_ingested_and_listed(app_wb, app_site) -> None:
    at = open_app(app_site)
    at.switch_page("app_pages/ingestion.py").run()
    at.file_uploader(key="upload_files").set_value([
        ("upload-one.md", "# Turbines\n\nThe turbine blade inspection happens yearly.".encode(), "text/markdown"),
        ("upload-two.txt", "Gearbox oil is changed every 4000 hours.".encode(), "text/plain"),
        ("bad.exe", b"MZ", "application/octet-stream"),
    ]).run()
    at.button(key="upload_go").click().run()
    assert not at.exception
    outcome = {row["source"]: row["status"] for row in at.dataframe[0].value.to_dict("records")}
    assert outcome["upload-one.md"] == "indexed" and outcome["upload-two.txt"] == "indexed"
    assert outcome["bad.exe"] == "failed"
    assert any("bad.exe" in w.value and "unsupported" in w.value for w in at.warning)
    stored = {d["source"]: d for d in app_wb.documents(site_id=app_site)}
    assert stored["upload-one.md"]["chunk_count"] >= 1 and "bad.exe" not in stored
    # The search of the same app finds it at once (its cache was cleared by the write).
    hits = app_wb.search("turbine blade inspection", site_id=app_site)
    assert hits["results"][0]["file_path"] == "upload-one.md"


def test_dry_run_counts_and_confirmed_purge_deletes(app_wb, app_site) -> None:
    session = f"old-{app_site}"
    app_wb.chat_append(session, "user", "An ancient question")
    app_wb.chat_append(session, "assistant", "An ancient answer")
    with app_wb.db.connection() as conn:  # age the messages beyond a 3000-day purge, which nothing else reaches
        conn.execute("UPDATE chat_messages SET created_at = now() - interval '3100 days' WHERE session_id = %s",
                     (session,))
        conn.execute("UPDATE chat_sessions SET site_id = %s WHERE id = %s", (app_site, session))
    at = open_app(app_site)
    at.switch_page("app_pages/retention.py").run()
    assert_clean(at)
    at.number_input(key="purge_days").set_value(3000).run()
    at.button(key="purge_dry").click().run()
    assert_clean(at)
    preview = [i.value for i in at.info if "would delete" in i.value]
    assert preview and "**2 messages**" in preview[0] and "**1 session**" in preview[0]
    assert len(app_wb.chat_history(session)) == 2  # a dry run deletes nothing
    assert at.button(key="purge_go").disabled  # the purge waits for the confirmation

    at.checkbox(key="purge_confirm").check().run()
    at.button(key="purge_go").click().run()
    assert_clean(at)
    assert any("Deleted 2 messages and 1 session " in s.value for s in at.success)
    assert app_wb.chat_history(session) == []
    audit = at.dataframe[-1].value.to_dict("records")
    assert not audit[0]["dry run"] and audit[0]["messages"] == 2 and audit[0]["by"] == "app"
    assert audit[1]["dry run"] and audit[1]["messages"] == 2


def test_analytics_shows_search_figures_and_evaluation_targets(app_wb, app_site, tmp_path, monkeypatch) -> None:
    app_wb.ingest_text("notes/x.md", "Valves and pipes.", site_id=app_site, file_type="md")
    app_wb.search("valves", site_id=app_site)
    app_wb.search("zzqx nothing matches", site_id=app_site, mode="fulltext")
    at = open_app(app_site)
    at.switch_page("app_pages/analytics.py").run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Searches"] == "2" and metrics["Zero results"] == "1"
    tables = [t.value for t in at.dataframe]
    assert any("zzqx nothing matches" in set(t.get("query", [])) for t in tables)
    evaluation = tables[-1]
    assert set(evaluation["set"]) >= {"scifact"} and "hit@5 > 0.85" in evaluation.columns

    monkeypatch.setattr(app_ui, "EVAL_RESULTS", tmp_path / "none")
    app_ui.evaluation_results.clear()
    at.run()
    assert any("make eval" in i.value for i in at.info)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_an_empty_database(empty_db_url, page) -> None:
    at = open_app()
    at.switch_page(page).run()
    assert_clean(at)
    if page in ("app_pages/chat.py", "app_pages/search.py", "app_pages/ingestion.py"):
        assert any(b.label == "Index the sample corpus" for b in at.button)


def test_first_run_sample_corpus_answers_a_help_question(empty_db_url) -> None:
    at = open_app()
    next(b for b in at.button if b.label == "Index the sample corpus").click().run()
    assert_clean(at)
    # The page redrew with the new documents: the summary on top, no first-run offer, the sidebar counts.
    assert any(f"{len(sample_corpus_paths())} indexed, 0 updated" in s.value for s in at.success)
    assert not any(b.label == "Index the sample corpus" for b in at.button)
    assert any(c.value.startswith(f"{len(sample_corpus_paths())} documents") for c in at.sidebar.caption)
    at.chat_input[0].set_value("How do I connect to my own PostgreSQL server?").run()
    assert_clean(at)
    reply = [m for m in at.chat_message if m.name == "assistant"][-1]
    assert "DATABASE_URL" in reply.markdown[0].value
    assert any("docs/getting-started.md" in m.value for m in reply.expander[0].markdown)
    # The sample went into a site of its own, which the picker opened; it is never among "All sites".
    assert at.session_state["site"] == SAMPLE_SITE
    at.selectbox(key="site").set_value(app_ui.ALL_SITES).run()
    assert_clean(at)
    assert any(c.value.startswith("0 documents") for c in at.sidebar.caption)
    # One click in the sample's site removes it.
    at.selectbox(key="site").set_value(SAMPLE_SITE).run()
    at.button(key="sample_remove").click().run()
    assert_clean(at)
    assert app_ui.workbench().status(SAMPLE_SITE)["documents"] == 0
    assert any("Removed the sample corpus" in t.value for t in at.toast)
    assert at.session_state["site"] == app_ui.ALL_SITES


def test_a_bad_setting_is_a_message_on_every_page(empty_db_url, monkeypatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDER", "no-such-embedder")
    app_ui.workbench.clear()  # reopen with the bad setting
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception
        assert any("no-such-embedder" in e.value and "CONFIG_ERROR" in e.value for e in at.error), page
        assert any("DATABASE_URL" in i.value for i in at.info)


def test_server_folder_and_crawl_from_the_ingestion_page(empty_db_url, monkeypatch, tmp_path) -> None:
    from crawl_server import serve

    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "127.0.0.1")
    monkeypatch.setenv("RAG_ALLOW_PRIVATE_NETWORKS", "true")
    monkeypatch.setenv("RAG_CRAWL_DELAY_SEC", "0.05")
    app_ui.workbench.clear()  # reopen with the crawl settings
    folder = tmp_path / "handbook"
    (folder / "sub").mkdir(parents=True)
    (folder / "valves.md").write_text("# Valves\n\nClose the valve before servicing the pump.")
    (folder / "sub" / "pumps.txt").write_text("Pumps are serviced every spring.")
    (folder / "draft.tmp").write_text("A draft that stays out.")
    with serve() as httpd:
        port = httpd.server_address[1]
        at = open_app()
        at.switch_page("app_pages/ingestion.py").run()
        assert any("`127.0.0.1`" in c.value for c in at.caption)  # the allowlist is shown

        at.text_input(key="folder_path").input(str(folder))
        at.text_input(key="folder_exclude").input("*.tmp").run()
        at.button(key="folder_go").click().run()
        assert_clean(at)
        assert any(s.value.startswith("2 indexed, 0 updated") for s in at.success)

        at.text_input(key="web_index").input(f"http://127.0.0.1:{port}/index.html")
        at.text_input(key="web_pattern").input(r"/articles/").run()
        at.button(key="web_crawl").click().run()
        assert not at.exception
        assert any("page(s) stored" in s.value for s in at.success)
        assert any("evil.test" in w.value for w in at.warning)  # refused links are listed, not fatal
    stored = {d["source"] for d in app_ui.workbench().documents(limit=50)}
    assert {f"http://127.0.0.1:{port}/articles/a1.html", f"http://127.0.0.1:{port}/articles/a2.html"} <= stored
    assert any(s.endswith("handbook/valves.md") for s in stored) and not any(s.endswith(".tmp") for s in stored)


def test_chat_streams_from_an_openai_compatible_server(empty_db_url, monkeypatch) -> None:
    from chat.openai_server import OpenAIServer

    with OpenAIServer() as server:
        monkeypatch.setenv("RAG_LLM", "openai")
        monkeypatch.setenv("RAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("RAG_LLM_MODEL", server.model)
        app_ui.workbench.clear()  # reopen with the streaming LLM
        app_ui.workbench().ingest_text("guide/valves.md", "Close the valve before servicing the pump.", file_type="md")
        at = open_app()
        assert any(f"model '{server.model}'" in c.value for c in at.sidebar.caption)
        at.chat_input[0].set_value("What do I close before servicing the pump?").run()
        assert_clean(at)
        reply = [m for m in at.chat_message if m.name == "assistant"][-1]
        assert reply.markdown[0].value.startswith("Answer to:") and "[1]" in reply.markdown[0].value
        assert reply.expander[0].label == "Sources (1)"
        assert any(body.get("stream") for body in server.requests)  # the answer came as a stream


def test_switching_site_starts_a_new_conversation_instead_of_writing_into_the_other_sites(app_wb, app_site) -> None:
    """The open conversation belongs to the site it was started in: after the site picker moves to
    another site, the next question starts a conversation there; the first site's stays as it was."""
    other = f"{app_site}-b"
    for site in (app_site, other):
        app_wb.ingest_text("guide/hybrid.md", "Hybrid search fuses full-text BM25 ranks with dense vector ranks.",
                           site_id=site, file_type="md")
    try:
        at = open_app(app_site)
        at.chat_input[0].set_value("What does hybrid search fuse?").run()
        assert_clean(at)
        first = at.session_state["chat_session"]
        at.session_state["site"] = other
        at.run()
        at.chat_input[0].set_value("Tell me more about the ranks.").run()
        assert_clean(at)
        second = at.session_state["chat_session"]
        assert second != first
        assert [m["content"] for m in app_wb.chat_history(first)][0] == "What does hybrid search fuse?"
        assert len(app_wb.chat_history(first)) == 2
        assert app_wb.get_session(second)["site_id"] == other
        assert app_wb.chat_history(second)[0]["content"] == "Tell me more about the ranks."
    finally:
        with app_wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = %s", (other,))
            conn.execute("DELETE FROM chat_sessions WHERE site_id = %s", (other,))
        app_wb.store.after_write()


def test_a_store_of_the_former_default_embedder_says_how_to_move_it_and_still_searches(empty_db_url) -> None:
    """A store built with use-multilingual before e5-small became the default, opened with RAG_EMBEDDER unset."""
    from rag_core import open_workbench
    from rag_core.settings import load_settings

    with open_workbench(load_settings(embedder="use-multilingual")) as old:
        old.ingest_text("notes/fire.md", "Every floor needs two evacuation exits and a smoke detector.")
    app_ui.workbench.clear()  # the app opens the store afresh, with the default settings
    at = open_app()
    assert any("built with use-multilingual" in w.value and "rag reindex" in w.value for w in at.sidebar.warning)
    at.switch_page("app_pages/ingestion.py").run()
    assert_clean(at)
    assert any("default embedder is now e5-small" in w.value for w in at.warning)
    assert app_ui.workbench().search("evacuation exits")["results"][0]["file_path"] == "notes/fire.md"

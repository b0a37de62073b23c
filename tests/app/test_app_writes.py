"""Writes made in the app: what they change shows at once, conversations are managed with confirmation,
and the crawl allowlist is edited in the app and kept in the database."""

from __future__ import annotations

import pytest
from test_app_pages import assert_clean, open_app

import app_ui


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def sidebar_counts(at) -> str:
    return next(c.value for c in at.sidebar.caption if " document" in c.value and " chunk" in c.value)


def test_upload_and_folder_ingest_refresh_the_metrics_and_the_sidebar(app_wb, app_site, tmp_path) -> None:
    at = open_app(app_site)
    at.switch_page("app_pages/ingestion.py").run()
    assert metric(at, "Documents") == "0" and sidebar_counts(at).startswith("0 documents")
    at.file_uploader(key="upload_files").set_value([
        ("refresh-one.md", "# Boilers\n\nThe boiler is descaled every autumn.".encode(), "text/markdown")]).run()
    at.button(key="upload_go").click().run()
    assert_clean(at)
    # The metric and the sidebar drawn above the button already count the new document.
    assert metric(at, "Documents") == "1"
    assert sidebar_counts(at).startswith("1 document ·")
    assert at.dataframe[0].value.to_dict("records")[0]["status"] == "indexed"  # the report survives the redraw

    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "a.md").write_text("# Chillers\n\nChillers are checked in spring.")
    (folder / "b.txt").write_text("Cooling towers are drained in winter.")
    at.text_input(key="folder_path").input(str(folder)).run()
    at.button(key="folder_go").click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "3" and sidebar_counts(at).startswith("3 documents")
    assert any(s.value.startswith("2 indexed") for s in at.success)

    # A run where nothing went in is not reported as a success; a partial one is a warning.
    (folder / "empty.md").write_text("")
    at.text_input(key="folder_path").input(str(folder / "empty.md")).run()
    at.button(key="folder_go").click().run()
    assert not at.success and any(e.value.startswith("0 indexed") and "1 failed" in e.value for e in at.error)
    (folder / "c.md").write_text("# Pumps\n\nPumps are greased twice a year.")
    at.text_input(key="folder_path").input(str(folder)).run()
    at.button(key="folder_go").click().run()
    assert not at.success and any("1 indexed" in w.value and "1 failed" in w.value for w in at.warning)


def test_retention_preview_follows_the_days_and_the_audit_log_shows_each_run_at_once(app_wb, app_site) -> None:
    session = f"aged-{app_site}"
    app_wb.chat_append(session, "user", "An old question")
    app_wb.chat_append(session, "assistant", "An old answer")
    with app_wb.db.connection() as conn:
        conn.execute("UPDATE chat_messages SET created_at = now() - interval '3100 days' WHERE session_id = %s",
                     (session,))
    at = open_app(app_site)
    at.switch_page("app_pages/retention.py").run()
    at.number_input(key="purge_days").set_value(3000).run()
    at.button(key="purge_dry").click().run()
    assert_clean(at)
    assert any("older than 3,000 days" in i.value and "**2 messages**" in i.value for i in at.info)
    audit = at.dataframe[-1].value.to_dict("records")
    assert audit[0]["dry run"] and audit[0]["older than (days)"] == 3000  # the dry run is listed at once

    at.number_input(key="purge_days").set_value(3200).run()  # the preview counts again for the new days
    assert_clean(at)
    previews = [i.value for i in at.info if "would delete" in i.value]
    assert previews and "older than 3,200 days" in previews[0] and "**0 messages**" in previews[0]

    at.number_input(key="purge_days").set_value(3000).run()
    at.checkbox(key="purge_confirm").check().run()
    at.button(key="purge_go").click().run()
    assert_clean(at)
    assert any("Deleted 2 messages and 1 session " in s.value for s in at.success)
    audit = at.dataframe[-1].value.to_dict("records")
    assert not audit[0]["dry run"] and audit[0]["messages"] == 2  # the purge heads the log in the same run


def test_reset_asks_first_and_conversations_are_renamed_and_deleted(app_wb, app_site) -> None:
    app_wb.ingest_text("guide/pumps.md", "Pumps are serviced every spring.", site_id=app_site, file_type="md")
    other = f"other-{app_site}"
    app_wb.chat_append(other, "user", "An older conversation")
    with app_wb.db.connection() as conn:
        conn.execute("UPDATE chat_sessions SET site_id = %s WHERE id = %s", (app_site, other))
    at = open_app(app_site)
    at.chat_input[0].set_value("When are pumps serviced?").run()
    assert_clean(at)
    current = at.session_state["chat_session"]

    at.button(key="chat_reset").click().run()  # one click only asks
    assert_clean(at)
    assert any("for good" in w.value for w in at.sidebar.warning)
    assert len(app_wb.chat_history(current)) == 2
    at.button(key="chat_reset_no").click().run()  # Cancel keeps it
    assert len(app_wb.chat_history(current)) == 2 and not at.sidebar.warning

    # Rename and Delete act on the open conversation: open the other one first.
    at.selectbox(key="chat_session_pick").set_value(other).run()
    at.text_input(key=f"chat_title_{other}").input("Spring maintenance").run()
    at.button(key="chat_rename").click().run()
    assert_clean(at)
    assert app_wb.get_session(other)["title"] == "Spring maintenance"
    assert any("Renamed to 'Spring maintenance'" in t.value for t in at.toast)
    picker = at.selectbox(key="chat_session_pick")
    assert "Spring maintenance · 1 message" in picker.options

    assert at.button(key="chat_delete").disabled  # the checkbox confirms first
    at.checkbox(key=f"chat_delete_sure_{other}").check().run()
    at.button(key="chat_delete").click().run()
    assert_clean(at)
    assert app_wb.get_session(other) is None and app_wb.get_session(current) is not None
    assert any("Deleted 'Spring maintenance'" in t.value for t in at.toast)
    at.selectbox(key="chat_session_pick").set_value(current).run()

    at.button(key="chat_reset").click().run()
    at.button(key="chat_reset_yes").click().run()
    assert_clean(at)
    assert app_wb.get_session(current) is None
    assert at.session_state["chat_session"] != current
    assert any("Conversation deleted" in t.value for t in at.toast)


def test_rename_and_delete_refuse_what_is_not_there(app_wb) -> None:
    from rag_core.errors import InvalidInput, NotFound

    with pytest.raises(NotFound, match="No conversation"):
        app_wb.rename_session("no-such-session-here", "A title")
    with pytest.raises(InvalidInput, match="title is empty"):
        app_wb.rename_session("no-such-session-here", "  ")
    with pytest.raises(NotFound, match="deleted already"):
        app_wb.chat_reset("no-such-session-here", missing_ok=False)


def test_admin_edits_the_crawl_allowlist_in_the_app(empty_db_url, monkeypatch) -> None:
    from crawl_server import serve

    monkeypatch.delenv("RAG_ALLOWED_DOMAINS", raising=False)
    monkeypatch.setenv("RAG_ALLOW_PRIVATE_NETWORKS", "true")
    monkeypatch.setenv("RAG_CRAWL_DELAY_SEC", "0.05")
    app_ui.workbench.clear()
    with serve() as httpd:
        port = httpd.server_address[1]
        at = open_app()
        at.switch_page("app_pages/ingestion.py").run()
        at.text_input(key="web_index").input(f"http://127.0.0.1:{port}/index.html").run()
        assert any("allowlist is empty" in w.value for w in at.warning)
        assert at.button(key="web_crawl").disabled  # no crawl while nothing is allowed

        at.text_area(key="allowlist_text").input("127.0.0.1\nexample.org").run()
        at.button(key="allowlist_save").click().run()
        assert_clean(at)
        assert app_ui.workbench().crawl_allowlist()["stored"] == ["127.0.0.1", "example.org"]
        assert not at.button(key="web_crawl").disabled
        assert any("`127.0.0.1`" in c.value for c in at.caption)
        at.text_input(key="web_pattern").input(r"/articles/").run()
        at.button(key="web_crawl").click().run()  # no restart: the stored list applies at once
        assert not at.exception
        assert any("page(s) stored" in s.value for s in at.success)
    stored = {d["source"] for d in app_ui.workbench().documents(limit=50)}
    assert f"http://127.0.0.1:{port}/articles/a1.html" in stored


def test_the_environment_allowlist_is_the_floor_and_the_admin_key_guards_edits(empty_db_url, monkeypatch) -> None:
    from rag_core.errors import InvalidInput

    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "docs.example.com")
    monkeypatch.setenv("RAG_ADMIN_API_KEY", "s3cret-admin")
    app_ui.workbench.clear()
    wb = app_ui.workbench()
    wb.set_crawl_allowlist(["wiki.example.net", "DOCS.example.com"])
    listed = wb.crawl_allowlist()
    assert listed["environment"] == ["docs.example.com"] and listed["stored"] == ["wiki.example.net"]
    assert listed["effective"] == ["docs.example.com", "wiki.example.net"]
    wb.set_crawl_allowlist([])  # clearing the stored list never removes the environment's
    assert wb.crawl_allowlist()["effective"] == ["docs.example.com"]
    assert wb.check_url("https://docs.example.com/a").startswith("https://docs.example.com/")
    with pytest.raises(InvalidInput, match="not a domain"):
        wb.set_crawl_allowlist("example.com/some/path")

    at = open_app()
    at.switch_page("app_pages/ingestion.py").run()
    assert at.button(key="allowlist_save").disabled and at.text_area(key="allowlist_text").disabled
    at.text_input(key="allowlist_admin_key").input("wrong").run()
    assert at.button(key="allowlist_save").disabled
    at.text_input(key="allowlist_admin_key").input("s3cret-admin").run()
    assert not at.button(key="allowlist_save").disabled
    at.text_area(key="allowlist_text").input("intranet.example.net").run()
    at.button(key="allowlist_save").click().run()
    assert_clean(at)
    assert wb.crawl_allowlist()["effective"] == ["docs.example.com", "intranet.example.net"]


def test_with_an_admin_key_only_the_admin_ingests_server_paths(empty_db_url, monkeypatch, tmp_path) -> None:
    """A server file (the .env holding the keys) ingested by anyone would be searchable with a site's key."""
    secret = tmp_path / "secrets"
    secret.mkdir()
    (secret / "env.txt").write_text("RAG_ADMIN_API_KEY=s3cret-admin and the other keys of the service")
    monkeypatch.setenv("RAG_ADMIN_API_KEY", "s3cret-admin")
    app_ui.workbench.clear()

    at = open_app()
    at.switch_page("app_pages/ingestion.py").run()
    assert at.text_input(key="folder_path").disabled and at.button(key="folder_go").disabled
    at.text_input(key="folder_admin_key").input("wrong").run()
    assert at.button(key="folder_go").disabled and any("not the admin key" in e.value for e in at.error)
    at.text_input(key="folder_admin_key").input("s3cret-admin").run()
    at.text_input(key="folder_path").input(str(secret)).run()
    assert not at.button(key="folder_go").disabled
    at.button(key="folder_go").click().run()
    assert_clean(at)
    assert any(s.value.startswith("1 indexed") for s in at.success)


def test_a_file_uploaded_and_ingested_from_a_folder_is_one_document(app_wb, app_site, tmp_path) -> None:
    """The same bytes by upload and from a folder path: one document, which keeps the path (a path can be
    ingested again and pruned when its file is gone); search finds it once."""
    text = "# Travel\n\nHotel nights on business trips are refunded up to 180 euros."
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "travel.md").write_text(text, encoding="utf-8")
    (folder / "leave.md").write_text("# Leave\n\nEmployees get 25 days of leave a year.", encoding="utf-8")
    at = open_app(app_site)
    at.switch_page("app_pages/ingestion.py").run()
    at.file_uploader(key="upload_files").set_value([("travel.md", text.encode(), "text/markdown")]).run()
    at.button(key="upload_go").click().run()
    at.text_input(key="folder_path").input(str(folder)).run()
    at.button(key="folder_go").click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "2"
    sources = {d["source"] for d in app_wb.documents(site_id=app_site)}
    assert sources == {(folder / "travel.md").as_posix(), (folder / "leave.md").as_posix()}
    hits = app_wb.search("hotel nights refunded business trips", site_id=app_site)["results"]
    assert [h["file_path"] for h in hits].count((folder / "travel.md").as_posix()) == 1
    assert all(h["file_path"] != "travel.md" for h in hits)

    # Uploaded again, it stays one document: the upload's outcome names the stored path.
    at.file_uploader(key="upload_files").set_value([("travel-copy.md", text.encode(), "text/markdown")]).run()
    at.button(key="upload_go").click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "2"
    row = at.dataframe[0].value.to_dict("records")[0]
    assert row["status"] == "unchanged" and str(folder / "travel.md") in row["reason"]


def test_an_uploaded_file_is_dated_by_its_own_properties_else_by_the_upload(app_wb, app_site, tmp_path) -> None:
    """A .docx carries its dates in its core properties; a .txt has none and is dated by its upload: date
    filters and the month facet then count both (an upload used to have no date at all)."""
    import datetime as dt

    import docx

    document = docx.Document()
    document.core_properties.created = dt.datetime(2021, 3, 2, 9, 0)
    document.core_properties.modified = dt.datetime(2021, 3, 15, 9, 0)
    document.add_paragraph("Boilers in the east wing are descaled every March.")
    document.save(str(tmp_path / "boilers.docx"))
    at = open_app(app_site)
    at.switch_page("app_pages/ingestion.py").run()
    at.file_uploader(key="upload_files").set_value([
        ("boilers.docx", (tmp_path / "boilers.docx").read_bytes(),
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("chillers.txt", b"Chillers in the east wing are checked every spring.", "text/plain")]).run()
    at.button(key="upload_go").click().run()
    assert_clean(at)
    dates = {d["source"]: d["doc_date"] for d in app_wb.documents(site_id=app_site)}
    assert dates["boilers.docx"] == dt.datetime(2021, 3, 15, 9, 0, tzinfo=dt.timezone.utc)
    assert dates["chillers.txt"] is not None
    assert abs(dates["chillers.txt"] - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=10)

    march = app_wb.search("east wing", site_id=app_site, date_from="2021-03-01", date_to="2021-03-31")
    assert [r["file_path"] for r in march["results"]] == ["boilers.docx"]
    months = app_wb.search("east wing", site_id=app_site)["facets"]["date_distribution"]
    assert months.get("2021-03") == 1 and months.get(dates["chillers.txt"].strftime("%Y-%m")) == 1

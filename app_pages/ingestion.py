"""Ingestion: upload files, a server folder, a web page or a crawl; the sources table; embedder and index status."""

from __future__ import annotations

import math

import streamlit as st

import app_ui as ui
from rag_core.ingest.loaders import SUPPORTED_TYPES

PAGE_SIZE = 50

wb = ui.wb()
site = ui.current_site()
target = ui.target_site()

st.title("Ingestion")
info = ui.call(ui.status, site, default=None)

# ----- store status -----
if info is not None:
    cols = st.columns(5)
    cols[0].metric("Documents", f"{info['documents']:,}")
    cols[1].metric("Chunks", f"{info['chunks']:,}")
    cols[2].metric("Web pages", f"{info['web_sources']:,}")
    cols[3].metric("Database", f"{info['database_bytes'] / 1e6:.1f} MB")
    cols[4].metric("Vector index", "ready" if info["vector_index"] else "missing",
                   help="The HNSW index on the chunk vectors; a bulk load rebuilds it once at the end.")
    dimensions = f"{info['dimension']} dimensions" if info["dimension"] else "dimension recorded on the first ingest"
    st.caption(f"Embedder **{info['embedder'] or info['configured_embedder']}** ({dimensions}) · "
               f"database {info['database']} · "
               f"last indexed {(info['last_indexed_at'] or 'never')[:19].replace('T', ' ')} · new documents go to "
               f"site **{target}**")
    if info["embedder_mismatch"]:
        st.error(info["embedder_mismatch"])
    if info["embedder_notice"]:
        st.warning(info["embedder_notice"])
    if info["chunks_without_embedding"]:
        st.warning(f"{info['chunks_without_embedding']:,} chunks have no vector yet; run `rag reindex` to finish.")
    if info["chunks"] == 0:
        ui.offer_sample_corpus("ingest-sample")

background = st.toggle("Run in the background", key="ingest_background",
                       help="Queue a job instead of waiting here: a `rag worker` (or this app, while none runs) "
                            "takes it; its progress shows under Jobs, also after a reload.")
upload, folder, web = st.tabs(["Upload files", "Folder on the server", "Web pages"])


def queued(job_id: int | None) -> None:
    if job_id is not None:
        ui.toast_next(f"Queued job {job_id}; it shows under Jobs below.")
        ui.after_write()

with upload:
    # The limit shown under the uploader is the store's own per-file limit (RAG_MAX_FILE_MB).
    limit_mb = max(1, math.ceil(wb.settings.max_file_mb))
    files = st.file_uploader("Files", accept_multiple_files=True, key="upload_files",
                             type=sorted(t.lstrip(".") for t in SUPPORTED_TYPES), max_upload_size=limit_mb,
                             help=f"Up to {limit_mb} MB per file (`RAG_MAX_FILE_MB`). Unchanged files (same bytes) "
                                  "are skipped without embedding.")
    if st.button(f"Ingest {ui.plural(len(files or []), 'file')}", disabled=not files, type="primary",
                 key="upload_go") and background:
        queued(ui.call(wb.enqueue_uploads, [(f.name, f.getvalue()) for f in files], site_id=target))
    elif st.session_state.get("upload_go"):
        bar = st.progress(0.0, text="Starting ...")
        outcomes = []
        for i, f in enumerate(files, 1):
            bar.progress((i - 1) / len(files), text=f"Indexing {f.name} ({i} of {len(files)})")
            outcome = ui.call(wb.ingest_bytes, f.name, f.getvalue(), site_id=target)
            if outcome is not None:
                outcomes.append(outcome)
        bar.progress(1.0, text=f"Done: {len(outcomes)} of {len(files)} files processed")
        ui.after_write("upload_result", outcomes)
    outcomes = st.session_state.get("upload_result")
    if outcomes is not None:
        for o in outcomes:
            if o.status == "failed":
                st.warning(f"{ui.md_text(o.source)}: {ui.md_text(o.reason)}")
        st.dataframe(ui.report_table(outcomes), hide_index=True, width="stretch")

with folder:
    # Any file the server's user can read (its .env with the keys, the data folder) would become searchable
    # by the site's API keys: with an admin key set, only the admin ingests server paths.
    may_read_server = ui.admin_unlocked("folder_admin_key", "ingest a folder or file of the server")
    path = st.text_input("Folder or file path on the server", key="folder_path",
                         placeholder="/srv/documents or ~/papers", disabled=not may_read_server)
    inc, exc = st.columns(2)
    include = inc.text_input("Include patterns (comma separated)", key="folder_include", placeholder="*.pdf, *.md")
    exclude = exc.text_input("Exclude patterns (comma separated)", key="folder_exclude", placeholder="*.tmp")
    split = lambda text: [p.strip() for p in text.split(",") if p.strip()]  # noqa: E731
    if st.button("Ingest folder", disabled=not (path.strip() and may_read_server), type="primary",
                 key="folder_go") and background:
        queued(ui.call(wb.enqueue_ingest, [path.strip()], include=split(include), exclude=split(exclude),
                       site_id=target))
    elif st.session_state.get("folder_go"):
        bar = st.progress(0.0, text="Looking for files ...")
        report = ui.call(wb.ingest_paths, [path.strip()], include=split(include), exclude=split(exclude),
                         site_id=target, progress=ui.progress_reporter(bar))
        bar.empty()
        if report is not None:
            ui.after_write("folder_result", report)
    if st.session_state.get("folder_result") is not None:
        ui.show_ingest_report(st.session_state.folder_result)

with web:
    allowlist = ui.call(wb.crawl_allowlist, default=None) or {"environment": [], "stored": [], "effective": []}
    allowed = allowlist["effective"]
    if allowed:
        st.caption("The crawler may fetch only these domains (and their subdomains): "
                   + ", ".join(f"`{d}`" for d in allowed) + ".")
    else:
        st.warning("The crawl allowlist is empty, so the crawler refuses every URL. An admin adds the domains "
                   "below (or sets `RAG_ALLOWED_DOMAINS`).", icon=":material/block:")
    with st.expander("Crawl allowlist (admin)", icon=":material/admin_panel_settings:", expanded=not allowed):
        if allowlist["environment"]:
            st.caption("From the environment (`RAG_ALLOWED_DOMAINS`, always allowed): "
                       + ", ".join(f"`{d}`" for d in allowlist["environment"]))
        is_admin = ui.admin_unlocked("allowlist_admin_key", "edit the list")
        text = st.text_area("Also allowed (one domain per line: example.com, *.example.com, example.com:8080)",
                            value="\n".join(allowlist["stored"]), key="allowlist_text", height=100,
                            disabled=not is_admin)
        if st.button("Save allowlist", key="allowlist_save", disabled=not is_admin, icon=":material/save:"):
            saved = ui.call(wb.set_crawl_allowlist, text, updated_by="app")
            if saved is not None:
                ui.toast_next(f"Crawl allowlist saved: {ui.plural(len(saved['effective']), 'domain')}.")
                st.session_state.pop("allowlist_text", None)
                ui.after_write()
        st.caption("Private and loopback addresses stay refused unless `RAG_ALLOW_PRIVATE_NETWORKS=true` is set.")

    def show_web_report(report) -> None:
        data = report.to_dict()
        st.success(f"{data['pages_ingested']} page(s) stored ({data['unchanged']} unchanged) · {data['chunks']} "
                   f"chunks · {data['duration_s']:.1f} s")
        for e in data["errors"]:
            st.warning(f"{ui.md_text(e.get('url'))}: {ui.md_text(e.get('message') or e.get('reason'))}")
        if data["documents"]:
            st.dataframe(data["documents"], hide_index=True, width="stretch")

    url = st.text_input("One page", key="web_url", placeholder="https://example.com/guide/start")
    if st.button("Add page", disabled=not (url.strip() and allowed), key="web_add") and background:
        queued(ui.call(wb.enqueue_page, url.strip(), site_id=target))
    elif st.session_state.get("web_add"):
        bar = st.progress(0.0, text="Fetching ...")
        report = ui.call(wb.ingest_url, url.strip(), site_id=target, progress=ui.progress_reporter(bar, "Fetched"))
        bar.empty()
        if report is not None:
            ui.after_write("web_result", report)
    st.divider()
    idx, pat = st.columns([3, 2])
    index_url = idx.text_input("Index page to crawl (depth 1)", key="web_index", placeholder="https://example.com/docs/")
    pattern = pat.text_input("Link pattern (regular expression)", key="web_pattern", placeholder=r"\.html$")
    if st.button("Crawl", disabled=not (index_url.strip() and allowed), key="web_crawl",
                 help=None if allowed else "Add a domain to the crawl allowlist first.") and background:
        queued(ui.call(wb.enqueue_crawl, index_url.strip(), pattern, site_id=target))
    elif st.session_state.get("web_crawl"):
        bar = st.progress(0.0, text="Reading the index page ...")
        report = ui.call(wb.ingest_index, index_url.strip(), pattern, site_id=target,
                         progress=ui.progress_reporter(bar, "Fetched"))
        bar.empty()
        if report is not None:
            ui.after_write("web_result", report)
    if st.session_state.get("web_result") is not None:
        show_web_report(st.session_state.web_result)



# ----- background jobs: read from the database, so they outlive a reload and show other processes' jobs -----
@st.fragment(run_every=2)
def jobs_panel() -> None:
    jobs = ui.call(wb.jobs, site_id=site, limit=10, default=[]) or []
    if not jobs:
        return
    st.subheader("Jobs")
    for job in jobs:
        label = f"#{job['id']} {job['kind']} · {ui.md_text(job['description'])} · **{job['status']}**"
        if job["total"]:
            st.progress(min(1.0, job["done"] / job["total"]),
                        text=f"{label} · {job['done']} of {job['total']} · {job['chunks']} chunks")
        else:
            st.caption(label)
        for err in job["errors"][:5]:
            st.warning(f"{ui.md_text(err['source'] or job['description'])}: {ui.md_text(err['reason'])}")


jobs_panel()

# ----- sources table -----
st.subheader("Sources")
total = info["documents"] if info else 0
pages = max(1, -(-total // PAGE_SIZE))
if total == 0:
    st.caption("No sources yet.")
else:
    page = st.columns([1, 3])[0].number_input(f"Page (of {pages}, {PAGE_SIZE} per page, newest first)", min_value=1,
                                              max_value=pages, value=1, step=1, key="sources_page")
    rows = ui.call(ui.documents, site, PAGE_SIZE, (int(page) - 1) * PAGE_SIZE, default=[]) or []
    table = [{"source": r["source"], "type": r["file_type"], "category": r["category"], "chunks": r["chunk_count"],
              "size KB": round((r["file_size"] or 0) / 1024, 1), "indexed at": r["indexed_at"],
              "site": r["site_id"], "title": r["title"]} for r in rows]
    # A fresh key after each delete: an old row selection must never point at the rows that moved up.
    gen = st.session_state.setdefault("sources_generation", 0)
    picked = st.dataframe(table, hide_index=True, width="stretch", on_select="rerun",
                          selection_mode="multi-row", key=f"sources_table_{gen}",
                          column_config={"indexed at": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")})
    chosen = [rows[i] for i in picked.selection.rows if i < len(rows)]
    confirm = st.checkbox(f"Delete the {ui.plural(len(chosen), 'selected source')} and their chunks",
                          key=f"sources_confirm_{gen}", disabled=not chosen)
    if st.button("Delete selected", type="primary", disabled=not (chosen and confirm), key="sources_delete",
                 icon=":material/delete:"):
        deleted = 0
        for r in chosen:
            result = ui.call(wb.delete_source, r["source"], site_id=r["site_id"])
            deleted += result["documents"] if result else 0
        st.session_state.sources_generation = gen + 1
        ui.toast_next(f"Deleted {ui.plural(deleted, 'source')}.")
        ui.after_write()

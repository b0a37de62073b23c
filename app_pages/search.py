"""Search: hybrid, semantic or full-text, sidebar filters, facet charts that filter, pages and downloads."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pandas as pd
import plotly.express as px
import streamlit as st

import app_ui as ui
from rag_core.search.validation import DOCUMENT_TYPES

MODES = {"hybrid": "Hybrid", "semantic": "Semantic", "fulltext": "Full text"}

wb = ui.wb()
site = ui.current_site()

# ----- sidebar filters -----
with st.sidebar:
    st.subheader("Filters")
    mode = st.radio("Mode", list(MODES), format_func=MODES.get, key="search_mode",
                    help="Hybrid fuses full-text (BM25) and dense ranks; it is the best default.")
    types = st.multiselect("Document types", DOCUMENT_TYPES, key="search_types")
    date_from = st.date_input("Documents dated from", value=None, key="search_from", format="YYYY-MM-DD")
    date_to = st.date_input("... to (inclusive)", value=None, key="search_to", format="YYYY-MM-DD")
    source = st.text_input("Source prefix or part of a path", key="search_source",
                           placeholder="/home/me/docs/ or https://example.com/")
    limit = st.select_slider("Results per page", [5, 10, 20, 50], value=10, key="search_limit")

st.title("Search")
query = st.text_input("Query", key="search_query", placeholder="e.g. how does hybrid search rank documents?",
                      label_visibility="collapsed")
info = ui.call(ui.status, site, default=None)
if info is not None and info["chunks"] == 0:
    ui.offer_sample_corpus("search-sample")
if not query.strip():
    st.caption("Type a query and press Enter. Filters are in the sidebar; click a bar in the facet charts "
               "to narrow the results to a type or a month.")
    st.stop()

base: dict[str, Any] = {"query": query, "mode": mode, "limit": limit, "types": types or None,
                        "date_from": date_from, "date_to": date_to, "source": source.strip() or None, "site_id": site}


def run_search(params: dict[str, Any], page: int) -> dict[str, Any] | None:
    """The search, asked once per distinct request in this session: reruns (downloads, expanders) are not
    logged again as new searches."""
    key = json.dumps({**params, "page": page}, default=str, sort_keys=True)
    memo = st.session_state.setdefault("search_memo", {})
    if key not in memo:
        response = ui.call(wb.search, page=page, **params)
        if response is None:
            return None
        memo.clear()  # keep only the latest few requests
        memo[key] = response
    return memo[key]


# Facets come from the sidebar-filtered search; a chart selection narrows the results below them.
overview = run_search(base, 1)
if overview is None:
    st.stop()
# The charts' keys follow the sidebar request, so a new query or filter starts with no bar selected.
chart_id = hashlib.sha1(json.dumps(base, default=str, sort_keys=True).encode()).hexdigest()[:10]
types_key, months_key = f"facet_types_{chart_id}", f"facet_months_{chart_id}"
picked_types = ui.selected_bars(st.session_state.get(types_key))
picked_months = ui.selected_bars(st.session_state.get(months_key))
params = ui.narrow_by_facets(base, picked_types, picked_months)
signature = json.dumps(params, default=str, sort_keys=True)
if st.session_state.get("search_signature") != signature:
    st.session_state.search_signature, st.session_state.search_page = signature, 1
page = st.session_state.get("search_page", 1)
response = run_search(params, page) if (params != base or page != 1) else overview
if response is None:
    st.stop()

# ----- facets -----
facets = overview["facets"]
charts = st.columns(2)
type_counts = facets.get("document_types") or {}
month_counts = facets.get("date_distribution") or {}


def facet_chart(counts: dict[str, int], axis: str, title: str, key: str) -> None:
    """A bar chart of facet counts whose selected bars narrow the results (the page reruns on a click)."""
    if not counts:
        return
    fig = px.bar(x=list(counts), y=list(counts.values()), labels={"x": axis, "y": "documents"}, title=title,
                 height=230)
    fig.update_xaxes(type="category")
    ui.count_axis(fig, list(counts.values()))
    fig.update_layout(bargap=0.5, margin=dict(l=10, r=10, t=40, b=10), dragmode=False, clickmode="event+select")
    st.plotly_chart(fig, on_select="rerun", selection_mode="points", key=key, width="stretch")


with charts[0]:
    facet_chart(type_counts, "type", "Document types", types_key)
with charts[1]:
    facet_chart(month_counts, "month", "Documents per month", months_key)
narrowed = [f"type {', '.join(picked_types)}"] if picked_types else []
if picked_months:
    narrowed.append(f"month {picked_months[0]}" + (f" to {picked_months[-1]}" if len(picked_months) > 1 else ""))
if narrowed:
    st.caption(f"Narrowed by the charts to {' and '.join(narrowed)}; double-click the chart to clear.")

# ----- results -----
total, pages = response["total_results"], max(response["total_pages"], 1)
st.markdown(f"**{total} documents** · {MODES[response['mode']]} · {response['search_time']}")
if response["suggestions"]:
    st.caption("Related: " + " · ".join(response["suggestions"]))
if not response["results"]:
    st.info("No documents match. Try the Hybrid mode, fewer words, or clear the filters in the sidebar.")


def result_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows for the CSV download."""
    return [{"rank": r["rank"], "title": r["title"], "file_path": r["file_path"], "file_type": r["file_type"],
             "file_size": r["file_size"], "relevance_score": r["relevance_score"], "score": r["score"],
             "dense_rank": r["dense_rank"], "fulltext_rank": r["fulltext_rank"],
             "document_date": r["document_date"], "site_id": r["site_id"],
             "highlights": " … ".join(r["highlights"])} for r in results]


for r in response["results"]:
    with st.container(border=True):
        head, score = st.columns([5, 1])
        head.markdown(f"**{r['rank']}. {r['title'] or r['file_path']}**  \n" + ui.source_label(r["file_path"]))
        head.caption(" · ".join(x for x in (r["file_type"], r["file_size"], (r["document_date"] or "")[:10],
                                            f"site {r['site_id']}") if x))
        score.progress(max(0.0, min(1.0, r["relevance_score"])), text=f"{r['relevance_score'] * 100:.0f}%")
        for text, spans in zip(r["highlights"], r["highlight_spans"]):
            ui.text_block("… " + ui.marked_html(text, spans) + " …")
        with st.expander("Why this hit · best chunks"):
            st.markdown(f"Rank **{r['rank']}** · fused score **{r['score']:.4f}** · dense rank "
                        f"**{r['dense_rank'] or '—'}** · full-text rank **{r['fulltext_rank'] or '—'}**")
            st.caption("Dense rank: position among the chunks closest in meaning. Full-text rank: position by "
                       "BM25 over the words. Hybrid fuses both into one score; a dash means that ranking did "
                       "not retrieve this document.")
            for c in r["context_chunks"]:
                page_note = f" · page {c['page_number']}" if c["page_number"] is not None else ""
                sim = f" · similarity {c['similarity']:.3f}" if c.get("similarity") is not None else ""
                st.markdown(f"Chunk {c['chunk_index']}{page_note} · characters {c['start_char']}–{c['end_char']} · "
                            f"dense rank {c['dense_rank'] or '—'} · full-text rank {c['fulltext_rank'] or '—'}{sim}")
                ui.text_block(ui.marked_html(c["text"], []))

# ----- pagination and downloads -----
nav = st.columns([1, 2, 1, 2, 2])
if nav[0].button("Previous", disabled=page <= 1, icon=":material/chevron_left:", key="search_prev"):
    st.session_state.search_page = page - 1
    st.rerun()
nav[1].markdown(f"Page **{page}** of **{pages}**")
if nav[2].button("Next", disabled=page >= pages, icon=":material/chevron_right:", key="search_next"):
    st.session_state.search_page = page + 1
    st.rerun()
nav[3].download_button("JSON", json.dumps(response, ensure_ascii=False, indent=2, default=str),
                       file_name="search-results.json", mime="application/json", icon=":material/download:",
                       key="search_json")
buffer = io.StringIO()
pd.DataFrame(result_rows(response["results"])).to_csv(buffer, index=False)
nav[4].download_button("CSV", buffer.getvalue(), file_name="search-results.csv", mime="text/csv",
                       icon=":material/download:", key="search_csv")

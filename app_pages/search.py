"""Search: hybrid, semantic or full-text, sidebar filters, facet charts that filter, pages and downloads."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import plotly.express as px
import streamlit as st

import app_ui as ui
from rag_core.evaluation.judged import query_id
from rag_core.limits import MAX_QUERY_CHARS
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
                           placeholder="docs/ or https://example.com/")
    limit = st.select_slider("Results per page", [5, 10, 20, 50], value=10, key="search_limit")

st.title("Search")
# No max_chars: the browser would cut a longer paste short without a word; the search refuses it with the limit.
query = st.text_input("Query", key="search_query", placeholder="e.g. how does hybrid search rank documents?",
                      label_visibility="collapsed", help=f"Up to {MAX_QUERY_CHARS} characters.")
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
        # Typed: the words changed since the last search. A page, filter or chart click repeats the words and
        # is logged as not typed, so the popular queries count what people asked, not how they browsed.
        typed = params["query"].strip() != st.session_state.get("search_last_words")
        response = ui.call(wb.search, page=page, typed=typed, **params)
        if response is None:
            return None
        memo.clear()  # keep only the latest few requests
        memo[key] = response
        st.session_state.search_last_words = params["query"].strip()
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
st.markdown(f"**{ui.plural(total, 'document')}** · {MODES[response['mode']]} · {response['search_time']}")
related = ui.related_queries(query, response["suggestions"])
if related:
    def _ask(words: str) -> None:
        st.session_state.search_query = words

    cols = st.columns([1] + [3] * len(related) + [max(1, 8 - 3 * len(related))])
    cols[0].caption("Related:")
    for i, (col, words) in enumerate(zip(cols[1:], related)):
        # Earlier queries are anyone's text (API callers' too), and a button label renders markdown images.
        col.button(ui.md_text(words), key=f"search_related_{i}", on_click=_ask, args=(words,), type="tertiary",
                   icon=":material/search:", help="Search for this earlier query")
if not response["results"]:
    hints = ["fewer words", "clear the filters in the sidebar"]
    if mode != "hybrid":
        hints.insert(0, "the Hybrid mode")
    st.info(f"No documents match. Try {', '.join(hints[:-1])}, or {hints[-1]}.")


def result_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows for the CSV download."""
    return [{"rank": r["rank"], "title": r["title"], "file_path": r["file_path"], "file_type": r["file_type"],
             "file_size": r["file_size"], "relevance_score": r["relevance_score"], "score": r["score"],
             "dense_rank": r["dense_rank"], "fulltext_rank": r["fulltext_rank"],
             "document_date": r["document_date"], "site_id": r["site_id"],
             "highlights": " … ".join(r["highlights"])} for r in results]


def judged_here(site_id: str) -> set[str]:
    """The sources already judged relevant for this query in one site (the user's own evaluation set)."""
    cache = st.session_state.setdefault("search_judged", {})
    key = (site_id, query_id(query))
    if key not in cache:
        summary = ui.call(wb.judged_queries, site_id, default=None) or {"items": []}
        cache[key] = next((set(i["relevant"]) for i in summary["items"] if i["id"] == key[1]), set())
    return cache[key]


def judge(site_id: str, source: str, title: str, relevant: bool) -> None:
    """Mark a hit relevant (or withdraw it) in the site's judged set; the Analytics page evaluates that set."""
    if ui.call(wb.mark_relevant, query, source, site_id=site_id, title=title, relevant=relevant) is not None:
        st.session_state.get("search_judged", {}).pop((site_id, query_id(query)), None)
        st.toast(("Marked relevant: " if relevant else "No longer marked: ") + ui.md_text(title or source))


for r in response["results"]:
    with st.container(border=True):
        head, score = st.columns([5, 1])
        head.markdown(f"**{r['rank']}. {ui.md_text(r['title'] or r['file_path'])}**  \n" + ui.source_label(r["file_path"]))
        head.caption(" · ".join(x for x in (r["file_type"], r["file_size"], (r["document_date"] or "")[:10],
                                            f"site {r['site_id']}") if x))
        score.progress(max(0.0, min(1.0, r["relevance_score"])), text=f"{r['relevance_score'] * 100:.0f}%")
        judged = r["file_path"] in judged_here(r["site_id"])
        score.button("Relevant" if judged else "Mark relevant", key=f"judge_{r['rank']}",
                     icon=":material/check_circle:" if judged else ":material/add_task:",
                     type="secondary" if judged else "tertiary", on_click=judge,
                     args=(r["site_id"], r["file_path"], r["title"] or "", not judged),
                     help="Your judgement: this document answers the query. The Analytics page scores search "
                          "on the queries you judged." + (" Click again to withdraw it." if judged else ""))
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


def download(kind: str) -> str:
    """Every result of the search (up to the download cap) as JSON or CSV, asked for when the button is clicked."""
    results = ui.all_results(wb, params)
    if kind == "json":
        return json.dumps({**response, "results": results, "page": None, "total_pages": None}, ensure_ascii=False,
                          indent=2, default=str)
    return ui.csv_text(result_rows(results))


shown = min(total, ui.DOWNLOAD_CAP)
note = f"All {shown} results" if total <= ui.DOWNLOAD_CAP else f"The first {shown} of {total} results"
nav[3].download_button("JSON", lambda: download("json"), file_name="search-results.json", mime="application/json",
                       icon=":material/download:", key="search_json", on_click="ignore", help=note)
nav[4].download_button("CSV", lambda: download("csv"), file_name="search-results.csv", mime="text/csv",
                       icon=":material/download:", key="search_csv", on_click="ignore", help=note)

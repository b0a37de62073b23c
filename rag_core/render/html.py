"""Results as HTML for Jupyter: a search, a chat turn, an evaluation, the store's status and row lists.

Rules every builder keeps:
- every value from the store is HTML-escaped (documents are untrusted input);
- styles are inline and nothing is loaded from another host, so an exported notebook looks the same
  offline and a notebook never makes an outside request;
- the HTML says the same as the plain text the CLI prints, no more: a similarity is a bar and the
  percentage beside it, quotes are <mark>ed where the answer cites them.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.chat.quotes import cited_spans
from rag_core.render.search import header_line

if TYPE_CHECKING:
    from rag_core.chat.turn import ChatTurn
    from rag_core.evaluation.runner import EvalResult
    from rag_core.search.responses import SearchResponse

_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.45;max-width:60rem"
_MUTED = "color:#57606a"
MARK_STYLE = "background:#ffe58f;padding:0 2px;border-radius:2px"
_QUOTE = ("white-space:pre-wrap;border-left:3px solid #d0d7de;padding:0.3rem 0.7rem;margin:0.3rem 0;"
          "max-height:14rem;overflow:auto")
_TABLE = "border-collapse:collapse;font-size:12px"
_CELL = "border-bottom:1px solid #d8dee4;padding:2px 8px;text-align:left;vertical-align:top"


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def similarity_bar(fraction: float, label: str = "") -> str:
    """A horizontal bar for a 0..1 value with its label; values outside 0..1 are clipped."""
    width = round(max(0.0, min(1.0, float(fraction))) * 100, 1)
    return (f'<span style="display:inline-block;vertical-align:middle;width:6rem;height:0.6rem;'
            f'background:#eaeef2;border-radius:3px;overflow:hidden"><span style="display:block;height:100%;'
            f'width:{width}%;background:#2da44e"></span></span> <span style="{_MUTED}">{esc(label)}</span>')


def marked_html(text: str, spans: Sequence[Sequence[int]]) -> str:
    """`text` HTML-escaped, each [start, end) span wrapped in a <mark>; overlapping spans are skipped."""
    out, pos = [], 0
    for start, end in sorted((int(s), int(e)) for s, e in spans):
        if start < pos or end <= start:
            continue
        out += [esc(text[pos:start]), f'<mark style="{MARK_STYLE}">', esc(text[start:end]), "</mark>"]
        pos = end
    out.append(esc(text[pos:]))
    return "".join(out)


def source_link(path: str) -> str:
    """A URL as a link that opens in a new tab; a file path as code."""
    if path.startswith(("http://", "https://")):
        return f'<a href="{esc(path)}" target="_blank" rel="noopener noreferrer">{esc(path)}</a>'
    return f"<code>{esc(path)}</code>"


def table_html(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, limit: int = 50) -> str:
    """Rows of dicts as a small HTML table (the first `limit` rows, then how many more)."""
    if not rows:
        return f'<div style="{_BOX};{_MUTED}">(no rows)</div>'
    columns = list(columns or rows[0].keys())
    head = "".join(f'<th style="{_CELL}">{esc(c)}</th>' for c in columns)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{esc(_cell(r.get(c)))}</td>' for c in columns) + "</tr>"
                   for r in rows[:limit])
    more = f'<div style="{_MUTED}">… {len(rows) - limit} more rows</div>' if len(rows) > limit else ""
    return f'<div style="{_BOX}"><table style="{_TABLE}"><tr>{head}</tr>{body}</table>{more}</div>'


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value[:5])) + (" …" if len(value) > 5 else "")
    return "" if value is None else str(value)


# ----- search -----
def search_html(resp: SearchResponse) -> str:
    """A search response: header, one card per document with its score, highlights and context, facets."""
    first = (resp.get("page", 1) - 1) * resp.get("limit", 10) + 1
    parts = [f'<div style="{_BOX}"><div style="{_MUTED}">{esc(header_line(resp))}</div>']
    for n, r in enumerate(resp.get("results") or [], first):
        score = float(r.get("relevance_score") or 0.0)
        ranks = " + ".join(f"{label} #{rank}" for rank, label in ((r.get("dense_rank"), "dense"),
                                                                  (r.get("fulltext_rank"), "full text"))
                           if rank is not None)
        parts.append(f'<div style="margin:0.6rem 0"><b>{n}. {esc(r.get("title") or r.get("file_path"))}</b> '
                     f'{similarity_bar(score, f"{score:.2f}")}<br>{source_link(str(r.get("file_path", "")))} '
                     f'<span style="{_MUTED}">· {esc(r.get("file_type"))} · {esc(r.get("file_size"))}'
                     f'{" · " + esc(ranks) if ranks else ""}</span>')
        spans = r.get("highlight_spans") or [[] for _ in r.get("highlights") or []]
        for text, sp in zip(r.get("highlights") or [], spans):
            parts.append(f'<div style="{_QUOTE}">… {marked_html(text, sp)} …</div>')
        for c in r.get("context_chunks") or []:
            page = f", page {c['page_number']}" if c.get("page_number") else ""
            parts.append(f'<details><summary style="{_MUTED}">chunk {esc(c.get("chunk_index"))}{esc(page)} · '
                         f'{float(c.get("relevance_score") or 0):.2f}</summary>'
                         f'<div style="{_QUOTE}">{esc(c.get("text"))}</div></details>')
        parts.append("</div>")
    facets = resp.get("facets")
    for label, values in (("Types", facets.get("document_types") if facets else None),
                          ("Dates", facets.get("date_distribution") if facets else None)):
        if values:
            parts.append(f'<div style="{_MUTED}">{label}: '
                         + ", ".join(f"{esc(k)} <b>{esc(v)}</b>" for k, v in values.items()) + "</div>")
    if resp.get("suggestions"):
        parts.append(f'<div style="{_MUTED}">Suggestions: {esc("; ".join(resp["suggestions"]))}</div>')
    parts.append("</div>")
    return "".join(parts)


# ----- chat -----
def turn_html(turn: "ChatTurn") -> str:
    """A chat turn as the app shows it: the Sources block (similarity bars, the cited sentences
    marked in each passage), then the answer."""
    parts = [f'<div style="{_BOX}"><div style="{_MUTED}">Q: {esc(turn.question)}</div>',
             f"<h4 style=\"margin:0.4rem 0\">Sources ({len(turn.sources)})</h4>"]
    if not turn.sources:
        parts.append(f'<div style="{_MUTED}">No relevant passages were found; the answer is not grounded in '
                     f"the documents.</div>")
    for s in turn.sources:
        page = f" · page {s.page}" if s.page is not None else ""
        if len(s.sites) > 1:  # a chat over every site: the same passage is held by each of these sites
            page += f" · sites: {', '.join(s.sites)}"
        spans = cited_spans(turn.answer, s.n, s.text)
        bar = similarity_bar(s.similarity_pct / 100, f"{s.similarity_pct:.1f}%")
        parts.append(f'<div style="margin:0.4rem 0">[{s.n}] {bar}'
                     f' <b>{esc(s.title)}</b> {source_link(s.source)}{esc(page)}'
                     f'<div style="{_QUOTE}">{marked_html(s.text, spans)}</div></div>')
    parts.append(f'<h4 style="margin:0.4rem 0">Answer</h4><div style="white-space:pre-wrap">{esc(turn.answer)}</div>'
                 f'<div style="{_MUTED};margin-top:0.3rem">session {esc(turn.session_id)} · {esc(turn.llm)}</div></div>')
    return "".join(parts)


# ----- evaluation -----
def eval_html(result: "EvalResult") -> str:
    """An evaluation result: the metrics with bars, latency, and the worst queries."""
    k = result.k
    metrics = [(f"hit@{k}", result.hit), (f"precision@{k}", result.precision), (f"recall@{k}", result.recall),
               ("MRR@10", result.mrr10), ("nDCG@10", result.ndcg10)]
    rows = "".join(f'<tr><td style="{_CELL}">{esc(name)}</td><td style="{_CELL}">{similarity_bar(v, f"{v:.3f}")}</td></tr>'
                   for name, v in metrics)
    worst = sorted(result.per_query, key=lambda q: (q.get("ndcg", 0.0), q.get("hit", 0.0)))[:5]
    misses = table_html([{"query": q["query_id"], "hit": q.get("hit"), "ndcg": q.get("ndcg"), "ms": q.get("ms"),
                          "ranked": q.get("ranked", [])[:3]} for q in worst]) if worst else ""
    return (f'<div style="{_BOX}"><b>{esc(result.dataset)}</b> · {esc(result.mode)} · {result.queries} queries · '
            f'{esc(result.embedder)}<table style="{_TABLE}">{rows}</table>'
            f'<div style="{_MUTED}">latency p50 {result.latency_p50_ms:.1f} ms · p95 {result.latency_p95_ms:.1f} ms'
            f'{f" · {result.errors} errors" if result.errors else ""}</div>'
            + (f'<div style="{_MUTED};margin-top:0.4rem">Weakest queries</div>{misses}' if misses else "") + "</div>")


# ----- rows: documents, the query log, the store's status -----
def records_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """A list of row dicts (documents, query-log entries) as a table."""
    return table_html(rows)


def status_html(status: Mapping[str, Any]) -> str:
    """`Workbench.status()` as a two-column table."""
    return table_html([{"": k, "value": v} for k, v in status.items()], ["", "value"])

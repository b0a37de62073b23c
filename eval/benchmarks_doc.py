"""Write docs/benchmarks.md from eval/results/*.json, so no figure in the docs is typed by hand.

Each benchmark's description is prose kept here; every figure comes from a results file, with the
machine, date, embedder and settings that file records. A results file no renderer knows still gets
a section of its scalar fields, so nothing a benchmark writes is left out.

    .venv/bin/python eval/benchmarks_doc.py            # rewrite docs/benchmarks.md (make benchmarks-doc)
    .venv/bin/python eval/benchmarks_doc.py --check    # exit 1 when docs/benchmarks.md is out of date
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "eval" / "results"
TARGET = REPO / "docs" / "benchmarks.md"

Data = dict[str, Any]
NOT_RESULTS = {"charts", "notebooks"}


def num(value: Any, digits: int = 3) -> str:
    """A figure as a table cell: rounded, thousands separated, a dash when absent."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value).replace("|", "\\|")


def ms(value: Any) -> str:
    return num(value, 1)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell if isinstance(cell, str) else num(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def load_range(pairs: list[Any]) -> str:
    """'3.2-11.6' from [before, after] load averages, or a dash."""
    flat = [float(x) for pair in pairs for x in (pair if isinstance(pair, list) else [pair]) if x is not None]
    return f"{min(flat):.1f}-{max(flat):.1f}" if flat else "-"


def machine_text(machine: Any) -> str:
    if isinstance(machine, dict):
        parts = [f"{machine.get('nproc', '?')} cores, {machine.get('cpu', '?')}"]
        if machine.get("mem_gb"):
            parts.append(f"{machine['mem_gb']} GB")
        return ", ".join(parts)
    return str(machine or "not recorded")


def recorded(data: Data, *keys: str) -> str:
    """One line of what a file records about its run: machine, date, embedder and the given keys."""
    parts = [f"machine: {machine_text(data.get('machine'))}"]
    when = data.get("written") or data.get("measured_at") or data.get("generated")
    if when:
        parts.append(f"written: {when}")
    for key in ("embedder", *keys):
        if data.get(key) not in (None, "", {}):
            parts.append(f"{key}: {num(data[key])}")
    return "; ".join(parts) + "."


def link(path: Path) -> str:
    name = path.relative_to(RESULTS).as_posix() if path.is_relative_to(RESULTS) else path.name
    return f"[`{name}`](../eval/results/{name})"


def per_file(render_one: Callable[[Path, Any], list[str]]) -> Callable[[list[Path]], str]:
    """A benchmark's renderer from one that renders a single results file into paragraphs."""
    def render(files: list[Path]) -> str:
        return "\n\n".join(part for path in files for part in render_one(path, load(path)))
    return render


# --- one renderer per benchmark family ---------------------------------------------------------------


def render_retrieval(files: list[Path]) -> str:
    rows, meta = [], set()
    for path in files:
        d = load(path)
        lat = d.get("latency_ms", {})
        rows.append([d["dataset"], d["mode"], d.get("embedder"), d.get("queries"), d.get("hit@5"), d.get("ndcg@10"),
                     d.get("mrr@10"), d.get("recall@5"), ms(lat.get("p50")), ms(lat.get("p95")),
                     str(d.get("written", "-"))[:10], link(path)])
        meta.add(machine_text(d.get("machine")))
    rows.sort(key=lambda r: (r[0], r[1]))
    return "\n\n".join([f"Machine: {'; '.join(sorted(meta))}.",
                         table(["set", "mode", "embedder", "queries", "hit@5", "nDCG@10", "MRR@10", "recall@5",
                                "p50 ms", "p95 ms", "written", "file"], rows)])


@per_file
def render_retrieval_summary(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    rows = [[r["set"], r["mode"], r.get("queries"), r.get("docs"), r.get("hit@5"), r.get("ndcg@10"), r.get("mrr@10"),
             ms(r.get("p50 ms")), ms(r.get("p95 ms")), r.get("hit target met"), r.get("latency target met")]
            for r in d]
    out += [link(path), table(["set", "mode", "queries", "documents", "hit@5", "nDCG@10", "MRR@10", "p50 ms",
                               "p95 ms", "hit@5 target met", "latency target met"], rows)]
    return out


@per_file
def render_embedders(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    m, s = d.get("machine", {}), d.get("settings", {})
    out.append(f"{link(path)}: `{d.get('command')}`. Machine: {machine_text(m)}; load average (1, 5, 15 min) "
               f"{m.get('loadavg_start')} at the start, {m.get('loadavg_end')} at the end; written "
               f"{d.get('generated')}. Documents: {s.get('document_text')}; retrieval: {s.get('retrieval')}.")
    rows = [[r["set"], r["embedder"], r.get("dim"), r.get("n_queries"), r.get("n_docs"), r.get("hit@5"),
             r.get("ndcg@10"), r.get("mrr@10"), num(r.get("passages_per_s"), 1), num(r.get("passages_per_cpu_s"), 1),
             ms(r.get("query_ms_p50"))] for r in d.get("results", [])]
    out.append(table(["set", "embedder", "dim", "queries", "documents", "hit@5", "nDCG@10", "MRR@10", "passages/s",
                      "passages per CPU-s", "query p50 ms"], rows))
    return out


@per_file
def render_fusion_sweep(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    sets = list(d["parts"])
    out.append(f"{link(path)}: relevance floor {d.get('floor')}, candidate depth {d.get('depth')}, "
               f"{len(d['settings'])} settings; chosen: `{d.get('chosen')}`.")
    out.append(table(["set", "full text hit@5 / nDCG@10", "semantic hit@5 / nDCG@10"],
                     [[s, f"{num(p['fulltext']['hit@5'])} / {num(p['fulltext']['ndcg@10'])}",
                       f"{num(p['semantic']['hit@5'])} / {num(p['semantic']['ndcg@10'])}"]
                      for s, p in d["parts"].items()]))
    ranked = sorted(d["settings"], key=lambda x: (-x["worst_margin"], x["setting"]))
    chosen = [x for x in d["settings"] if x["setting"] == d.get("chosen")]
    best_of = {}
    for x in ranked:
        best_of.setdefault((x["method"], x.get("documents")), x)
    shown = chosen + [x for x in ranked[:10] if x not in chosen]
    shown += [x for x in best_of.values() if x not in shown]
    out.append("The chosen setting, the ten with the largest worst-set margin (hybrid nDCG@10 minus the better "
               "of full text and semantic), and the best of each method:")
    out.append(table(["setting", *[f"{s} hit@5 / nDCG@10 (margin)" for s in sets], "worst margin"],
                     [[x["setting"], *[f"{num(x['sets'][s]['hit@5'])} / {num(x['sets'][s]['ndcg@10'])} "
                                      f"({num(x['sets'][s]['margin'], 4)})" for s in sets], num(x["worst_margin"], 4)]
                      for x in shown]))
    return out


@per_file
def render_fusion_adaptive(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    out.append(f"{link(path)}: relevance floor {d.get('floor')}, today's fusion `{d.get('current')}`, "
               f"{d.get('fold_seeds')} random pairs of halves per set.")
    out.append(table(["set", "queries", "today hit@5 / nDCG@10", "best alpha per query (oracle)",
                      "best fixed alpha for hit@5", "best fixed alpha for nDCG@10"],
                     [[s, v["queries"], f"{num(v['current']['hit@5'])} / {num(v['current']['ndcg@10'])}",
                       f"{num(v['oracle_alpha_per_query']['hit@5'])} / {num(v['oracle_alpha_per_query']['ndcg@10'])}",
                       f"{num(v['best_fixed_alpha']['hit@5']['hit@5'])} at {v['best_fixed_alpha']['hit@5']['alpha']}",
                       f"{num(v['best_fixed_alpha']['ndcg@10']['ndcg@10'])} at {v['best_fixed_alpha']['ndcg@10']['alpha']}"]
                      for s, v in d["sets"].items()]))
    rules = [(r["rule"], r) for r in d.get("rules", [])]
    rules += [(f"document score from all chunks ({name})", d["pooling"][name]) for name in ("ndcg@10", "hit@5")
              if name in d.get("pooling", {})]
    rules += [(f"BM25 k1 x b ({name})", d["bm25"][name]) for name in ("ndcg@10", "hit@5") if name in d.get("bm25", {})]
    rows = []
    for name, r in rules:
        held_out = ", ".join(f"{x['held_out']} {num(x['gain'], 4)}" for x in r.get("loso", []))
        rows.append([name, r.get("objective", "-"), held_out, num(r.get("min_gain"), 4),
                     f"{r.get('in_set_wins')} of {r.get('in_set_splits')}", r.get("generalises")])
    out.append("Each rule fitted on some queries and scored on others: gain over today's setting on the held-out "
               "set (fitted on the other two), its worst gain over every split, and the in-set splits it wins "
               "(beating both today's setting and a fixed alpha fitted on the same half).")
    out.append(table(["rule", "objective", "held-out gain", "worst gain", "in-set wins", "generalises"], rows))
    return out


@per_file
def render_sweeps(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    rows = d  # a list of one row per setting
    if path.stem == "sweep_chunking":
        out += [link(path), table(["chunk / overlap (chars)", "default", "chunks", "hit@5", "nDCG@10", "MRR@10",
                                   "p50 ms", "p95 ms"],
                                  [[r["chunking"], r.get("default"), r.get("chunks"), r.get("hit@5"),
                                    r.get("ndcg@10"), r.get("mrr@10"), ms(r.get("p50 ms")), ms(r.get("p95 ms"))]
                                   for r in rows])]
    else:
        out += [link(path), table(["fusion", "default", "hit@5", "nDCG@10", "MRR@10", "p50 ms", "p95 ms"],
                                  [[r["fusion"], r.get("default"), r.get("hit@5"), r.get("ndcg@10"),
                                    r.get("mrr@10"), ms(r.get("p50 ms")), ms(r.get("p95 ms"))] for r in rows])]
    return out


@per_file
def render_peers(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    out.append(f"{link(path)}: set {d.get('set')}. {recorded(d, 'documents', 'queries', 'runs')}"
               + (f" {d['note']}." if d.get("note") else ""))
    loads = [s["load_1min"] for s in d["systems"] if s.get("load_1min") is not None]
    header = ["system", "hit@5", "nDCG@10", "p50 ms", "p95 ms", "ingest s", "disk MB", "p95 / ours"]
    rows = [[s["system"], s.get("hit@5"), s.get("ndcg@10"), ms(s.get("p50 ms")), ms(s.get("p95 ms")),
             num(s.get("ingest s"), 1), num(s.get("disk MB"), 1), num(s.get("p95 ms / ours"), 2)]
            + ([num(s.get("load_1min"), 1)] if loads else []) for s in d["systems"]]
    out.append(table(header + (["load (1 min)"] if loads else []), rows))
    return out


@per_file
def render_search(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    b = d.get("build", {})
    built = "reused store" if b.get("reused_store") else f"loaded in {num(b.get('load_s'), 1)} s"
    out.append(f"### {path.stem}\n\n{link(path)}: {num(d.get('documents'))} documents, {num(d.get('chunks'))} chunks "
               f"({built}, index {num(b.get('index_s'), 1)} s), {d.get('queries_per_measurement')} queries per row. "
               f"{recorded(d)}")
    rows = []
    for name, r in d.get("results", {}).items():
        if name == "concurrent" or "p50" not in r:
            continue
        rows.append([name, ms(r.get("p50")), ms(r.get("p95")), r.get("errors"), r.get("empty")])
    for name, r in d.get("references", {}).items():
        if "p50" in r:
            rows.append([f"reference: {name}", ms(r.get("p50")), ms(r.get("p95")), "-", "-"])
    out.append(table(["search", "p50 ms", "p95 ms", "errors", "empty"], rows))
    facts = []
    for name, r in d.get("references", {}).items():
        if "p50" not in r:
            facts.append(f"{name}: " + ", ".join(f"{k} {num(v)}" for k, v in r.items()))
    if d.get("ratios"):
        facts.append("ratios: " + ", ".join(f"{k} {num(v, 1)}" for k, v in d["ratios"].items()))
    if d.get("fulltext_overlap"):
        facts.append("full-text top-10 overlap with an exact BM25: " + ", ".join(
            f"{s} {num(v.get('overlap@10'))} ({v.get('proven exact')} of {v.get('queries')} proven exact)"
            for s, v in sorted(d["fulltext_overlap"].items())))
    for name, r in d.get("results", {}).items():
        if name != "concurrent" and "p50" not in r:   # e.g. the own index's size and build time
            facts.append(f"{name}: " + ", ".join(f"{k} {num(v, 1)}" for k, v in r.items()))
    conc = d.get("results", {}).get("concurrent")
    if conc:
        facts.append(f"{conc.get('searches')} concurrent searches: p50 {ms(conc.get('p50'))} ms, p95 "
                     f"{ms(conc.get('p95'))} ms, {conc.get('errors')} errors, {num(conc.get('wall_s'), 1)} s wall")
    windows = d.get("distinct windows")
    if windows:
        facts.append(f"documents: {windows.get('method')}; {num(windows.get('distinct windows available'))} available, "
                     f"{num(windows.get('chosen crossing a document boundary'))} of those drawn cross a document "
                     f"boundary, {num(windows.get('distinct chunk texts stored'))} distinct chunk texts stored")
    warm = d.get("warm_up")
    if warm:
        facts.append(f"caches warmed first by {warm.get('queries')} queries that are not measured "
                     f"({', '.join(warm.get('modes', []))}; {num(warm.get('seconds'), 1)} s)")
    elif "warm_up" in d:
        facts.append("measured cold (`--cold`): the first searches after the server started")
    if d.get("command"):
        facts.append(f"command: `{d['command']}`"
                     + (f"; load average {', '.join(f'{k} {v}' for k, v in d['load_1min'].items())}"
                        if d.get("load_1min") else ""))
    out.append("\n".join(f"- {f}" for f in facts))
    cross = d.get("filtered_dense_crossover") or {}
    if cross:
        out.append("Filtered dense search, exact scan against HNSW iterative scan:")
        out.append(table(["filter keeps", "chunks", "exact p50 ms", "HNSW p50 ms", "HNSW recall@10"],
                         [[share, v.get("chunks"), ms(v.get("exact", {}).get("p50")), ms(v.get("hnsw", {}).get("p50")),
                           v.get("hnsw recall@10", v.get("recall@10"))] for share, v in cross.items()]))
    return out


def render_service(files: list[Path]) -> str:
    rows, in_process = [], []
    for path in files:
        d = load(path)
        runs = [(d.get("workers"), d["runs"], d["median_of_runs"], "/search")]
        if d.get("reference"):
            runs.append((d.get("workers"), d["reference"]["runs"], d["reference"]["median_of_runs"],
                         f"reference: {d['reference'].get('name')}"))
        for workers, each, med, service in runs:
            cpu = med.get("cpu_ms_per_request", {})
            rows.append([link(path), str(d.get("measured_at", "-"))[:16], d.get("embedder"),
                         service, workers, "off" if str(d.get("cache", "")).startswith("off") else "hits",
                         len(each), num(med.get("requests_per_s"), 1), ms(med.get("p50_ms")), ms(med.get("p95_ms")),
                         med.get("errors"), f"{num(cpu.get('client'), 2)} / {num(cpu.get('server'), 2)} / "
                         f"{num(cpu.get('postgres'), 2)}", load_range([r.get("load_average_before_after") for r in each])])
        ip = d.get("in_process") or {}
        if ip:
            in_process.append([path.stem.removeprefix("bench_service_"), d.get("embedder"), ip.get("queries"),
                               ms(ip.get("p50_ms")), ms(ip.get("p95_ms")), num(ip.get("python_cpu_ms_per_search"), 2),
                               num(ip.get("postgres_cpu_ms_per_search"), 2),
                               ", ".join(f"{k} {num(v, 2)}" for k, v in (ip.get("stage_p50_ms") or {}).items())])
    machines = sorted({machine_text(load(p).get("machine")) for p in files})
    return "\n\n".join([
        f"Machines: {'; '.join(machines)}. Every file lists its command, each run and the server's own query log.",
        table(["file", "measured (UTC)", "embedder", "service", "workers", "cache", "runs", "requests/s", "p50 ms",
               "p95 ms", "errors", "CPU ms per request: client / server / PostgreSQL", "load (1 min)"], rows),
        "One caller in process, before the load runs:",
        table(["file", "embedder", "queries", "p50 ms", "p95 ms", "Python CPU ms", "PostgreSQL CPU ms",
               "stage p50 ms"], in_process)])


def render_ingest(files: list[Path]) -> str:
    rows, meta = [], set()
    for path in files:
        d = load(path)
        m = d.get("median", {})
        rows.append([d.get("embedder"), d.get("dataset"), d.get("documents"), d.get("chunks"),
                     f"{d.get('chunk_size')} / {d.get('chunk_overlap')}", len(d.get("runs", [])),
                     num(m.get("chunks_per_s"), 1), num(m.get("docs_per_s"), 1), num(m.get("raw_chunks_per_s"), 1),
                     f"{num(100 * m['overhead'], 1)}%" if m.get("overhead") is not None else "-",
                     f"{num(100 * m['unchanged_share'], 2)}%" if m.get("unchanged_share") is not None else "-", link(path)])
        meta.add(f"machine: {machine_text(d.get('machine'))}; measured {d.get('measured_at')}.")
    return "\n\n".join([*sorted(meta), table(
        ["embedder", "set", "documents", "chunks", "chunk / overlap", "runs", "chunks/s", "documents/s",
         "raw encode chunks/s", "pipeline overhead", "unchanged re-ingest (share of first)", "file"], rows)])


def render_scale(files: list[Path]) -> str:
    out, alone = [], []
    for path in files:
        d = load(path)
        loads = f"load average {d.get('load_1min_at_start')} at the start, {d.get('load_1min_at_end')} at the end"
        if "documents" in d:
            docs = d["documents"]
            b = docs.get("build", {})
            out.append(f"{link(path)}: {num(b.get('documents'))} documents, {num(b.get('chunks'))} chunks, ingest "
                       f"{num(b.get('load_s'), 1)} s, index {num(b.get('index_s'), 1)} s; {docs.get('queries_per_measurement')} "
                       f"queries per row; {loads}. {recorded(d)}")
            out.append(table(["search", "p50 ms", "p95 ms", "errors", "empty"],
                             [[k, ms(v.get("p50")), ms(v.get("p95")), v.get("errors"), v.get("empty")]
                              for k, v in docs.get("search", {}).items()]))
            mem = docs.get("memory", {})
            if mem:
                sizes = ", ".join(f"{k} {num(v, 1)} MB" for k, v in mem.get("sizes_mb", {}).items())
                out.append(f"- memory: benchmark process {num(mem.get('process_rss_mb'), 1)} MB, PostgreSQL server "
                           f"{num(mem.get('server_rss_mb'), 1)} MB RSS; {sizes}")
        if "store_alone" in d:
            s = d["store_alone"]
            alone.append([num(s.get("vectors")), s.get("dimensions"), num(s.get("copy_s"), 1), num(s.get("hnsw_build_s"), 1),
                          s.get("ef_search"), f"{ms(s['query_ms']['p50'])} / {ms(s['query_ms']['p95'])}",
                          f"{num(s.get('table_mb'), 1)} + {num(s.get('index_mb'), 1)}", num(s.get("server_rss_mb"), 1),
                          f"{d.get('load_1min_at_start')}-{d.get('load_1min_at_end')}", str(d.get("written", "-"))[:10],
                          link(path)])
    if alone:
        out.append("The vector store alone (a bare pgvector table, no product code):")
        out.append(table(["vectors", "dim", "COPY s", "HNSW build s", "ef_search", "query p50 / p95 ms",
                          "table + index MB", "server RSS MB", "load (start-end)", "written", "file"], alone))
    return "\n\n".join(out)


@per_file
def render_app(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    store = d.get("store", {})
    out.append(f"{link(path)}: a store of {num(store.get('documents'))} documents and {num(store.get('chunks'))} "
               f"chunks; {d.get('note')}. {recorded(d)}")
    out.append(table(["what", "median ms", "p95 ms", "runs"],
                     [[k, ms(v.get("median")), ms(v.get("p95")), v.get("runs")] for k, v in d["results"].items()]))
    return out


@per_file
def render_hardening(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    svc, gz, docx = d.get("service", {}), d.get("gzip_bomb", {}), d.get("docx_bomb", {})
    body, pm = svc.get("body_10mb", {}), svc.get("postmaster_killed", {})
    rows = [
        ["10 MB request body, with a length / streamed", f"{body.get('status_with_length')} / {body.get('status_streamed')}",
         f"server RSS {num(body.get('rss_kb_before', 0) / 1024, 1)} -> {num(body.get('rss_kb_after', 0) / 1024, 1)} MB"],
        [f"gzip bomb of {num(gz.get('bomb_bytes'))} bytes inflating to {num(gz.get('inflates_to'))}, cap {num(gz.get('cap'))}",
         gz.get("crawler", {}).get("outcome"),
         f"crawler traced peak {num(gz.get('crawler', {}).get('traced_peak_kb', 0) / 1024, 1)} MB; httpx's own "
         f"decoding {num(gz.get('httpx_decoding', {}).get('traced_peak_kb', 0) / 1024, 1)} MB"],
        [f".docx of {num(docx.get('file_bytes'))} bytes holding {num(docx.get('xml_bytes'))} bytes of XML",
         docx.get("loader", {}).get("outcome"),
         f"loader growth {num(docx.get('loader', {}).get('peak_growth_kb', 0) / 1024, 1)} MB; python-docx "
         f"{num(docx.get('python-docx', {}).get('peak_growth_kb', 0) / 1024, 1)} MB"],
        [f"postmaster killed ({pm.get('runs')} runs)", "503 from /health/ready, then back",
         f"slowest 503 answer {num(pm.get('median_slowest_503_answer_s'), 3)} s, back after "
         f"{num(pm.get('median_back_after_s'), 2)} s (medians)"],
    ]
    out += [f"{link(path)}: {recorded(d)} Load average (1 min) {d.get('load_average_1m')} before, "
            f"{d.get('load_average_1m_after')} after.", table(["attack", "outcome", "cost"], rows)]
    return out


@per_file
def render_answers(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    if "means" in d:
        out += [f"{link(path)}: {d.get('turns')} turns of {d.get('set')}, answerer: {d.get('answerer')}. "
                f"{d.get('llm_metrics') if d.get('llm_means') is None else ''}",
                table(["ragas metric", "mean"], [[k, v] for k, v in d["means"].items()])]
    else:
        lat = d.get("latency_s", {})
        keys = ["answer_contains_reference", "first_sentence_contains_reference", "context_contains_reference",
                "hit_at_k", "cited_relevant", "no_sources"]
        out += [f"{link(path)}: {d.get('queries')} questions of {d.get('set')}, {d.get('k')} passages, LLM "
                f"`{d.get('llm')}`, similarity floor {d.get('floor_used')}; latency p50 {num(lat.get('p50'), 2)} s, "
                f"p95 {num(lat.get('p95'), 2)} s.",
                table(["measure", "share"], [[k.replace("_", " "), d.get(k)] for k in keys if k in d])]
    return out


def render_search_floor(files: list[Path]) -> str:
    rows = []
    for path in files:
        d = load(path)
        for n, run in enumerate(d.get("runs", []), 1):
            hyb, floor = run["hybrid search"], run["floor (embedding + bare HNSW top-10)"]
            rows.append([link(path), d.get("code", ""), n, d.get("chunks"), ms(hyb["p50"]), ms(hyb["p95"]),
                         ms(floor["p50"]), ms(floor["p95"]), run["ratio of p50s"], num(run.get("load"), 1)])
    return table(["file", "code", "run", "chunks", "hybrid p50", "hybrid p95", "floor p50", "floor p95",
                  "ratio of p50s", "load"], rows)


@per_file
def render_multiturn(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    res = d["results"]
    turns = len(next(iter(res.values())).get("records", [])) if res else 0
    langs = [k for k in next(iter(res.values()))["top3"] if k != "all"] if res else []
    out.append(f"{link(path)}: embedder {d.get('embedder')}, {turns} turns. Share of turns whose expected source is "
               "among the answer's top three sources / first:")
    out.append(table(["strategy", *[f"{lang} top 3 / first" for lang in langs], "all top 3 / first"],
                     [[name, *[f"{num(r['top3'][lang])} / {num(r['first'][lang])}" for lang in [*langs, "all"]]]
                      for name, r in res.items()]))
    return out


@per_file
def render_other(path: Path, d: Any) -> list[str]:
    out: list[str] = []
    flat = [[k, v] for k, v in (d.items() if isinstance(d, dict) else []) if isinstance(v, (int, float, str, bool))]
    out += [link(path), table(["field", "value"], flat) if flat else "(no scalar fields)"]
    return out


@dataclass(frozen=True)
class Benchmark:
    title: str
    pattern: str                     # a regular expression over the file's stem
    description: str                 # prose only: every figure comes from the files
    render: Callable[[list[Path]], str]


BENCHMARKS = [
    Benchmark("Retrieval quality (`rag eval`)", r"retrieval_(?!summary).+",
              "Every judged query of a shared set sent through `Workbench.search` with the cache off, per set and "
              "mode, results counted per document (`rag eval SET --mode MODE --json -o FILE`, or notebook 01 through "
              "`make eval`). hit@5 is the search spec's target (a relevant result in the top 5 for over 85% of "
              "queries); latency is the wall time of one search, query embedding and highlights included.",
              render_retrieval),
    Benchmark("Retrieval quality, notebook 01's summary", r"retrieval_summary",
              "The same runs as notebook 01 tabulates them, with whether each meets its target (hit@5 > 0.85, "
              "p95 < 1 s).", render_retrieval_summary),
    Benchmark("Embedders, dense retrieval alone", r"embedders.*",
              "`eval/compare_embedders.py`: each embedder encodes whole documents (no chunking) and ranks them by "
              "exact cosine, so the figures compare the models, not the store. Speeds depend on the machine's load, "
              "which each file records.", render_embedders),
    Benchmark("Fusion settings for e5-small", r"fusion_e5_small",
              "`eval/sweep_fusion_lists.py`: the dense and BM25 top-100 chunk lists of every query of the whole sets "
              "are cached once, and each fusion setting (RRF, convex, min-max; best chunk or best share of each side) "
              "is rebuilt from them as the SQL does, with no re-embedding. The setting with the largest worst-set "
              "margin is the one `FUSION_BY_EMBEDDER` uses (see [hybrid.md](hybrid.md)).", render_fusion_sweep),
    Benchmark("Query-adaptive fusion, document pooling and BM25 parameters", r"fusion_adaptive.*",
              "`eval/sweep_fusion_lists.py adaptive` on the same cached lists: rules that set the fusion weight per "
              "query from signals a search already has, document scores pooled from all chunks, and BM25 k1 x b, each "
              "scored on queries it was not fitted on (leave one set out, and halves within each set). A rule "
              "counts only when it generalises in every split.", render_fusion_adaptive),
    Benchmark("Chunking and fusion sweeps (notebook 02)", r"sweep_(chunking|fusion)",
              "Notebook 02 on SciFact, hybrid search: each chunk size and overlap re-chunks and re-embeds the corpus; "
              "each fusion setting re-ranks the same chunks.", render_sweeps),
    Benchmark("Peers on the same chunks", r"(bench_)?peers.*",
              "`eval/bench_peers.py` and notebook 04: the corpus is chunked and embedded once and every system gets "
              "the same chunks and vectors, so quality differences are the ranking's. Latency includes query "
              "embedding (not for bm25s); ours also includes highlights, suggestions and the query-log write.",
              render_peers),
    Benchmark("Search latency in process (`eval/bench_search.py`)", r"bench_search.*",
              "A store of real, distinct documents of the shared sets (or their 1-3 sentence windows for 100K and "
              "more), searched in three languages per mode with and without filters; beside it, in the same run, "
              "bm25s, a bare pgvector HNSW query and ChromaDB on the same chunks, the overlap of the pruned full-text "
              "ranking with an exact BM25, and the exact-scan/HNSW crossover the planner's cost model is set from.",
              render_search),
    Benchmark("Hybrid search against its floor (`eval/bench_search_floor.py`)", r"search_floor_.+",
              "In-process `Workbench.search` (hybrid, cache and query-vector cache off) against the query embedding "
              "plus a bare pgvector HNSW top-10 on the same store, alternating query by query so load falls on both "
              "alike. The floor is mostly the embedding, which a loaded machine slows most: compare ratios at "
              "similar load.", render_search_floor),
    Benchmark("The REST service under load (`eval/bench_service.py`)", r"bench_service_.+",
              "`rag serve` on loopback over SciFact's chunks, driven by 100 aiohttp clients in a process of their own "
              "(which report their own CPU, so the client is not the bottleneck). Cache off means every request is a "
              "distinct text; `--cache` repeats 400 warmed queries. `--reference bare` adds a floor service that only "
              "parses, embeds the query and runs one bare HNSW top-10. CPU per request is the figure that transfers "
              "between machines; requests/s and latency follow the machine's load.", render_service),
    Benchmark("Ingest (`eval/bench_ingest.py`)", r"bench_ingest_.+",
              "SciFact abstracts ingested into a fresh database per run, beside a raw encode of the same chunks: the "
              "pipeline overhead is chunking, hashing, PostgreSQL writes and the postings; the unchanged re-ingest "
              "embeds nothing.", render_ingest),
    Benchmark("Scale (`eval/bench_scale.py`)", r"bench_scale.*",
              "Search over a store of 100K documents built through `Workbench.ingest_texts`, and the vector store "
              "alone at 200K and 1M vectors (noisy copies of real embeddings: the printed recall does not measure "
              "the index, since the copies are near-ties).", render_scale),
    Benchmark("The app's reads (`eval/bench_app.py`)", r"bench_app",
              "What each Streamlit page and the Workbench reads behind it cost on a large store.", render_app),
    Benchmark("Hardening (`eval/bench_hardening.py`)", r"hardening",
              "Oversized bodies, compression bombs and a killed database server against the real service and "
              "loaders (the rules are in [security.md](security.md)).", render_hardening),
    Benchmark("Chat answers (`eval/bench_answers.py`, notebook 03)", r"answers.*",
              "JSQuAD questions answered by `wb.chat` with the offline extractive answerer: how often the answer "
              "contains a reference answer span, and ragas' metrics that need no judge LLM.", render_answers),
    Benchmark("Multi-turn chat (`eval/bench_multiturn.py`)", r"multiturn",
              "The conversations written for the chat tests (English, Russian, Japanese; follow-ups and topic "
              "switches), under the follow-up rule and the strategies it replaced.", render_multiturn),
]


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def result_files(results: Path = RESULTS) -> list[Path]:
    """Every results file: eval/results/*.json and an embedder's own folder (eval/results/e5-small/*.json);
    charts/ holds Plotly figures and notebooks/ the executed notebooks, not results."""
    return sorted([*results.glob("*.json"), *(p for p in results.glob("*/*.json") if p.parent.name not in NOT_RESULTS)])


def render(results: Path = RESULTS) -> str:
    """The whole of docs/benchmarks.md for the files in `results`."""
    files = result_files(results)
    taken: set[Path] = set()
    sections = []
    for bench in BENCHMARKS:
        mine = [p for p in files if p not in taken and re.fullmatch(bench.pattern, p.stem)]
        if mine:
            taken.update(mine)
            sections.append((bench.title, bench.description, bench.render(mine)))
    rest = [p for p in files if p not in taken]
    if rest:
        sections.append(("Other results", "Files no renderer above knows yet: their scalar fields.", render_other(rest)))
    head = [
        "# Benchmarks",
        "",
        "<!-- Generated by eval/benchmarks_doc.py from eval/results/*.json: do not edit by hand; "
        "run `make benchmarks-doc`. -->",
        "",
        "Every figure on this page is read from a results file in [eval/results/](../eval/results/), written by the "
        "benchmark named in each section; the descriptions are prose kept in `eval/benchmarks_doc.py`. A figure is "
        "what one machine gave at one time: each section gives the machine, the date and, where the file records it, "
        "the load average (the machines are shared, so a latency measured under load is higher than an idle "
        "machine's). To add a measurement, have its benchmark write a JSON file there and run `make benchmarks-doc`.",
        "",
        *[f"- [{title}](#{slug(title)})" for title, _, _ in sections],
    ]
    body = [f"## {title}\n\n{description}\n\n{content}" for title, description, content in sections]
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/benchmarks.md differs from a fresh render")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(REPO)} is out of date: run `make benchmarks-doc`.", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)} from {len(result_files())} results files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`rag jobs` and `rag worker`: background jobs and the processes that run them."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from rag_core.cli import common
from rag_core.cli.common import app, console, markup_text, out, print_json, run_safely

jobs_app = typer.Typer(help="Background jobs (`--background` on ingest, crawl, add, reindex).", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")


def report_enqueued(wb: Any, job_id: int, as_json: bool) -> None:
    """What `--background` prints: the job id (JSON with --json), and a hint when no worker will take it."""
    if as_json:
        print_json({"job_id": job_id})
    else:
        out.print(f"Queued job {job_id}; `rag jobs show {job_id}` follows it.")
    if not wb.job_workers_alive():
        console.print("[yellow]No worker is running:[/yellow] start one with `rag worker` (or `rag serve` / the app, "
                      "which run queued jobs themselves) and the job begins.")


def _progress(job: dict[str, Any]) -> str:
    if job["total"] is None:
        return "-"
    return f"{job['done']}/{job['total']}"


@jobs_app.command("list")
@run_safely
def list_jobs(
    site: Optional[str] = typer.Option(None, "--site", help="Only this site's jobs."),
    limit: int = typer.Option(50, "--limit", help="How many jobs (running and queued first)."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Running and queued jobs, then the latest finished ones."""
    with common.workbench() as wb:
        jobs = wb.jobs(site_id=site, limit=limit)
    if as_json:
        print_json(jobs)
        return
    if not jobs:
        console.print("No jobs yet: `rag ingest PATH --background` queues one.")
        return
    table = Table(box=None)
    for column in ("id", "kind", "site", "status", "progress", "errors", "created", "what"):
        table.add_column(column)
    for job in jobs:
        table.add_row(str(job["id"]), job["kind"], job["site_id"] or "*", job["status"], _progress(job),
                      str(len(job["errors"])), f"{job['created_at']:%Y-%m-%d %H:%M:%S}", job["description"])
    out.print(table)


@jobs_app.command("show")
@run_safely
def show_job(
    job_id: int = typer.Argument(..., help="The job's id (`rag jobs list`)."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """One job: status, progress, errors per file, timestamps and its report when done."""
    with common.workbench() as wb:
        job = wb.job(job_id)
    if as_json:
        print_json(job)
        return
    rows = [("job", f"{job['id']} ({job['kind']}: {job['description']})"), ("site", job["site_id"] or "every site"),
            ("status", job["status"] + (" (cancel requested)" if job["cancel_requested"] else "")),
            ("progress", f"{_progress(job)}, {job['chunks']} chunks" + (f", on {job['current']}" if job["current"] else "")),
            ("runs", str(job["runs"])), ("created", str(job["created_at"])), ("started", str(job["started_at"] or "-")),
            ("finished", str(job["finished_at"] or "-"))]
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(f"[bold]{key}[/bold]", markup_text(value))
    out.print(table)
    for err in job["errors"][:20]:
        out.print(f"  [red]failed[/red] {markup_text(err['source'] or job['description'])}: {markup_text(err['reason'])}")
    if len(job["errors"]) > 20:
        out.print(f"  ... and {len(job['errors']) - 20} more (`--json` lists them all)")


@jobs_app.command("cancel")
@run_safely
def cancel_job(job_id: int = typer.Argument(..., help="The job's id (`rag jobs list`).")) -> None:
    """Cancel a queued job, or stop a running one after the file or batch it is on (what is stored stays)."""
    with common.workbench() as wb:
        job = wb.cancel_job(job_id)
    what = "cancelled" if job["status"] == "cancelled" else "will stop after its current file or batch"
    out.print(f"Job {job_id} {what}.")


@app.command()
@run_safely
def worker(
    concurrency: int = typer.Option(1, "--concurrency", help="Jobs run at once by this worker (threads)."),
) -> None:
    """Run background jobs until stopped (Ctrl+C or SIGTERM finish the running jobs first)."""
    with common.workbench() as wb:
        console.print(f"Worker started ({concurrency} at a time); waiting for jobs. Ctrl+C stops it.")
        wb.run_worker(concurrency)
    console.print("Worker stopped.")

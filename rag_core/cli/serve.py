"""`rag serve`: the REST service under uvicorn, on loopback unless told otherwise."""

from __future__ import annotations

import typer

from rag_core.api.service_logging import QUIET_LOGGERS, configure_logging, uvicorn_log_config
from rag_core.cli.common import app, console, run_safely

WORKER_HEALTHCHECK_SEC = 60
__all__ = ["QUIET_LOGGERS", "configure_logging", "serve"]


@app.command()
@run_safely
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; beyond loopback needs API keys."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    workers: int = typer.Option(1, "--workers", min=1, max=64,
                                help="Worker processes; set RAG_REDIS_URL to share rate limits and the cache."),
) -> None:
    """Start the REST service (FastAPI): documents, search, chat, context; OpenAPI at /docs."""
    import uvicorn

    from rag_core.api.auth import KeyRing, check_bind
    from rag_core.api.ratelimit import RateLimiter
    from rag_core.api.rest import create_app, document_char_budget, warn_if_open
    from rag_core.api.retention_schedule import parse_purge_time, start_retention_scheduler
    from rag_core.settings import load_settings

    configure_logging(with_pid=workers > 1)
    settings = load_settings()
    keys = KeyRing.from_settings(settings.api_keys, settings.admin_api_key)
    check_bind(host, keys)
    # RAG_EMBEDDER unset: a store built with another embedder keeps its own (the workbench logs which)
    embedder = settings.embedder if "embedder" in settings.model_fields_set else \
        f"{settings.embedder} (default) or the store's own"
    console.print(f"REST service on http://{host}:{port} (OpenAPI at /docs), {workers} worker(s); "
                  f"embedder {embedder}; rate limit {settings.rate_limit or 'off'} per key, "
                  f"{'shared through Redis' if settings.redis_url else 'kept in the process'}.", soft_wrap=True)
    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        return
    warn_if_open(keys)  # once here: the workers leave it out
    if not settings.redis_url:
        console.print(f"[yellow]Without RAG_REDIS_URL each of the {workers} workers keeps its own rate-limit "
                      "counters and search cache: a key may make up to N times the limit.[/yellow]", soft_wrap=True)
    RateLimiter(settings.rate_limit, settings.redis_url)  # a bad limit or a dead Redis stops us before forking
    document_char_budget(settings)
    parse_purge_time(settings.retention_time)
    from rag_core import open_workbench

    # The daily purge runs once, here in the supervisor, rather than once per worker.
    with open_workbench(settings) as wb:
        scheduler = start_retention_scheduler(wb, settings.retention_time)
        try:
            # uvicorn restarts a worker that misses a 5 s ping; a worker busy with a burst of searches (or
            # loading its model) on a loaded machine misses it and was killed with requests in flight.
            uvicorn.run("rag_core.api.rest:create_worker_app", factory=True, host=host, port=port, workers=workers,
                        log_level="info", log_config=uvicorn_log_config(with_pid=True),
                        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SEC)
        finally:
            scheduler.shutdown(wait=False)

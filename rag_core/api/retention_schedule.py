"""The daily retention purge inside the service (APScheduler 3): time RAG_RETENTION_TIME, policy RAG_RETENTION_DAYS."""

from __future__ import annotations

import logging
import re
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from rag_core.errors import ConfigError

log = logging.getLogger(__name__)

JOB_ID = "retention-purge"
_TIME = re.compile(r"^\s*([01]?\d|2[0-3]):([0-5]\d)\s*$")


def parse_purge_time(text: str) -> tuple[int, int]:
    """RAG_RETENTION_TIME `HH:MM` (24-hour, server local time) as (hour, minute)."""
    match = _TIME.match(text or "")
    if not match:
        raise ConfigError(f"RAG_RETENTION_TIME: '{text}' is not a time of day; write HH:MM, e.g. 03:00.")
    return int(match.group(1)), int(match.group(2))


def run_retention_purge(workbench: Any) -> dict[str, Any]:
    """The job: purge chat messages older than the policy and log the summary."""
    try:
        summary = workbench.purge_chat_history(triggered_by="schedule")
    except Exception:
        log.exception("Scheduled retention purge failed; it runs again at the next scheduled time.")
        raise
    log.info("Retention purge: %s messages and %s empty sessions older than %g days deleted "
             "(cutoff %s, oldest remaining %s, %.0f ms, audit %s).",
             summary["messages_deleted"], summary["sessions_deleted"], summary["older_than_days"],
             summary["cutoff"], summary["oldest_remaining"], summary["duration_ms"], summary["audit_id"])
    return summary


def retention_trigger(purge_time: str) -> CronTrigger:
    """Every day at the configured time, in the server's local time zone."""
    hour, minute = parse_purge_time(purge_time)
    return CronTrigger(hour=hour, minute=minute)


def start_retention_scheduler(workbench: Any, purge_time: str) -> BackgroundScheduler:
    """Start a background scheduler that runs the purge daily; stop it with `.shutdown()`."""
    scheduler = BackgroundScheduler()
    # coalesce + grace: a server asleep at 03:00 purges once on waking, not once per missed day.
    scheduler.add_job(run_retention_purge, retention_trigger(purge_time), args=[workbench], id=JOB_ID,
                      name="daily chat-history retention purge", coalesce=True, max_instances=1,
                      misfire_grace_time=6 * 3600)
    scheduler.start()
    job = scheduler.get_job(JOB_ID)
    log.info("Retention purge scheduled daily at %s (next run %s).", purge_time.strip(), job.next_run_time)
    return scheduler

"""The daily retention purge: APScheduler fires the job at RAG_RETENTION_TIME on a controlled clock."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid

import pytest
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED
from apscheduler.executors import base as executor_base
from apscheduler.schedulers import base as scheduler_base

from rag_core.api import retention_schedule as purge
from rag_core.errors import ConfigError


class FakeClock:
    """What APScheduler reads as `datetime.now`: a time the test sets."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start
        clock = self

        class FakeDatetime(dt.datetime):
            @classmethod
            def now(cls, tz=None):  # noqa: D401 - APScheduler's call
                return clock.now.astimezone(tz) if tz else clock.now.replace(tzinfo=None)

        self.datetime = FakeDatetime


@pytest.fixture
def clock(monkeypatch):
    local = dt.datetime.now().astimezone().tzinfo
    # A day in the future, so the executor's misfire check (real time vs run time) never drops the run.
    start = (dt.datetime.now(local) + dt.timedelta(days=400)).replace(hour=2, minute=59, second=0, microsecond=0)
    fake = FakeClock(start)
    monkeypatch.setattr(scheduler_base, "datetime", fake.datetime)
    monkeypatch.setattr(executor_base, "datetime", fake.datetime)
    return fake


def backdate(wb, message_id: int, days: int) -> None:
    with wb.db.connection() as conn:
        conn.execute("UPDATE chat_messages SET created_at = now() - make_interval(days => %s) WHERE id = %s",
                     (days, message_id))


def test_daily_job_purges_old_messages_at_the_configured_time(wb, clock, caplog):
    caplog.set_level(logging.INFO, logger="rag_core.api.retention_schedule")
    session = f"ret-{uuid.uuid4().hex[:8]}"
    old = wb.chat_append(session, "user", "said 45 days ago")
    recent = wb.chat_append(session, "user", "said 2 days ago")
    backdate(wb, old["id"], 45)
    backdate(wb, recent["id"], 2)
    ran = threading.Event()
    scheduler = purge.start_retention_scheduler(wb, "03:00")
    scheduler.add_listener(lambda event: ran.set(), EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    try:
        job = scheduler.get_job(purge.JOB_ID)
        assert job.next_run_time == clock.now.replace(hour=3, minute=0)
        scheduler.wakeup()
        assert not ran.wait(0.5)  # 02:59: not due yet
        assert [m["id"] for m in wb.chat_history(session)] == [old["id"], recent["id"]]

        clock.now = clock.now.replace(hour=3, minute=0, second=1)
        scheduler.wakeup()
        assert ran.wait(30), "the purge job did not run at 03:00"
        assert [m["id"] for m in wb.chat_history(session)] == [recent["id"]]
        assert scheduler.get_job(purge.JOB_ID).next_run_time == (clock.now + dt.timedelta(days=1)).replace(second=0)
    finally:
        scheduler.shutdown(wait=True)
        wb.chat_reset(session)
    summaries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Retention purge:")]
    assert len(summaries) == 1
    assert "older than 30 days deleted" in summaries[0]
    last = wb.retention_status()["last_purges"][0]
    assert last["triggered_by"] == "schedule" and last["messages_deleted"] >= 1
    assert f"audit {last['id']}" in summaries[0]


def test_purge_time_is_validated():
    assert purge.parse_purge_time("3:05") == (3, 5)
    assert purge.parse_purge_time(" 23:59 ") == (23, 59)
    for bad in ("24:00", "3pm", "03:60", ""):
        with pytest.raises(ConfigError, match="RAG_RETENTION_TIME"):
            purge.parse_purge_time(bad)


def test_service_start_refuses_a_bad_purge_time(make_settings, wb):
    from rag_core.api.rest import create_app

    with pytest.raises(ConfigError, match="RAG_RETENTION_TIME: '25:00'"):
        create_app(make_settings(retention_time="25:00"), workbench=wb)

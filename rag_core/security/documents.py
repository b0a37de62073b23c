"""The rules every document meets before it is stored, whichever way it comes in: `rag ingest`, REST and MCP,
`ingest_texts`, a crawl, LlamaIndex's vector store and `rag import llamaindex`.

Its site is a valid id (used verbatim: `' site_b'` is refused, not stripped), its source a name with no
control or text-direction character, its text storable and within MAX_DOCUMENT_CHARS. A title taken from a
document's own content is cleaned (`visible_title`); a title a caller names is checked with `check_label`.
"""

from __future__ import annotations

from rag_core.errors import InvalidInput
from rag_core.limits import MAX_DOCUMENT_CHARS, check_text_length
from rag_core.security.ids import check_id
from rag_core.security.text import check_label, check_storable


def check_document(site_id: str, source: str, text: str | None = None) -> None:
    """Raise InvalidInput naming the rule when a document with this site, source and text may not be stored."""
    check_id(site_id, "site_id")
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("source is empty; give a file name or URL that identifies the text.",
                           details={"field": "source"})
    check_label(source, "source")
    if text is not None:
        check_text_length(text, MAX_DOCUMENT_CHARS, "content")
        check_storable(text, "content")

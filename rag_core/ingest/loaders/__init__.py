"""Turn files and fetched bytes into plain text with a title, type and page spans.

Every loader returns the text exactly as it will be chunked: chunks store character offsets
into `LoadedDocument.text`, and PDF page spans are computed on that same final string.
Every failure is raised as `LoaderError` with a message that names the problem and the fix;
library exceptions never escape unwrapped.

One module per format family (`text` for Markdown and plain text, `pdf`, `word` for DOCX, `sheets`
for XLSX and CSV, `html_text`), plus `encoding` (charset detection), `document` (the result type and
shared clean-up) and `files` (which loader reads which file, size limits).
"""

from rag_core.ingest.loaders.document import LoadedDocument
from rag_core.ingest.loaders.files import SUPPORTED_TYPES, file_type_for, load_bytes, load_file, unsupported_reason
from rag_core.ingest.loaders.html_text import load_html_bytes

__all__ = ["SUPPORTED_TYPES", "LoadedDocument", "file_type_for", "load_bytes", "load_file", "load_html_bytes",
           "unsupported_reason"]

"""Every size cap of the workbench in one place: what a caller may send and what may get embedded.

A text that reaches an embedder costs memory in proportion to its length (about 4 KB per character
for the packaged model), so each surface (REST, MCP, CLI, app, Workbench) refuses texts over these
caps with a message naming the limit, and the embedders cut their input as a last line of defence.
"""

from __future__ import annotations

from rag_core.errors import InvalidInput

# ----- texts -----
MAX_QUERY_CHARS = 500            # a search query
MAX_MESSAGE_CHARS = 8_000        # a chat message, a stored chat-memory message, a context query
MAX_ANSWER_CHARS = 100_000       # a stored assistant answer (a model's, or one a client sends): never embedded
MAX_DOCUMENT_CHARS = 5_000_000   # one document's text: sent as text or extracted from a file
MAX_ID_CHARS = 200               # a session, user or site id
# What an embedder reads of one text, as a last line of defence behind the caps above: the largest
# chunk RAG_CHUNK_SIZE allows, so no stored chunk is ever cut.
MAX_EMBED_INPUT_CHARS = 20_000

# ----- request bodies (bytes) -----
MAX_REQUEST_BYTES = 1_000_000    # every JSON body but a document's: room for a 100,000-character answer, escaped
# A request to the Slack bot (an event or a slash command): Slack's own are a few KB; a 40,000-character
# message escaped as JSON, twice (text and blocks), stays under it. Refused before the signature is checked.
MAX_SLACK_BODY_BYTES = 1_000_000
SLACK_BODY_TIMEOUT_SEC = 10.0    # to receive that body: Slack itself wants an answer within 3 seconds
# A document's body: its text at up to four UTF-8 bytes a character, plus room for the other fields.
MAX_DOCUMENT_REQUEST_BYTES = 4 * MAX_DOCUMENT_CHARS + 64_000
# An upload's form beyond its files' bytes (RAG_MAX_FILE_MB bounds those): part headers, names, the site id.
MAX_UPLOAD_FORM_BYTES = 64_000

# ----- compressed input -----
# Office files (docx, xlsx) are zip archives: their declared sizes are checked before anything is
# inflated (Python's zipfile never returns more than a member declares).
ARCHIVE_MAX_MEMBERS = 10_000
ARCHIVE_MAX_MEMBER_BYTES = 100_000_000
ARCHIVE_MAX_TOTAL_BYTES = 200_000_000
# Office XML compresses about 5-20 fold; a member over 1 MB that shrank more than 100 fold is a bomb.
ARCHIVE_MAX_RATIO = 100
ARCHIVE_RATIO_FLOOR_BYTES = 1_000_000
# Cells read from one spreadsheet, empty ones included: a row is read as wide as its last cell, so one cell in
# column XFD makes it 16,384 cells (a 108 KB .xlsx of such rows cost 14 s of CPU and held no text).
MAX_SHEET_CELLS = 20_000_000
# A PDF's page contents once inflated, counted per page (pages may share one stream): text extraction reads
# about half a megabyte a second, and 20 pages sharing one 1 MB stream in a 5 KB file cost 55 s.
PDF_MAX_CONTENT_BYTES = 100_000_000
# Strings in a workbook's shared-strings table: openpyxl reads each one as an object (about 20 us and 250 bytes on
# the test machine), before a single row; a 4.5 MB .xlsx of a million took 19 s and 250 MB and gave no text.
XLSX_MAX_SHARED_STRINGS = 500_000
# XML elements in a .docx's main document part: python-docx holds the whole tree, about 200 bytes per element (a
# 5.6 MB .docx of 2.3 million short paragraphs, 7 million elements, took 32 s and 1.4 GB before its text was
# refused). A document at the text cap (MAX_DOCUMENT_CHARS) of four formatted runs a paragraph holds 1.1 million
# (25 MB of XML, 332 MB while python-docx reads it), so this leaves room for formatting three times as dense.
DOCX_MAX_ELEMENTS = 3_000_000
# HTML: trafilatura spends about 55 us per element (a 1 MB page of 125,000 paragraphs took 9.6 s, and a 5 MB crawled
# page four times that); past this many tags the page is read by lxml alone, twenty times faster. No page is
# parsed past HTML_MAX_MARKUP_CHARS: the tree costs about 45 bytes of memory per character of markup.
HTML_MAX_EXTRACTOR_TAGS = 100_000
HTML_MAX_MARKUP_CHARS = 10_000_000
PDF_MAX_CONTENT_RATIO = 100


def check_text_length(text: str | None, limit: int, field: str) -> None:
    """Refuse a text longer than `limit` characters with InvalidInput naming the field and the cap."""
    if text is not None and len(text) > limit:
        raise InvalidInput(f"{field} is {len(text)} characters; the limit is {limit}. Shorten it.",
                           details={"field": field, "length": len(text), "limit": limit})

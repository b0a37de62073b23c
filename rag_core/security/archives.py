"""Compressed input under a bound: Office zip files checked before they are opened, HTTP bodies
inflated piece by piece.

A 1 MB .docx can hold 1 GiB of XML, and a gzip body of a few kilobytes can inflate to gigabytes.
Office files are refused on their declared sizes and compression ratios before any library
parses them (Python's zipfile never returns more than a member declares, so the declared sizes
bound what can come out); HTTP bodies are inflated with an output bound per step, so memory stays
near the caller's byte cap however small the network chunks are.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib

from rag_core.errors import LoaderError
from rag_core.limits import (
    ARCHIVE_MAX_MEMBER_BYTES, ARCHIVE_MAX_MEMBERS, ARCHIVE_MAX_RATIO, ARCHIVE_MAX_TOTAL_BYTES,
    ARCHIVE_RATIO_FLOOR_BYTES, DOCX_MAX_ELEMENTS, XLSX_MAX_SHARED_STRINGS,
)


def _bomb(message: str, **details: object) -> LoaderError:
    return LoaderError(f"{message} It looks like a zip bomb, so it was not opened; if the file is genuine, "
                       "split it into smaller files.", details={"reason": "archive_limits", **details})


def check_office_zip(data: bytes, kind: str) -> None:
    """Refuse a docx/xlsx whose zip members declare too much content or compress implausibly well.

    A file that is not a zip at all passes: the format's own loader reports it as corrupt.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError):
        return
    if len(members) > ARCHIVE_MAX_MEMBERS:
        raise _bomb(f"The {kind} file holds {len(members)} parts; at most {ARCHIVE_MAX_MEMBERS} are read.",
                    members=len(members))
    total = 0
    for member in members:
        size = member.file_size
        total += size
        if size > ARCHIVE_MAX_MEMBER_BYTES:
            raise _bomb(f"The {kind} part {member.filename} unpacks to {size} bytes; the limit is "
                        f"{ARCHIVE_MAX_MEMBER_BYTES}.", member=member.filename, size=size)
        ratio = size / max(member.compress_size, 1)
        if size > ARCHIVE_RATIO_FLOOR_BYTES and ratio > ARCHIVE_MAX_RATIO:
            raise _bomb(f"The {kind} part {member.filename} unpacks {ratio:.0f} times larger than it is stored "
                        f"({size} bytes); documents compress at most about {ARCHIVE_MAX_RATIO} times.",
                        member=member.filename, size=size, ratio=round(ratio))
    if total > ARCHIVE_MAX_TOTAL_BYTES:
        raise _bomb(f"The {kind} file unpacks to {total} bytes; the limit is {ARCHIVE_MAX_TOTAL_BYTES}.", size=total)


_OVERRIDE = re.compile(rb"<(?:\w+:)?Override\b[^>]*>")
_PART_NAME = re.compile(rb'PartName\s*=\s*["\']/?([^"\']+)["\']')
_SHARED_STRINGS_TYPE = b"spreadsheetml.sharedStrings+xml"
_DOCUMENT_TYPE = b"wordprocessingml.document.main+xml"
_STRING_ITEM = re.compile(rb"<(?:\w+:)?si[\s>/]")
_ELEMENT = re.compile(rb"<[A-Za-z]")  # a start tag (or an empty element): one element of the tree
_TYPES_MAX_BYTES = 1_000_000


def _declared_parts(archive: zipfile.ZipFile, content_type: bytes) -> list[str]:
    """The parts `[Content_Types].xml` declares with `content_type` (where the format's library looks), present
    in the archive; none when that table is missing or oversized (the library then reports the file itself)."""
    names = set(archive.namelist())
    if "[Content_Types].xml" not in names or archive.getinfo("[Content_Types].xml").file_size > _TYPES_MAX_BYTES:
        return []
    types = archive.read("[Content_Types].xml")
    parts = [m.group(1).decode("utf-8", "replace") for o in _OVERRIDE.finditer(types)
             if content_type in o.group() and (m := _PART_NAME.search(o.group()))]
    return [part for part in parts if part in names]


def check_xlsx_strings(data: bytes) -> None:
    """Refuse a workbook whose shared-strings table holds more than XLSX_MAX_SHARED_STRINGS strings, counted
    before openpyxl reads them all into memory."""
    _refuse_parts_over(data, _SHARED_STRINGS_TYPE, _STRING_ITEM, XLSX_MAX_SHARED_STRINGS, "strings",
                       "The XLSX file's shared-strings table holds more than {cap:,} strings; a workbook whose text "
                       "fits one document holds far fewer.")


def check_docx_elements(data: bytes) -> None:
    """Refuse a .docx whose main document part holds more than DOCX_MAX_ELEMENTS XML elements, counted before
    python-docx builds the whole tree: within the zip caps, a few megabytes of short paragraphs cost gigabytes
    and half a minute only to be refused for their text afterwards."""
    _refuse_parts_over(data, _DOCUMENT_TYPE, _ELEMENT, DOCX_MAX_ELEMENTS, "elements",
                       "The DOCX file's document holds more than {cap:,} XML elements; a document whose text fits "
                       "the limit per document holds far fewer.")


def _refuse_parts_over(data: bytes, content_type: bytes, pattern: re.Pattern[bytes], cap: int, what: str,
                       message: str) -> None:
    """Count `pattern` in each part declared as `content_type` while it inflates piece by piece; refuse the
    file past `cap`. A file that is not a readable zip passes: the format's own loader reports it."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for part in _declared_parts(archive, content_type):
                count = _count_items(archive, part, pattern, cap)
                if count > cap:
                    raise _bomb(message.format(cap=cap), member=part, **{what: count})
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, zlib.error):
        return


def _count_items(archive: zipfile.ZipFile, part: str, pattern: re.Pattern[bytes], cap: int) -> int:
    """Matches of `pattern` in `part`, read 1 MB at a time; stops once past `cap`."""
    count, tail = 0, b""
    with archive.open(part) as stream:
        while chunk := stream.read(1 << 20):
            window = tail + chunk
            count += len(pattern.findall(window))
            tail = window[-64:]
            count -= len(pattern.findall(tail))  # an item cut by the boundary is counted in the next window
            if count > cap:
                break
    return count + len(pattern.findall(tail))


class InflateLimitExceeded(Exception):
    """The inflated body passed the byte limit."""


class UnsupportedEncoding(Exception):
    """A Content-Encoding other than identity, gzip and deflate (the only ones the crawler asks for)."""


class BoundedInflater:
    """Decodes an HTTP body of one Content-Encoding, never producing more than `limit` bytes in all.

    Each network chunk is inflated in steps whose output is capped by what the limit still allows,
    so a chunk that would inflate to gigabytes costs at most `limit` bytes before it is refused.
    """

    def __init__(self, encoding: str, limit: int) -> None:
        encoding = (encoding or "identity").strip().lower()
        self.limit = limit
        self.total = 0
        self._raw_deflate_tried = False
        if encoding in ("", "identity"):
            self._inflater = None
        elif encoding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise UnsupportedEncoding(encoding)
        self._encoding = encoding

    def feed(self, chunk: bytes) -> bytes:
        """The decoded bytes of one network chunk; raises InflateLimitExceeded past the limit."""
        if self._inflater is None:
            return self._count(chunk)
        out = bytearray()
        pending = chunk
        while pending:
            room = self.limit - self.total - len(out) + 1  # one byte more than allowed tells "too large"
            try:
                piece = self._inflater.decompress(pending, room)
            except zlib.error:
                if self._encoding == "deflate" and not self._raw_deflate_tried and self.total == 0 and not out:
                    # Some servers send raw deflate without the zlib header the standard asks for.
                    self._raw_deflate_tried = True
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise
            out += piece
            if self.total + len(out) > self.limit:
                raise InflateLimitExceeded()
            pending = self._inflater.unconsumed_tail
        return self._count(bytes(out))

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.limit:
            raise InflateLimitExceeded()
        return data

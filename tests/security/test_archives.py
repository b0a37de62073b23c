"""Compressed input under a bound: Office zip checks before opening, and bounded inflating."""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib

import pytest

from rag_core.errors import LoaderError
from rag_core.limits import ARCHIVE_MAX_MEMBER_BYTES, ARCHIVE_MAX_RATIO
from rag_core.security.archives import (
    BoundedInflater, InflateLimitExceeded, UnsupportedEncoding, check_office_zip,
)


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_ordinary_office_content_passes() -> None:
    text = " ".join(f"word{i}" for i in range(300_000)).encode()  # 2.6 MB of varied XML-like text
    check_office_zip(zipped({"word/document.xml": text, "[Content_Types].xml": b"<Types/>"}), "DOCX")
    check_office_zip(b"not a zip at all", "DOCX")  # the loader itself reports a corrupt file


def test_a_member_that_compresses_implausibly_well_is_refused_before_opening() -> None:
    data = zipped({"word/document.xml": b"<w:p/>" * 2_000_000})  # 12 MB in a few kilobytes
    with pytest.raises(LoaderError) as info:
        check_office_zip(data, "DOCX")
    assert "zip bomb" in info.value.message and info.value.details["ratio"] > ARCHIVE_MAX_RATIO


def test_declared_sizes_over_the_caps_are_refused() -> None:
    # A stored (uncompressed) member cannot trip the ratio, only the size caps.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as member:
            block = bytes(range(256)) * 4096
            for _ in range(ARCHIVE_MAX_MEMBER_BYTES // len(block) + 1):
                member.write(block)
    with pytest.raises(LoaderError, match="unpacks to"):
        check_office_zip(out.getvalue(), "XLSX")


def inflate_all(inflater: BoundedInflater, body: bytes, chunk: int) -> bytes:
    return b"".join(inflater.feed(body[i:i + chunk]) for i in range(0, len(body), chunk))


def raw_deflate(data: bytes) -> bytes:
    """Deflate without the zlib header, as some servers send it."""
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("encoding,compress", [
    ("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", raw_deflate), ("identity", bytes),
])
def test_bodies_under_the_limit_come_out_whole(encoding: str, compress) -> None:
    text = ("Ordinary page text, compressed as servers do. " * 2000).encode()
    assert inflate_all(BoundedInflater(encoding, len(text)), compress(text), 1000) == text


def test_a_bomb_never_inflates_past_the_limit_in_one_step() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)  # 50 MB in about 50 KB: one network chunk of it was inflated whole
    inflater = BoundedInflater("gzip", 1_000_000)
    produced = 0
    with pytest.raises(InflateLimitExceeded):
        for i in range(0, len(bomb), 65_536):
            produced += len(inflater.feed(bomb[i:i + 65_536]))
    assert produced <= 1_000_000


def test_other_encodings_are_refused() -> None:
    with pytest.raises(UnsupportedEncoding):
        BoundedInflater("br", 100)

"""Text encoding detection: BOM, strict UTF-8, then a confident charset-normalizer guess."""

from __future__ import annotations

import codecs
import unicodedata
from collections.abc import Iterable
from typing import Any

from rag_core.errors import LoaderError

_UNDECODABLE = "Cannot decode text: not UTF-8 and no reliable encoding detected; convert the file to UTF-8."

# Among equally plausible decodings the first of these wins: the workbench's corpus is English,
# Russian and Japanese, and these are the legacy encodings such files come in.
_PREFERRED_ENCODINGS = (
    "cp1252", "latin_1", "iso8859_15", "cp1251", "koi8_r", "cp932", "shift_jis", "euc_jp", "iso2022_jp",
    "cp866", "mac_cyrillic", "koi8_u", "iso8859_5", "gb18030", "big5", "euc_kr", "cp1250", "cp1253",
)
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)


# The encodings of the WHATWG Encoding Standard (what browsers accept from a page or a server), as Python names
# them. A declared charset outside it is ignored: Python also decodes `punycode` (quadratic: 80 KB took 0.8 s,
# a 5 MB page would take most of an hour), `idna`, `unicode_escape` and other codecs no page is written in.
_WEB_LABELS = (
    "utf-8", "utf-16", "utf-16-le", "utf-16-be", "cp866", "latin-1", "iso8859-2", "iso8859-3", "iso8859-4",
    "iso8859-5", "iso8859-6", "iso8859-7", "iso8859-8", "iso8859-9", "iso8859-10", "iso8859-11", "iso8859-13",
    "iso8859-14", "iso8859-15", "iso8859-16", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "cp1250",
    "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258", "gbk", "gb2312", "gb18030",
    "big5", "big5hkscs", "euc-jp", "iso2022-jp", "shift-jis", "cp932", "euc-kr", "cp949", "ascii",
)
WEB_CODECS = frozenset(codecs.lookup(label).name for label in _WEB_LABELS)


def web_codec(label: str | None) -> str | None:
    """Python's codec for a charset a page or a server declares, when it is one the web uses; else None."""
    try:
        name = codecs.lookup((label or "").strip()).name
    except (LookupError, ValueError):
        return None
    return name if name in WEB_CODECS else None


def implausibility(text: str) -> float:
    """How unlike natural text a decoding looks: 0 is clean, higher means mojibake or binary."""
    sample = text[:20000]
    if not sample:
        return 0.0
    bad = 0.0
    latin = latin_ext = 0
    for ch in sample:
        o = ord(ch)
        if o < 128:
            if ch.isalpha():
                latin += 1
            elif o < 32 and ch not in "\t\n\r\f\v":
                bad += 3
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Co", "Cs", "Cn") or ch == "\ufffd":
            bad += 3
        elif 0x2500 <= o <= 0x259F or cat in ("So", "Sk"):
            bad += 1  # box drawing and stray symbols: a DOS/Mac code page read wrongly
        elif o < 0x250 and ch.isalpha():
            latin += 1
            latin_ext += 1
    # Western languages use accents sparingly; Cyrillic read as Latin-1 is all accents.
    if latin >= 3 and latin_ext > 0.4 * latin:
        bad += latin_ext
    return bad / len(sample)


def _preference(encodings: Iterable[str]) -> int:
    ranks = [_PREFERRED_ENCODINGS.index(e) for e in encodings if e in _PREFERRED_ENCODINGS]
    return min(ranks) if ranks else len(_PREFERRED_ENCODINGS)


def detect_encoding(data: bytes) -> tuple[str, str] | None:
    """(text, encoding) from charset-normalizer when one decoding is clearly plausible, else None."""
    from charset_normalizer import from_bytes

    try:
        matches = list(from_bytes(data))
    except Exception:
        return None
    if not matches:
        return None
    best_chaos = min(m.chaos for m in matches)
    if best_chaos > 0.2:
        return None
    candidates = []
    for order, m in enumerate(matches):
        if m.chaos > best_chaos + 0.1:
            continue
        try:
            text = str(m)
        except Exception:
            continue
        encodings = [m.encoding, *m.could_be_from_charset]
        candidates.append((implausibility(text), _preference(encodings), order, m, text, encodings))
    if not candidates:
        return None
    lowest = min(c[0] for c in candidates)
    if lowest > 0.02:
        return None
    near = [c for c in candidates if c[0] <= lowest + 0.005]
    _, rank, _, match, text, encodings = min(near, key=lambda c: (c[1], c[2]))
    encoding = _PREFERRED_ENCODINGS[rank] if rank < len(_PREFERRED_ENCODINGS) else match.encoding
    if encoding != match.encoding:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            encoding = match.encoding
    return text, encoding


def refuse_binary_format(data: bytes) -> None:
    """LoaderError when the bytes open with another format's signature (a PDF, a zip, an image...).

    A PDF or a zip named .html or .txt, or served by a web server as text/html, was read as text:
    its raw bytes (mostly ASCII in an uncompressed PDF, replacement characters in a zip) became
    the document's chunks. The signatures are matched by `filetype`.
    """
    import filetype

    kind = filetype.guess(data[:8192])
    if kind is not None:
        raise LoaderError(f"Cannot decode text: the content is {kind.extension.upper()} data ({kind.mime}), not UTF-8 text. Rename it "
                          f"with its real suffix (.{kind.extension}) when that type is supported, or leave it out.",
                          details={"reason": "binary_format", "detected": kind.mime})


def _utf16_without_bom(data: bytes) -> tuple[str, dict[str, Any]] | None:
    """UTF-16 text saved without a byte-order mark (its NULs all on one side of each pair), else None.

    Such a file was refused as binary for its NUL bytes; binary files have NULs at both parities.
    """
    if len(data) % 2:
        return None
    odd = data[1::2].count(0)
    even = data[0::2].count(0)
    if odd and not even:
        encoding = "utf-16-le"
    elif even and not odd:
        encoding = "utf-16-be"
    else:
        return None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    if implausibility(text) > 0.02:
        return None
    return text, {"encoding": encoding}


def decode_text(data: bytes) -> tuple[str, dict[str, Any]]:
    """Decode a text file: BOM, then strict UTF-8, then a confident detection; else LoaderError."""
    refuse_binary_format(data)
    for bom, encoding in BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as exc:
                raise LoaderError(_UNDECODABLE, details={"reason": f"invalid {encoding} after its BOM: {exc}"}) from exc
            text = text.lstrip("\ufeff")
            if implausibility(text) > 0.1:
                raise LoaderError(_UNDECODABLE, details={"reason": f"{encoding} BOM but the text looks binary"})
            return text, {"encoding": "utf-8" if encoding == "utf-8-sig" else encoding}
    if b"\x00" in data:
        utf16 = _utf16_without_bom(data)
        if utf16 is not None:
            return utf16
        raise LoaderError("Cannot decode text: the file looks binary (it contains NUL bytes); "
                          "give a text file or convert it to UTF-8 text.", details={"reason": "NUL bytes"})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        controls = sum(1 for ch in text[:20000] if ord(ch) < 32 and ch not in "\t\n\r\f\v")
        if controls > 0.05 * min(len(text), 20000):
            raise LoaderError(_UNDECODABLE, details={"reason": "control characters: the file looks binary"})
        return text, {"encoding": "utf-8"}
    detected = detect_encoding(data)
    if detected is not None:
        return detected[0], {"encoding": detected[1]}
    # Mostly valid UTF-8 with a few broken bytes: keep it, marking the broken bytes.
    text = data.decode("utf-8", errors="replace")
    broken = text.count("\ufffd")
    multibyte = sum(1 for ch in text if ord(ch) > 127) - broken
    if broken <= max(1, len(data) // 1000) and multibyte >= 10 * broken:
        return text, {"encoding": "utf-8", "decode_errors": broken}
    raise LoaderError(_UNDECODABLE, details={"reason": "charset detection was not confident"})

"""The public evaluation sets, downloaded from their originals and checked against pinned checksums.

`rag eval fetch scifact jsquad` reads DATASETS: each set names the files it downloads (address,
exact size, sha256, and md5 where the upstream publishes one), how they become BEIR layout, and
the sha256 of every file that conversion writes. A download is refused as soon as it outgrows its
size, and kept only when every checksum matches; the set appears in the evaluation folder in one
rename, so a failure leaves nothing half-written. A set already there and intact is not fetched
again. Tests pass their own DatasetSpec (a local server, their own checksums); the pinned ones
below are never changed at run time.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rag_core.errors import ChecksumMismatch, FetchError, InvalidInput
from rag_core.evaluation.conversions import Converter, beir_zip, squad_paragraphs
from rag_core.evaluation.datasets import eval_data_dir

# (file name, bytes received so far, bytes expected)
DownloadProgress = Callable[[str, int, int], None]
CHUNK_BYTES = 1 << 16


@dataclass(frozen=True)
class Download:
    """One file to download: where from, its exact size, its sha256 and (when published) its md5."""

    url: str
    filename: str
    size: int
    sha256: str
    md5: str | None = None


@dataclass(frozen=True)
class DatasetSpec:
    """A fetchable set: what to download, how it becomes BEIR layout, what the result must hash to."""

    name: str
    summary: str
    licence: str
    downloads: tuple[Download, ...]
    convert: Converter
    outputs: dict[str, str] = field(default_factory=dict)   # file written -> its sha256

    def source_note(self) -> str:
        """The SOURCE.txt written beside the set: what it is, where it came from, its licence."""
        lines = [f"{self.summary}", f"Fetched by `rag eval fetch {self.name}` from:"]
        lines += [f"  {d.url}  ({d.size:,} bytes, sha256 {d.sha256})" for d in self.downloads]
        lines.append(f"Licence: {self.licence}")
        return "\n".join(lines) + "\n"


@dataclass
class FetchResult:
    """Where a set is, and whether this call downloaded it (`downloaded_bytes` 0 when it was already there)."""

    name: str
    path: Path
    downloaded_bytes: int
    already_present: bool


BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
JGLUE_COMMIT = "6f071c09316baae89c3d083a90985b4b1cb9968c"   # JGLUE v1.3.0
JGLUE_URL = f"https://raw.githubusercontent.com/yahoojapan/JGLUE/{JGLUE_COMMIT}/datasets/jsquad-v1.3"

SCIFACT = DatasetSpec(
    name="scifact",
    summary="SciFact, BEIR test split: English scientific claims -> PubMed abstracts "
            "(5,183 documents, 300 queries, 339 judgements).",
    licence="CC BY-NC 2.0 (allenai/scifact): non-commercial use.",
    downloads=(Download(
        url=f"{BEIR_URL}/scifact.zip", filename="scifact.zip", size=2_816_079,
        # BEIR publishes an md5 per archive (its README's datasets table); the sha256 and size are
        # those several independent projects recorded for the same archive.
        md5="5f7d1de60b170fc8027bb7898e2efca1",
        sha256="536e14446a0ba56ed1398ab1055f39fe852686ecad24a6306c80c490fa8e0165"),),
    convert=beir_zip("scifact", split="test"),
    outputs={
        # BEIR's corpus.jsonl as it is inside the archive
        "corpus.jsonl": "dec31c8182f3d744c7d2c09423756fd1d17cbef75808db13ba01cc0aab4d1ac6",
        "queries.jsonl": "d3161c84e70775b287de2665f3ef4e45abfb64ba39f5fd80465deb17745b7b22",
        "qrels.tsv": "68c0ac63f1c24b9e8ce497649694f09b2d0850bab7ec2b103cc66996f5f8b3a3",
    },
)

JSQUAD = DatasetSpec(
    name="jsquad",
    summary="JSQuAD v1.3 (JGLUE) as passage retrieval: Japanese questions -> Wikipedia paragraphs "
            "(2,304 paragraphs: 1,145 judged and 1,159 distractors; 4,442 questions with reference answers).",
    licence="CC BY-SA 4.0 (JGLUE).",
    downloads=(
        Download(url=f"{JGLUE_URL}/valid-v1.3.json", filename="valid-v1.3.json", size=1_976_638,
                 sha256="fb0a57a35281ff03bbe7f0e878cff5b577985fbe6fcb242e7e8ddb63d1c0ab11"),
        Download(url=f"{JGLUE_URL}/test-v1.3.json", filename="test-v1.3.json", size=1_994_154,
                 sha256="0078f3f2e1604a201700c24139e198344fa689e02282fc00adaa31687cce2aff"),
    ),
    convert=squad_paragraphs(questions="valid-v1.3.json", distractors="test-v1.3.json"),
    outputs={
        "corpus.jsonl": "97acf2a4a712dbb971119cb51093932e528bf53c1580579286473c5341a85a41",
        "queries.jsonl": "cd134011ce5b0492cbddeddce35125837e716feb42a4d39c27af620b6f0fa488",
        "qrels.tsv": "76bfa2160532510ffaf4f44e620d1a2fb13a723bba2b16bc944549c4bfab4cbe",
        "answers.jsonl": "7f7c4440593318b07ccf5428c73b0c834feeb833cd44cbc3a29a7e5582cbddaa",
    },
)

DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (SCIFACT, JSQUAD)}

NOT_FETCHABLE = {
    "ru_construction": (
        "ru_construction cannot be fetched: its pages are Russian building standards, which remain the "
        "property of their issuing bodies, so the set is for evaluation only and is not redistributed. "
        "Put your own copy (BEIR layout) in RAG_EVAL_DATA."),
}


def fetch_spec(name: str) -> DatasetSpec:
    """The pinned spec of a fetchable set; other names raise InvalidInput saying which sets can be fetched."""
    if name in DATASETS:
        return DATASETS[name]
    if name in NOT_FETCHABLE:
        raise InvalidInput(NOT_FETCHABLE[name])
    raise InvalidInput(f"Unknown set '{name}'; `rag eval fetch` knows {', '.join(DATASETS)}.")


def fetch_dataset(spec: DatasetSpec, root: str | Path | None = None, progress: DownloadProgress | None = None,
                  timeout: float = 60.0) -> FetchResult:
    """Download, check and convert one set into <root>/<name> (root: RAG_EVAL_DATA); an intact copy is kept."""
    folder = eval_data_dir(root)
    target = folder / spec.name
    if target.exists():
        problem = output_problem(spec, target)
        if problem is None:
            return FetchResult(spec.name, target, 0, already_present=True)
        raise InvalidInput(f"{target} exists but is not the pinned {spec.name} ({problem}); nothing was changed. "
                           f"Move or delete it, then run `rag eval fetch {spec.name}` again.")
    folder.mkdir(parents=True, exist_ok=True)
    # A hidden work folder beside the target: the final rename stays on one file system.
    work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", suffix=".partial", dir=folder))
    try:
        files = {d.filename: download(d, work, progress, timeout) for d in spec.downloads}
        out = work / spec.name
        out.mkdir()
        try:
            spec.convert(files, out)
        except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
            raise FetchError(f"Converting {spec.name} failed ({type(exc).__name__}: {exc}); "
                             "nothing was kept.") from None
        problem = output_problem(spec, out)
        if problem:
            raise ChecksumMismatch(f"Converting {spec.name} did not give the pinned files ({problem}); "
                                   "nothing was kept.")
        (out / "SOURCE.txt").write_text(spec.source_note(), encoding="utf-8")
        try:
            out.rename(target)
        except OSError:
            if output_problem(spec, target) is None:   # another process finished the same set first
                return FetchResult(spec.name, target, 0, already_present=True)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return FetchResult(spec.name, target, sum(d.size for d in spec.downloads), already_present=False)


def output_problem(spec: DatasetSpec, folder: Path) -> str | None:
    """What keeps `folder` from being the pinned set (a missing or changed file), or None when it is."""
    for name, expected in spec.outputs.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != expected:
            return f"{name} differs from the pinned file"
    if not spec.outputs and not (folder / "corpus.jsonl").is_file():
        return "corpus.jsonl is missing"
    return None


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(item: Download, folder: Path, progress: DownloadProgress | None = None, timeout: float = 60.0) -> Path:
    """Stream one file into `folder`, refusing more bytes than pinned; raise unless every checksum matches."""
    import httpx

    path = folder / item.filename
    sha256, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    received = 0
    retry = "Nothing was kept; run the command again."
    try:
        with httpx.stream("GET", item.url, follow_redirects=True, timeout=timeout) as resp, path.open("wb") as fh:
            if resp.status_code != 200:
                raise FetchError(f"{item.url} answered HTTP {resp.status_code} {resp.reason_phrase}. {retry} If it "
                                 "persists, the file has moved upstream and its pinned address needs updating.")
            announced = resp.headers.get("content-length", "")
            if not resp.headers.get("content-encoding") and announced.isdigit() and int(announced) > item.size:
                raise FetchError(_too_big(item, int(announced)))
            for chunk in resp.iter_bytes(CHUNK_BYTES):
                received += len(chunk)
                if received > item.size:
                    raise FetchError(_too_big(item, received))
                fh.write(chunk)
                sha256.update(chunk)
                md5.update(chunk)
                if progress:
                    progress(item.filename, received, item.size)
    except httpx.HTTPError as exc:
        raise FetchError(f"Downloading {item.url} failed after {received:,} of {item.size:,} bytes "
                         f"({type(exc).__name__}: {exc}). {retry} Behind a proxy, set HTTPS_PROXY.") from None
    if received != item.size:
        raise FetchError(f"{item.url} ended after {received:,} of {item.size:,} bytes: the download was cut off. "
                         f"{retry}")
    if sha256.hexdigest() != item.sha256 or (item.md5 and md5.hexdigest() != item.md5):
        got = f"sha256 {sha256.hexdigest()}" + (f", md5 {md5.hexdigest()}" if item.md5 else "")
        want = f"sha256 {item.sha256}" + (f", md5 {item.md5}" if item.md5 else "")
        raise ChecksumMismatch(f"{item.filename} from {item.url} is not the pinned file ({got}; expected {want}): "
                               f"it changed upstream or was damaged on the way. {retry} If it persists, the "
                               "pinned checksum needs review: figures from another file are not comparable.")
    return path


def _too_big(item: Download, size: int) -> str:
    return (f"{item.url} sends more than the pinned {item.size:,} bytes ({size:,} so far); refused and nothing "
            "was kept. The file has changed upstream: its pinned size and checksums need review.")

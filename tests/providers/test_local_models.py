"""Packaged local models: the parts found in their packages, assembled once, verified, refused when wrong."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from rag_core.errors import ConfigError
from rag_core.chat.llms import build_llm
from rag_core.providers.local_models import (
    PACKAGED_MODELS, PackagedModel, ensure_model_file, free_cores, is_assembled, packaged_model,
)


def _packages(root: Path, prefix: str, parts: list[bytes]) -> PackagedModel:
    """Importable packages laid out as the model carriers are (`<prefix>N/data/partNN.bin`), and their entry."""
    for i, data in enumerate(parts, 1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    whole = b"".join(parts)
    return PackagedModel(name="tiny", description="a tiny model", file_name="tiny.gguf",
                         modules=tuple(f"{prefix}{i}" for i in range(1, len(parts) + 1)),
                         distributions=tuple(f"{prefix}{i}==1.0" for i in range(1, len(parts) + 1)),
                         extra="local-llm", size=len(whole), sha256=hashlib.sha256(whole).hexdigest())


@pytest.fixture
def carriers(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m.startswith("carrier_")]:
        del sys.modules[name]


def test_the_parts_are_assembled_once_in_order_and_verified(carriers, tmp_path) -> None:
    parts = [b"GGUF" + os.urandom(3000), os.urandom(5000), os.urandom(10)]
    model = _packages(carriers, "carrier_ok_part", parts)
    seen: list[tuple[int, int]] = []

    path = ensure_model_file(model, tmp_path / "models", lambda done, total: seen.append((done, total)))

    assert path.read_bytes() == b"".join(parts)
    assert seen[-1] == (model.size, model.size)
    assert is_assembled(model, tmp_path / "models")
    assert [p.name for p in (tmp_path / "models").iterdir()] == sorted(["tiny.gguf", "tiny.gguf.verified"])


def test_a_verified_file_is_trusted_without_reading_it_again_until_it_changes(carriers, tmp_path) -> None:
    model = _packages(carriers, "carrier_trust_part", [os.urandom(4000), os.urandom(4000)])
    path = ensure_model_file(model, tmp_path / "models")
    stat = path.stat()
    # same size and time, other bytes: a start does not hash the (multi-GB) file again
    path.write_bytes(os.urandom(model.size))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ensure_model_file(model, tmp_path / "models") == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() != model.sha256
    # a file that changed since its verification is verified again, and rebuilt from the parts
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    ensure_model_file(model, tmp_path / "models")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256


def test_parts_that_do_not_give_the_recorded_checksum_are_refused_and_nothing_is_left(carriers, tmp_path) -> None:
    model = _packages(carriers, "carrier_bad_part", [os.urandom(2000), os.urandom(2000)])
    damaged = PackagedModel(**{**model.__dict__, "sha256": "0" * 64})

    with pytest.raises(ConfigError, match=r"does not match its recorded checksum.*pip install --force-reinstall"):
        ensure_model_file(damaged, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_missing_model_package_names_the_install_command(carriers, tmp_path) -> None:
    model = _packages(carriers, "carrier_missing_part", [os.urandom(100), os.urandom(100)])
    incomplete = PackagedModel(**{**model.__dict__, "modules": (*model.modules, "carrier_missing_part3"),
                                  "distributions": (*model.distributions, "carrier-missing-part3==1.0")})

    with pytest.raises(ConfigError, match=r"1 of 3 are not installed \(carrier-missing-part3==1\.0\).*"
                                          r"pip install -e '\.\[local-llm\]'"):
        ensure_model_file(incomplete, tmp_path / "models")


def test_rag_llm_local_without_the_extra_is_refused_with_the_install_command(make_settings, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # as if the optional extra were not installed
    with pytest.raises(ConfigError, match=r"RAG_LLM=local needs the llama\.cpp wheel.*pip install -e '\.\[local-llm\]'"):
        build_llm(make_settings(llm="local"))


def test_the_local_model_setting_names_a_packaged_model(make_settings) -> None:
    assert packaged_model("").name == "qwen2.5-coder-0.5b"
    assert packaged_model("Qwen2.5-Coder-1.5B") is PACKAGED_MODELS["qwen2.5-coder-1.5b"]
    with pytest.raises(ConfigError, match="Unknown local model 'gpt-4'.*qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        build_llm(make_settings(llm="local", llm_model="gpt-4"))


def test_threads_follow_the_cores_this_process_may_use() -> None:
    cores = len(os.sched_getaffinity(0))
    assert free_cores(reserve_load=False) == cores
    assert 1 <= free_cores() <= cores

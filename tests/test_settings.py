"""Settings: validation messages name the variable, and the documented variables match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices

from rag_core.errors import ConfigError
from rag_core.providers.embeddings import build_embedder
from rag_core.settings import RagSettings, load_settings

ROOT = Path(__file__).resolve().parents[1]


def env_names() -> set[str]:
    """Each setting's documented variable: its conventional name (DATABASE_URL, SLACK_BOT_TOKEN) or RAG_<NAME>."""
    names = set()
    for name, field in RagSettings.model_fields.items():
        alias = field.validation_alias
        names.add(alias.choices[0] if isinstance(alias, AliasChoices) else f"RAG_{name.upper()}")
    return names


def test_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_CHUNK_SIZE", "lots")
    with pytest.raises(ConfigError) as err:
        load_settings(_env_file=None)
    assert "RAG_CHUNK_SIZE" in err.value.message and "lots" in err.value.message


def test_overlap_must_be_below_size() -> None:
    with pytest.raises(ConfigError, match="RAG_CHUNK_OVERLAP"):
        load_settings(_env_file=None, chunk_size=100, chunk_overlap=100)


def test_language_lists_allowed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_LANGUAGE", "de")
    with pytest.raises(ConfigError) as err:
        load_settings(_env_file=None)
    assert "RAG_LANGUAGE" in err.value.message and "'en'" in err.value.message


def test_allowed_domains_from_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_ALLOWED_DOMAINS", "Example.com, docs.python.org.,")
    assert load_settings(_env_file=None).allowed_domains == ["example.com", "docs.python.org"]


def test_database_url_uses_conventional_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    assert load_settings(_env_file=None).database_url == "postgresql://u@h/db"


def test_unknown_embedder_lists_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        build_embedder(load_settings(_env_file=None, embedder="word2vec"))
    assert "word2vec" in err.value.message
    for known in ("use-multilingual", "minilm", "huggingface", "openai"):
        assert known in err.value.message


def test_eval_data_defaults_to_a_folder_in_the_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RAG_EVAL_DATA", "")   # as copied from .env.example: the default, not the working folder
    assert load_settings(_env_file=None).eval_data_dir == tmp_path / "eval-data"
    monkeypatch.setenv("RAG_EVAL_DATA", str(tmp_path / "sets"))
    assert load_settings(_env_file=None).eval_data_dir == tmp_path / "sets"


def test_env_example_lists_every_setting() -> None:
    text = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, flags=re.M))
    assert listed == env_names()


def test_configuration_table_lists_every_setting() -> None:
    table = (ROOT / "docs" / "configuration.md").read_text().split("## Every variable", 1)[1]
    missing = [name for name in sorted(env_names()) if f"| `{name}` |" not in table]
    assert not missing, f"docs/configuration.md's table of every variable lacks {missing}"

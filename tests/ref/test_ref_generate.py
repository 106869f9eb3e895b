#!/usr/bin/python3
"""ctest's test_ref_generate: fairkv's generation against an independent
reference, llama2c_ref.py (numpy, float64, reading the llama2.c checkpoint
and tokenizer.bin directly; no code shared with fairkv).

What is compared, 200 greedy tokens from BOS alone and from "Once upon a
time" (fairkv's prompt ids, [1] and [1, 403, 407, 261, 378], are checked equal
to run.c's encoding first), on the f32 GGUF that `fairkv model convert` writes
from stories260K.bin + tok512.bin (context_length 512):
  - `fairkv generate` (the engine, its defaults): ids equal token for token, and its
    logits against the reference's at the same context (NMSE < 1e-9);
  - `fairkv generate --engine`: no pressure; 20 pages of K/V with --n 2
    (each sample needs 13 pages: eviction + recompute); 19 pages with --n 4
    (preemption); --n 4 forked samples without pressure: every sample's ids
    equal the reference's;
  - int8 cold chunks (--quant always, and under-pressure in 14 pages with
    --n 2; --quant-hot 32 so that most of the context is cold): free-running,
    then the reference teacher-forced on the engine's own ids, so both see
    the same context at every step; greedy agreement >= 95% of steps and
    logits NMSE (sum (a-b)^2 / sum b^2 over all steps) < 3e-4;
  - f16 weights (`--type f16`, plain path): NMSE < 1e-6, agreement reported;
  - Q8_0 and Q4_0 weights (`--type q8_0|q4_0`, the engine): NMSE < 10 x the
    weights' own quantization error power eps_w (see QUANT_GAIN_BOUND);
    Q8_0 also >= 95% greedy agreement teacher-forced;
  - `fairkv serve` (engine backend, 20 pages, a free loopback port, always
    stopped), /v1/completions at temperature 0: a text prompt, BOS as ids,
    prefix sharing (a 96-token prompt after a 64-token one it extends: cached
    tokens > 0), 4 concurrent requests (preemption) and n = 4 forked
    samples: the completion text equals the reference ids decoded from
    tok512.bin (the API returns no ids); and a server with int8 cold chunks
    (--quant always, 32 hot tokens): its text agrees with the reference's for
    at least 95% of its length before the first difference, with chunks
    quantized (fairkv_quantized_chunks_total).
Measured (x86-64, the plain build): every exact comparison 200/200 tokens in
every sample; f32 logits NMSE 2.9e-14; int8 always NMSE 6.3e-8 (worst step
1.5e-5), under pressure 1.3e-8, 200/200 agreement teacher-forced and
free-running; f16 weights NMSE 5.9e-8 (worst step 1.2e-6), 200/200; Q8_0
weights NMSE 3.8e-5 (eps_w 2.5e-5, bound 2.5e-4), 199/200 teacher-forced,
free-running equal for the first 110-114 tokens; Q4_0 NMSE 1.3e-2 (eps_w
6.4e-3, bound 6.4e-2), 164/200 teacher-forced; the
served prefix request found 80 of 96 prompt tokens cached; the 4 concurrent
requests saw 5 preemptions.  About 5 s.

Usage: test_ref_generate.py FAIRKV_BINARY DATA_DIR
Exit 77 (skip) when a data file is absent.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama2c_ref as ref  # noqa: E402

STEPS = 200
PROMPTS = ["", "Once upon a time"]  # "" is BOS alone
PAGE_BYTES = 16 * 1280  # a 16-token page of stories260K's K+V (5 layers x 4 kv heads x 8 x f32 x 2)
# logits' NMSE against the float64 reference.  f16 weights: their rounding
# (2^-11 relative) alone gives about 6e-8; 1e-6 still catches a tensor
# converted wrongly.  int8 cold chunks: the engine's own bound against its f32
# run (docs/ENGINE.md), which the f32 path's 3e-14 leaves unchanged here.
NMSE_F16 = 1e-6
NMSE_INT8 = 3e-4
AGREE_INT8 = 0.95

# Quantized weights (llama.cpp's Q8_0 / Q4_0 blocks, `model convert --type`):
# the bound on the logits' NMSE is derived from the weights alone, fixed
# before any fairkv run was looked at: eps_w, the relative power of the
# weights' quantization error (sum |Q(W) - W|^2 / sum |W|^2 over all
# matrices, quantized here in numpy as llama.cpp's reference quantizers do),
# times 10.  To first order the logits' NMSE is eps_w times a gain of the
# network; the f16-weight run above puts that gain on this model at about
# 1.4 (logits NMSE 5.9e-8 against f16's eps_w 4.1e-8), so 10 leaves a factor
# of about 7 for the non-linear part.  Agreement: the int8 rule, >= 95% of steps
# teacher-forced, for Q8_0; Q4_0's agreement is reported, not bounded.
QUANT_GAIN_BOUND = 10.0


def q8_0(w):
    """llama.cpp's quantize_row_q8_0_ref, then back to float (fp16 scale)."""
    b = w.reshape(-1, 32).astype(np.float32)
    d = (np.abs(b).max(axis=1) / 127).astype(np.float32)
    inv = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.round(b * inv[:, None])
    return (q * d.astype(np.float16).astype(np.float32)[:, None]).reshape(w.shape)


def q4_0(w):
    """llama.cpp's quantize_row_q4_0_ref: d = (signed max-magnitude) / -8,
    q = min(15, trunc(x / d + 8.5)), value (q - 8) * fp16(d)."""
    b = w.reshape(-1, 32).astype(np.float32)
    mx = b[np.arange(len(b)), np.abs(b).argmax(axis=1)]
    d = (mx / -8).astype(np.float32)
    inv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.minimum(15, np.trunc(b * inv[:, None] + 8.5))
    return ((q - 8) * d.astype(np.float16).astype(np.float32)[:, None]).reshape(w.shape)


def weight_eps(ck, quant):
    """eps_w of the matrices as `model convert` stores them: quantized when
    their rows are whole 32-element blocks, else f16."""
    num = den = 0.0
    mats = [ck.tok_emb] + [m[l] for m in (ck.wq, ck.wk, ck.wv, ck.wo, ck.w1, ck.w2, ck.w3)
                           for l in range(ck.n_layers)]
    if not ck.shared:
        mats.append(ck.wcls)
    for w in mats:
        w = np.asarray(w, np.float32)
        got = quant(w) if w.shape[-1] % 32 == 0 else w.astype(np.float16).astype(np.float32)
        num += float(((got.astype(np.float64) - w) ** 2).sum())
        den += float((w.astype(np.float64) ** 2).sum())
    return num / den


failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def nmse(a, b):
    """sum (a - b)^2 / sum b^2 over all steps' logits, and the worst step's."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    per = ((a - b) ** 2).sum(axis=1) / (b * b).sum(axis=1)
    return float(((a - b) ** 2).sum() / (b * b).sum()), float(per.max())


def upto_eog(ids):
    """The ids up to and including the first end-of-generation token (2),
    where fairkv stops."""
    return ids[: ids.index(2) + 1] if 2 in ids else ids


def fairkv(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"fairkv {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def generate(binary, model, prompt, *extra, logits_path=None):
    """fairkv generate --ids: a list of id lists (one per sample), the stats line's counters."""
    args = ["generate", "--model", model, "--prompt", prompt, "-n", str(STEPS), "--temperature", "0", "--ids",
            *extra]
    if logits_path:
        args += ["--logits", logits_path]
    p = fairkv(binary, *args)
    samples = [list(map(int, ln.split())) for ln in p.stdout.splitlines() if ln.strip()]
    stats = {}
    m = re.search(r"(\d+) prefill \+ (\d+) decode \+ (\d+) recomputed tokens, (\d+) preemptions, (\d+) evicted pages, "
                  r"(\d+) prefix-hit tokens, (\d+) quantized-chunk reads", p.stderr)
    if m:
        keys = ["prefill", "decode", "recomputed", "preemptions", "evicted", "prefix_hit", "quant_reads"]
        stats = dict(zip(keys, map(int, m.groups())))
    return samples, stats


def read_logits(path, vocab):
    return np.fromfile(path, dtype="<f4").reshape(-1, vocab)


class Server:
    """`fairkv serve` on a free loopback port; stop() always ends it."""

    def __init__(self, binary, model, *extra):
        self.p = subprocess.Popen([binary, "serve", "--port", "0", "--model", model, *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = None
        deadline = time.time() + 30
        out = ""
        while time.time() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            out += line
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                break
        if not self.url:
            self.stop()
            raise RuntimeError(f"no banner from fairkv serve: {out}{self.p.stderr.read()}")
        # keep draining stdout so the server never blocks on a full pipe
        threading.Thread(target=self.p.stdout.read, daemon=True).start()

    def post(self, path, body):
        body = {"model": "s32", **body}  # the served name: the GGUF's file name without .gguf
        rq = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                    headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(rq, timeout=120) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"POST {path}: {e.code}: {e.read().decode()}") from None

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.read().decode()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def main():
    binary, data = sys.argv[1], sys.argv[2]
    ckpt = os.path.join(data, "models", "stories260K.bin")
    tokbin = os.path.join(data, "models", "tok512.bin")
    for f in (ckpt, tokbin):
        if not os.path.isfile(f):
            print(f"SKIP: data file not found: {f}")
            return 77
    t_start = time.time()
    ck = ref.Checkpoint(ckpt)
    tok = ref.Tokenizer(tokbin, ck.vocab)
    model = ref.Model(ck)
    V = ck.vocab
    tmp = tempfile.TemporaryDirectory(prefix="fkv-ref-")
    w = tmp.name
    f32, f16 = os.path.join(w, "s32.gguf"), os.path.join(w, "s16.gguf")
    fairkv(binary, "model", "convert", "--llama2c", ckpt, "--tokenizer", tokbin, "--out", f32)
    fairkv(binary, "model", "convert", "--llama2c", ckpt, "--tokenizer", tokbin, "--out", f16, "--type", "f16")
    q8, q4 = os.path.join(w, "s_q8_0.gguf"), os.path.join(w, "s_q4_0.gguf")
    fairkv(binary, "model", "convert", "--llama2c", ckpt, "--tokenizer", tokbin, "--out", q8, "--type", "q8_0")
    fairkv(binary, "model", "convert", "--llama2c", ckpt, "--tokenizer", tokbin, "--out", q4, "--type", "q4_0")

    # the reference's encoding (run.c's) and fairkv's tokenizer (from the GGUF) agree
    for text in PROMPTS:
        got = json.loads(fairkv(binary, "model", "tokenize", "--model", f32, "--text", text, "--ids").stdout)
        check(got == tok.encode(text), f"prompt {text!r}: fairkv's ids {got} equal run.c's {tok.encode(text)}")

    refs = {}
    for text in PROMPTS:
        prompt = tok.encode(text)
        ids, logits = ref.run(model, prompt, STEPS)
        refs[text] = (prompt, ids, logits)

    def same(label, text, samples, n=1):
        want = upto_eog(refs[text][1])
        good = sum(s == want for s in samples)
        agree = [sum(a == b for a, b in zip(s, want)) for s in samples]
        check(len(samples) == n and good == n,
              f"{label}, {text or '<BOS>'!r}: {good}/{n} samples equal the reference "
              f"(tokens agreeing per sample: {agree} of {len(want)})")

    def teacher_forced(label, text, ids, logits, bound, min_agree):
        """fairkv's free-running ids and logits against the reference fed the
        same ids: both see the same context at every step."""
        prompt = refs[text][0]
        rids, rlog = ref.run(model, prompt, len(ids), forced=ids)
        agree = sum(a == b for a, b in zip(ids, rids))
        free = next((i for i, (a, b) in enumerate(zip(ids, refs[text][1])) if a != b), len(ids))
        m, worst = nmse(logits[: len(ids)], rlog)
        check(m < bound and agree >= min_agree * len(ids),
              f"{label}, {text or '<BOS>'!r}: logits NMSE {m:.3g} (worst step {worst:.3g}; bound {bound:g}), "
              f"teacher-forced agreement {agree}/{len(ids)}, free-running equal for the first {free}/{len(ids)}")

    for text in PROMPTS:
        # generate's defaults (the engine, no pressure), with its logits
        lp = os.path.join(w, "plain.f32")
        s, _ = generate(binary, f32, text, logits_path=lp)
        same("generate", text, s)
        teacher_forced("generate, f32 logits", text, s[0], read_logits(lp, V), 1e-9, 1.0)
        # the engine, no pressure
        s, st = generate(binary, f32, text, "--engine", "--stats")
        same("engine, no pressure", text, s)
        # eviction + recompute: two samples in 20 pages (each needs 13)
        s, st = generate(binary, f32, text, "--engine", "--stats", "--n", "2", "--kv-budget", str(20 * PAGE_BYTES))
        same(f"engine, 20 pages, --n 2 ({st.get('evicted')} evicted pages, {st.get('recomputed')} recomputed)",
             text, s, 2)
        check(st.get("evicted", 0) > 0 and st.get("recomputed", 0) > 0, "  ... eviction and recompute happened")
        # preemption: four samples in 19 pages
        s, st = generate(binary, f32, text, "--engine", "--stats", "--n", "4", "--kv-budget", str(19 * PAGE_BYTES))
        same(f"engine, 19 pages, --n 4 ({st.get('preemptions')} preemptions, {st.get('evicted')} evicted pages)",
             text, s, 4)
        check(st.get("preemptions", 0) > 0, "  ... preemption happened")
        # forked samples: four at temperature 0 share the prompt's pages
        s, st = generate(binary, f32, text, "--engine", "--n", "4")
        same("engine, --n 4 forked samples", text, s, 4)
        # int8 cold chunks
        for label, extra in (("int8 cold chunks, always", ["--quant", "always", "--quant-hot", "32"]),
                             ("int8 cold chunks, under pressure (14 pages, --n 2)",
                              ["--quant", "under-pressure", "--quant-hot", "32", "--n", "2",
                               "--kv-budget", str(14 * PAGE_BYTES)])):
            lp = os.path.join(w, "q.f32")
            s, st = generate(binary, f32, text, "--engine", "--stats", *extra, logits_path=lp)
            teacher_forced(f"{label} ({st.get('quant_reads')} int8 chunk reads)", text, s[0], read_logits(lp, V),
                           NMSE_INT8, AGREE_INT8)
            check(st.get("quant_reads", 0) > 0, "  ... int8 chunks were read")
        # f16 weights
        lp = os.path.join(w, "f16.f32")
        s, _ = generate(binary, f16, text, logits_path=lp)
        teacher_forced("f16 weights", text, s[0], read_logits(lp, V), NMSE_F16, 0.0)
        # Q8_0 and Q4_0 weights, through the engine (the BLAS tiles over
        # rows dequantized per block)
        for qname, qfile, qfun, min_agree in (("q8_0", q8, q8_0, AGREE_INT8), ("q4_0", q4, q4_0, 0.0)):
            eps = weight_eps(ck, qfun)
            lp = os.path.join(w, qname + ".f32")
            s, _ = generate(binary, qfile, text, "--engine", logits_path=lp)
            teacher_forced(f"{qname} weights (weights' eps_w {eps:.3g}, bound {QUANT_GAIN_BOUND:g} x eps_w)", text,
                           s[0], read_logits(lp, V), QUANT_GAIN_BOUND * eps, min_agree)

    # the served path: /v1/completions at temperature 0 through the engine
    # backend, 20 pages of K/V.  The text is compared with the reference ids
    # decoded from tok512.bin (the API returns no ids); the server keeps the
    # space a piece after BOS starts with, which run.c's decoder drops.
    def want_text(ids):
        ids = upto_eog(ids)
        if ids and ids[-1] == 2:
            ids = ids[:-1]  # the end-of-generation token has no text
        return tok.decode(ids, -1).decode("utf-8", "replace")

    # int8 cold chunks behind 128 hot tokens rather than serve's default
    # int4 behind 64: these texts are compared exactly, and int4 under
    # pressure moves a token of stories260K now and then (docs/EVALUATION.md
    # 2b prices it: 186 of 200 greedy tokens agree)
    srv = Server(binary, f32, "--kv-budget", str(20 * PAGE_BYTES), "--max-running", "16", "--quant-dtype", "int8",
                 "--quant-hot", "128")
    try:
        bos_ids = refs[""][1]
        for label, prompt, want in (("text prompt", "Once upon a time", refs["Once upon a time"][1]),
                                    ("BOS alone as ids", [1], bos_ids)):
            r = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": STEPS, "temperature": 0})
            check(r["choices"][0]["text"] == want_text(want), f"serve, {label}: the text equals the reference's")
        # prefix sharing: the second prompt (96 tokens) starts with the first
        # (64); greedy from BOS continues the reference's own sequence
        r1 = srv.post("/v1/completions", {"prompt": [1] + bos_ids[:63], "max_tokens": 100, "temperature": 0})
        r2 = srv.post("/v1/completions", {"prompt": [1] + bos_ids[:95], "max_tokens": 100, "temperature": 0})
        cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(r1["choices"][0]["text"] == want_text(bos_ids[63:163]) and
              r2["choices"][0]["text"] == want_text(bos_ids[95:195]) and cached > 0,
              f"serve, prefix sharing: both texts equal the reference's; the second found {cached} "
              f"of its 96 prompt tokens cached")
        # four concurrent requests in 20 pages (each needs 13): preemption
        before = srv.get("/metrics")
        res = [None] * 4

        def one(i):
            res[i] = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": STEPS,
                                                  "temperature": 0, "user": f"u{i}"})

        th = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        after = srv.get("/metrics")

        def counter(text, name):
            m = re.search(rf"^{name} (\d+)", text, re.M)
            return int(m.group(1)) if m else 0

        pre = counter(after, "fairkv_num_preemptions_total") - counter(before, "fairkv_num_preemptions_total")
        rec = counter(after, "fairkv_recomputed_tokens_total") - counter(before, "fairkv_recomputed_tokens_total")
        good = sum(r is not None and r["choices"][0]["text"] == want_text(refs["Once upon a time"][1]) for r in res)
        check(good == 4 and pre > 0,
              f"serve, 4 concurrent requests in 20 pages: {good}/4 texts equal the reference's "
              f"({pre} preemptions, {rec} recomputed tokens)")
        # forked samples through the server: n = 4 at temperature 0, every
        # choice greedy, so every one is the reference's text
        r = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": STEPS, "temperature": 0,
                                         "n": 4})
        good = sum(c["text"] == want_text(refs["Once upon a time"][1]) for c in r["choices"])
        check(len(r["choices"]) == 4 and good == 4, f"serve, n = 4 forked samples: {good}/4 texts equal the reference's")
    finally:
        srv.stop()
    # int8 cold chunks through the server (64 hot tokens): the greedy text
    # must agree with the reference's over at least 95% of its length before
    # the first difference, and chunks must have been quantized
    srv = Server(binary, f32, "--quant", "always", "--quant-dtype", "int8", "--backend-opt", "quant_hot=32")
    try:
        want = want_text(refs["Once upon a time"][1])
        r = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": STEPS, "temperature": 0})
        got = r["choices"][0]["text"]
        same_prefix = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        # /metrics is a snapshot refreshed when the engine goes idle: poll it
        quantized = 0
        for _ in range(40):
            m = re.search(r'^fairkv_quantized_chunks_total\{reason="always"\} (\d+)', srv.get("/metrics"), re.M)
            quantized = int(m.group(1)) if m else 0
            if quantized:
                break
            time.sleep(0.05)
        check(same_prefix >= 0.95 * len(want) and quantized > 0,
              f"serve, int8 cold chunks: {same_prefix} of {len(want)} characters agree before the first "
              f"difference; {quantized} chunks quantized")
    finally:
        srv.stop()
    print(f"{len(failures)} failed; {time.time() - t_start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

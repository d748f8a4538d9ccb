#!/usr/bin/env python3
"""A small GPTQ reference in numpy, written from llm-compressor's gptq_quantize.py (quantize_weight)
with AutoGPTQ's grouping (group scales computed when a group's first column comes up; act-order
permutes columns by descending diag(H) and groups follow the permuted order, recorded in g_idx).
It makes the fixture tests/fixtures/quant/gptq_reference/ that engine/quant/gptq.cpp is checked
against (tests/quant/gptq_test.cpp).

Conventions shared with Lathe (engine/quant/int_quant.h): the grid of a group spanning [lo, hi] is
computed in float32: lo = min(lo, 0), hi = max(hi, 0); symmetric: a = max(|lo|, hi), lo = -a,
hi = a; an all-zero group gets [-1, 1]; scale = (hi - lo) / (2^bits - 1), rounded to float16 before
any code is computed when the case stores f16 scales (as a GPTQ checkpoint does); zero = 2^(bits-1)
(symmetric) or round(-lo / scale); code = clip(round(w / scale) + zero, 0, 2^bits - 1) with round
half to even. Everything else is float64.

usage: gptq_reference.py OUT_DIR      (numpy only; deterministic)
"""
import json
import os
import sys

import numpy as np


def grid(lo, hi, bits, sym, f16=False):
    maxq = np.float32(2**bits - 1)
    lo = np.float32(min(np.float32(lo), np.float32(0)))
    hi = np.float32(max(np.float32(hi), np.float32(0)))
    if sym:
        a = np.float32(max(abs(lo), hi))
        lo, hi = -a, a
    if lo == 0 and hi == 0:
        lo, hi = np.float32(-1), np.float32(1)
    scale = np.float32((hi - lo) / maxq)
    if f16:
        scale = np.float32(np.float16(scale))
    zero = 2 ** (bits - 1) if sym else int(np.clip(np.round(np.float32(-lo / scale)), 0, maxq))
    return scale, zero


def code_of(w, scale, zero, bits):
    q = np.round(np.float32(np.float32(w) / scale)) + np.float32(zero)
    return int(np.clip(q, 0, 2**bits - 1))


def gptq(W, H, bits, group, sym, act_order, damp=0.1, blocksize=128, f16=False):
    W = W.astype(np.float64).copy()
    H = H.astype(np.float64).copy()
    rows, cols = W.shape
    g = cols if group <= 0 else group
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    perm = np.arange(cols)
    if act_order:
        perm = np.argsort(-np.diag(H), kind="stable")
        W = W[:, perm]
        H = H[perm][:, perm]
    H[np.diag_indices(cols)] += damp * np.mean(np.diag(H))
    L = np.linalg.cholesky(H)
    Hinv = np.linalg.inv(L).T @ np.linalg.inv(L)  # cholesky_inverse
    U = np.linalg.cholesky(Hinv).T  # upper factor: Hinv = U^T U

    codes = np.zeros((rows, cols), dtype=np.uint8)
    ng = cols // g
    scales = np.zeros((rows, ng), dtype=np.float32)
    zeros = np.zeros((rows, ng), dtype=np.int32)
    params = [None] * rows
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].copy()
        Err1 = np.zeros_like(W1)
        for i in range(i2 - i1):
            j = i1 + i
            if j % g == 0:
                for r in range(rows):
                    cur = np.concatenate([W1[r, i : min(i + g, i2 - i1)], W[r, i2 : j + g]])
                    cur32 = cur.astype(np.float32)
                    params[r] = grid(cur32.min(), cur32.max(), bits, sym, f16)
                    scales[r, j // g], zeros[r, j // g] = params[r]
            d = U[j, j]
            for r in range(rows):
                s, z = params[r]
                c = code_of(W1[r, i], s, z, bits)
                codes[r, perm[j]] = c
                q = float(np.float32(s * np.float32(c - z)))
                e = (W1[r, i] - q) / d
                W1[r, i:] -= e * U[j, i1 + i : i2]
                Err1[r, i] = e
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    g_idx = np.zeros(cols, dtype=np.int32)
    g_idx[perm] = np.arange(cols) // g
    return codes, scales, zeros, g_idx


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(15)
    rows, cols, n = 16, 64, 256
    # Correlated inputs with a few loud channels, as real activations have.
    mix = rng.normal(size=(cols, cols)) / np.sqrt(cols)
    X = rng.normal(size=(n, cols)) @ (np.eye(cols) + 0.8 * mix)
    X[:, [3, 17, 40]] *= 6.0
    X[:, 50] = 0.0  # a dead input channel
    H = 2.0 * X.T @ X / n
    W = (0.05 * rng.normal(size=(rows, cols))).astype(np.float32)
    W.tofile(f"{out}/w.f32")
    H.astype("<f8").tofile(f"{out}/h.f64")
    cases = [
        {"name": "sym4_g16", "bits": 4, "group": 16, "sym": True, "act_order": False},
        {"name": "asym4_g32_actorder", "bits": 4, "group": 32, "sym": False, "act_order": True},
        {"name": "sym8_channel", "bits": 8, "group": -1, "sym": True, "act_order": False},
        {"name": "asym4_g64_blocks16", "bits": 4, "group": 64, "sym": False, "act_order": False,
         "block": 16},
        # The quality table's configuration (symmetric, act-order, f16 scales) with several groups
        # per block, so groups start mid-block from weights the block's errors already updated.
        {"name": "sym4_g16_actorder_f16_blocks32", "bits": 4, "group": 16, "sym": True,
         "act_order": True, "block": 32, "scale": "f16"},
    ]
    for c in cases:
        codes, scales, zeros, g_idx = gptq(W, H, c["bits"], c["group"], c["sym"], c["act_order"],
                                           blocksize=c.get("block", 128),
                                           f16=c.get("scale") == "f16")
        codes.tofile(f"{out}/{c['name']}.codes")
        scales.astype("<f4").tofile(f"{out}/{c['name']}.scales")
        zeros.astype("<i4").tofile(f"{out}/{c['name']}.zeros")
        g_idx.astype("<i4").tofile(f"{out}/{c['name']}.g_idx")
    with open(f"{out}/cases.json", "w") as f:
        json.dump({"rows": rows, "cols": cols, "samples": n, "damp_percent": 0.1,
                   "made_by": "scripts/quant/gptq_reference.py", "cases": cases}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

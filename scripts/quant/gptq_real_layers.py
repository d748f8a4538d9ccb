#!/usr/bin/env python3
"""GPTQ on a real model's layers, checked in numpy (docs/QUANTIZATION.md, "GPTQ and the calibration
text"). Inputs: the dump `lathe quantize -s gptq` writes with LATHE_GPTQ_DUMP_DIR=DUMP and
LATHE_GPTQ_DUMP_LAYERS=0,L (each linear's float weights, Hessian and calibration inputs), the GPTQ
folder that run wrote, and its 16-bit source folder (HF Llama). For block L it prints, per linear:
  - H against 2 X^T X / n recomputed from the dumped inputs;
  - the fraction of weights where the folder (decoded by read_quantized_folder.py, v1 zero - 1)
    differs from an independent vectorized GPTQ (AutoGPTQ's fasterquant: dead columns, act-order,
    damp x mean diag, upper Cholesky of H^-1, lazy block updates, a group's grid from its current
    weights, f16 scales rounded before coding);
  - the layer loss tr(dW H dW^T) of GPTQ relative to round-to-nearest's, on the calibration inputs
    (in sample), and held out: GPTQ from the even samples' Hessian measured on the odd samples';
    with --other DUMP2 (a dump of another calibration text, e.g. the evaluation's domain) GPTQ from
    DUMP's Hessian measured on DUMP2's.
With block 0 dumped too, the true-sequential check: block L's inputs recomputed by a numpy forward
of blocks 0..L-1 (transformers' LlamaModel: RMSNorm, rotate-half RoPE, GQA, SwiGLU) with the
folder's quantized weights, from the tokens recovered from block 0's inputs.
usage: gptq_real_layers.py DUMP GPTQ_FOLDER SOURCE_FOLDER --layer L [--group 64] [--other DUMP2]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_quantized_folder as rqf  # noqa: E402

HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
      "ffn_down": "mlp.down_proj"}


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def grid(wg, bits=4):  # symmetric, [n, g] -> scales [n] (f16-rounded), zero 2^(bits-1)
    lo = np.minimum(wg.astype(np.float32).min(1), 0)
    hi = np.maximum(wg.astype(np.float32).max(1), 0)
    a = np.maximum(-lo, hi)
    a = np.where(a == 0, 1, a)
    return f16((2 * a / np.float32(2**bits - 1)).astype(np.float32)), np.float32(2 ** (bits - 1))


def qdq(w, s, z, bits=4):
    q = np.clip(np.round(w.astype(np.float32) / s) + z, 0, 2**bits - 1)
    return (s * (q - z)).astype(np.float64)


def rtn(w, g):
    out = np.zeros(w.shape)
    for j in range(0, w.shape[1], g):
        s, z = grid(w[:, j:j + g])
        out[:, j:j + g] = qdq(w[:, j:j + g], s[:, None], z)
    return out


def gptq(w, h, g, damp=0.1, bs=128):
    w = w.astype(np.float64).copy()
    h = h.astype(np.float64).copy()
    k = w.shape[1]
    dead = np.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    perm = np.argsort(-np.diag(h), kind="stable")
    w, h = w[:, perm], h[perm][:, perm]
    h[np.diag_indices(k)] += damp * np.mean(np.diag(h))
    li = np.linalg.inv(np.linalg.cholesky(h))
    u = np.linalg.cholesky(li.T @ li).T
    q = np.zeros_like(w)
    for i1 in range(0, k, bs):
        i2 = min(i1 + bs, k)
        w1, e1 = w[:, i1:i2].copy(), np.zeros((w.shape[0], i2 - i1))
        for i in range(i2 - i1):
            j = i1 + i
            if j % g == 0:
                s, z = grid(np.concatenate([w1[:, i:min(i + g, i2 - i1)], w[:, i2:j + g]], 1))
            q[:, j] = qdq(w1[:, i], s, z)
            e = (w1[:, i] - q[:, j]) / u[j, j]
            w1[:, i:] -= np.outer(e, u[j, i1 + i:i2])
            e1[:, i] = e
        w[:, i2:] -= e1 @ u[i1:i2, i2:]
    out = np.zeros_like(q)
    out[:, perm] = q
    return out


def loss(d, h):
    return float(np.einsum("ij,jk,ik->", d, h, d))


def load(dump, name):
    n, k, rows = map(int, open(f"{dump}/{name}.shape").read().split())
    w = np.fromfile(f"{dump}/{name}.w.f32", np.float32).reshape(n, k).astype(np.float64)
    h = np.fromfile(f"{dump}/{name}.h.f64").reshape(k, k)
    x = np.fromfile(f"{dump}/{name}.x.f32", np.float32).reshape(rows, k).astype(np.float64)
    return w, h, x


def true_sequential(args, q, src, cfg, seq_len):
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    f = lambda n: src[n].astype(np.float64)  # noqa: E731
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w  # noqa: E731
    lin = lambda x, l, n: x @ rqf.gptq_weight(q, f"model.layers.{l}.{n}", 4).astype(np.float64).T  # noqa
    x0 = load(args.dump, "blk.0.attn_q")[2]
    rows = len(x0)
    emb = f("model.embed_tokens.weight")
    en = rms(emb, f("model.layers.0.input_layernorm.weight")).astype(np.float32)
    nn = (en * en).sum(1)
    ids = np.concatenate([(nn[None] - 2 * x0[i:i + 256].astype(np.float32) @ en.T).argmin(1)
                          for i in range(0, rows, 256)])
    pos = np.tile(np.arange(seq_len), rows // seq_len)
    ang = pos[:, None] * (1.0 / theta ** (np.arange(0, hd, 2) / hd))[None]
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))
    rope = lambda t: t * cos[:, None] + np.concatenate([-t[..., hd // 2:], t[..., :hd // 2]], -1) * sin[:, None]  # noqa
    mask = np.triu(np.full((seq_len, seq_len), -np.inf), 1)
    x = emb[ids]
    for layer in range(args.layer):
        p = f"model.layers.{layer}."
        h1 = rms(x, f(p + "input_layernorm.weight"))
        qq = rope(lin(h1, layer, HF["attn_q"]).reshape(rows, nh, hd))
        kk = rope(lin(h1, layer, HF["attn_k"]).reshape(rows, nkv, hd))
        vv = lin(h1, layer, HF["attn_v"]).reshape(rows, nkv, hd)
        a = np.empty((rows, nh, hd))
        for s0 in range(0, rows, seq_len):
            sl = slice(s0, s0 + seq_len)
            for hh in range(nh):
                sc = qq[sl, hh] @ kk[sl, hh // (nh // nkv)].T / np.sqrt(hd) + mask
                pr = np.exp(sc - sc.max(1, keepdims=True))
                a[sl, hh] = (pr / pr.sum(1, keepdims=True)) @ vv[sl, hh // (nh // nkv)]
        x = x + lin(a.reshape(rows, -1), layer, HF["attn_output"])
        h2 = rms(x, f(p + "post_attention_layernorm.weight"))
        g, u = lin(h2, layer, HF["ffn_gate"]), lin(h2, layer, HF["ffn_up"])
        x = x + lin(g / (1 + np.exp(-g)) * u, layer, HF["ffn_down"])
    h1 = rms(x, f(f"model.layers.{args.layer}.input_layernorm.weight"))
    got = load(args.dump, f"blk.{args.layer}.attn_q")[2]
    print(f"true-sequential: block {args.layer}'s q/k/v input from a numpy forward of blocks "
          f"0..{args.layer - 1} with the quantized weights: max rel. difference "
          f"{np.abs(h1 - got).max() / np.abs(got).max():.2e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("folder")
    ap.add_argument("source")
    ap.add_argument("--layer", type=int, required=True)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--other")
    args = ap.parse_args()
    q = rqf.read_folder(args.folder)
    src = rqf.read_folder(args.source)
    cfg = json.load(open(os.path.join(args.source, "config.json")))
    for name in HF:
        key = f"blk.{args.layer}.{name}"
        w, h, x = load(args.dump, key)
        hx = 2 * x.T @ x / len(x)
        ql = rqf.gptq_weight(q, f"model.layers.{args.layer}.{HF[name]}", 4).astype(np.float64)
        qn = gptq(w, h, args.group)
        qr = rtn(w, args.group)
        xs = x.reshape(-1, args.seq_len, x.shape[1])
        xa, xb = xs[0::2].reshape(-1, x.shape[1]), xs[1::2].reshape(-1, x.shape[1])
        ha, hb = 2 * xa.T @ xa / len(xa), 2 * xb.T @ xb / len(xb)
        held = loss(gptq(w, ha, args.group) - w, hb) / loss(qr - w, hb)
        line = (f"{key}: H vs 2XtX/n {np.abs(h - hx).max() / np.abs(hx).max():.1e}; folder vs numpy "
                f"GPTQ: {np.mean(ql != qn.astype(np.float32)):.4f} differ; loss / RTN's: in sample "
                f"{loss(ql - w, h) / loss(qr - w, h):.3f}, held out {held:.3f}")
        if args.other:
            ho = np.fromfile(f"{args.other}/{key}.h.f64").reshape(h.shape)
            line += f", on {os.path.basename(args.other.rstrip('/'))} {loss(ql - w, ho) / loss(qr - w, ho):.3f}"
        print(line, flush=True)
    if os.path.exists(f"{args.dump}/blk.0.attn_q.shape") and args.layer > 0:
        true_sequential(args, q, src, cfg, args.seq_len)


if __name__ == "__main__":
    main()

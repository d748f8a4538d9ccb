#!/usr/bin/env python3
"""The CUDA 8-bit decode kernel's f16-pair products, emulated on real weights and activations.

decode_gemv's FP8 and 8-bit integer products (engine/backend/cuda/decode_gemv_kernel.cuh, batches 1-4)
stage x in f16, scaled per token by the power of two that puts its largest |x| in [4, 8), decode
each 16-weight vector to 8 f16 pairs and sum each half's 8 products in f16 (one rounding per HFMA2),
then add the two halves in f32 and scale * dot into the row's f32 sum. This script measures what
that costs against an exact dot on the same quantized weights, for real layers of a GGUF file
(dequantized by gguf-py), FP8 e4m3 per channel and 8-bit integers per channel (zero 128), with
the activations the layers see at their first block: the RMSNorm of token embeddings (q/k/v and
gate/up inputs) and SwiGLU of those (down_proj's input).

    ~/.cache/lathe/venv-quant/bin/python scripts/quant/w8_f16_pair_error.py MODEL.gguf \
        [--tokens 64] [--blocks 0,1]
(numpy and gguf-py from scripts/fetch-quant-tools.sh's venv). Measured 2026-12-04 on
SmolLM2-135M-Instruct.Q4_1.gguf, blocks 0, 15, 29: 2.9-5.1e-4 (f32 sums 2-3e-7), quantization
1.4-2.9e-2 (FP8) and 4-10e-3 (INT8); docs/gpu-notes.md, "The 8-bit decode products in f16 pairs".

Prints, per block, projection and format, the relative L2 error of the emulated kernel and of
f32 accumulation (the rows kernel) against the exact dot on the quantized weights, over all tokens
and rows, and for scale the error of the quantization itself (the exact dot on the quantized
weights against the one on the file's weights).
"""
import argparse

import numpy as np
import gguf


def bf16_round(x):
    """Round float32 values to bf16 (round to nearest even), returned as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def e4m3_round(x):
    """Round to FP8 e4m3 (max 448, 3 mantissa bits, subnormals below 2^-6), as float64."""
    a = np.minimum(np.abs(x), 448.0)
    e = np.floor(np.log2(np.maximum(a, 2.0**-20)))
    step = 2.0 ** (np.maximum(e, -6) - 3)
    return np.sign(x) * np.round(a / step) * step


def quantize(w, fmt):
    """Per-channel codes (as their values, exact in f16) and scales of w [n, k]."""
    amax = np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-12)
    if fmt == "fp8":
        s = amax / 448.0
        return e4m3_round(w / s), s
    s = amax / 127.0
    return np.clip(np.round(w / s), -128, 127), s  # code - zero with zero 128


def kernel_dot(codes, scales, x):
    """The decode kernel's sums for one token: x [k] (bf16 values), codes [n, k]."""
    amax = np.abs(x).max()
    e = 3 - np.frexp(amax)[1] if amax > 0 else 0
    xs = (x * 2.0**e).astype(np.float16).astype(np.float64)
    n, k = codes.shape
    c = codes.reshape(n, k // 16, 16)
    v = xs.reshape(k // 16, 16)
    halves = []
    for h in (0, 1):  # even and odd elements of each vector: the two halves of the f16 pairs
        acc = None
        for i in range(8):
            p = c[:, :, 2 * i + h] * v[None, :, 2 * i + h]
            acc = p if acc is None else acc + p
            acc = acc.astype(np.float16).astype(np.float64)  # one rounding per HMUL2 / HFMA2
        halves.append(acc.astype(np.float32))
    d = (halves[0] + halves[1]).astype(np.float32)  # f32 add of the two halves
    y = (d * scales.astype(np.float32)[:, None]).sum(axis=1, dtype=np.float32)  # scale * dot, f32
    return y.astype(np.float64) * 2.0**-e


def rms_norm(h, weight, eps=1e-5):
    return h / np.sqrt((h * h).mean(axis=1, keepdims=True) + eps) * weight


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--blocks", default="0")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = gguf.GGUFReader(a.model)
    t = {x.name: x for x in r.tensors}

    def weight(name):
        x = t[name]
        return gguf.quants.dequantize(x.data, x.tensor_type).astype(np.float64)

    emb = weight("token_embd.weight")
    rng = np.random.default_rng(a.seed)
    ids = rng.integers(0, emb.shape[0], a.tokens)
    h = emb[ids]
    print(f"{a.model}: {a.tokens} random tokens' embeddings, first blocks' inputs")
    print(f"{'block':>5} {'projection':<10} {'k':>6} {'fmt':<4} {'f16 pairs':>10} {'f32':>10} "
          f"{'quantization':>12}")
    for b in [int(s) for s in a.blocks.split(",")]:
        x_attn = bf16_round(rms_norm(h, weight(f"blk.{b}.attn_norm.weight")))
        x_ffn = bf16_round(rms_norm(h, weight(f"blk.{b}.ffn_norm.weight")))
        gate, up = weight(f"blk.{b}.ffn_gate.weight"), weight(f"blk.{b}.ffn_up.weight")
        g, u = x_ffn @ gate.T, x_ffn @ up.T
        x_down = bf16_round(g / (1 + np.exp(-g)) * u)
        cases = [("q", f"blk.{b}.attn_q.weight", x_attn), ("gate", f"blk.{b}.ffn_gate.weight", x_ffn),
                 ("down", f"blk.{b}.ffn_down.weight", x_down)]
        for label, name, xs in cases:
            w = weight(name)
            if w.shape[1] % 16 != 0:
                continue
            for fmt in ("fp8", "int8"):
                codes, scales = quantize(w, fmt)
                scales = scales[:, 0]
                wq = codes * scales[:, None]
                ref = wq @ xs.astype(np.float64).T  # [n, tokens]
                yk = np.stack([kernel_dot(codes, scales, xs[i].astype(np.float64))
                               for i in range(xs.shape[0])], axis=1)
                yf = (wq.astype(np.float32) @ xs.astype(np.float32).T).astype(np.float64)
                err = lambda y: np.linalg.norm(y - ref) / np.linalg.norm(ref)
                full = w @ xs.astype(np.float64).T
                quant = np.linalg.norm(ref - full) / np.linalg.norm(full)
                print(f"{b:>5} {label:<10} {w.shape[1]:>6} {fmt:<4} {err(yk):>10.2e} {err(yf):>10.2e} "
                      f"{quant:>12.2e}")


if __name__ == "__main__":
    main()

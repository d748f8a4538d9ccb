#!/usr/bin/env python3
"""An independent reader of quantized Hugging Face folders, written from the published layouts
(AutoGPTQ's v1 packing, AutoAWQ's GEMM packing, compressed-tensors' pack-quantized and
float-quantized formats; see ../shared/reference/FORMATS.md and QUANT.md), in numpy only.

It dequantizes every quantized linear of FOLDER and compares it with EXPECTED, a safetensors file
of float32 "<module>.weight" tensors (what Lathe says it wrote); unquantized tensors of FOLDER that
EXPECTED also lists are compared too. Prints a JSON summary; exit status 1 on any mismatch.

usage: read_quantized_folder.py FOLDER EXPECTED.safetensors [--atol 0]
"""
import argparse
import glob
import json
import os
import struct
import sys

import numpy as np


def e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for c in range(256):
        e, m = (c >> 3) & 15, c & 7
        if c & 0x7F == 0x7F:
            v = np.nan
        elif e == 0:
            v = m * 2.0**-9
        else:
            v = (1 + m / 8) * 2.0 ** (e - 7)
        t[c] = -v if c & 0x80 else v
    return t


E4M3 = e4m3_table()


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b : base + e]
        dt, shape = info["dtype"], info["shape"]
        if dt == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F8_E4M3":
            a = E4M3[np.frombuffer(raw, np.uint8)]
        else:
            a = np.frombuffer(raw, {"F32": "<f4", "F16": "<f2", "I32": "<i4", "I8": "i1",
                                    "U8": "u1", "I64": "<i8"}[dt])
        out[name] = a.reshape(shape)
    return out


def read_folder(folder):
    tensors = {}
    for p in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        tensors.update(read_safetensors(p))
    return tensors


def unpack_rows(words, bits, count):
    """int32 words packed along their last axis -> [.., count] codes."""
    pack = 32 // bits
    w = words.astype(np.uint32)
    parts = [(w >> np.uint32(bits * j)) & np.uint32((1 << bits) - 1) for j in range(pack)]
    return np.stack(parts, axis=-1).reshape(*w.shape[:-1], -1)[..., :count].astype(np.int64)


def gptq_weight(t, prefix, bits):
    qweight, qzeros = t[prefix + ".qweight"], t[prefix + ".qzeros"]
    scales, g_idx = t[prefix + ".scales"].astype(np.float32), t[prefix + ".g_idx"]
    n = qweight.shape[1]
    q = unpack_rows(qweight.T, bits, qweight.shape[0] * (32 // bits))  # [N, K]
    z = unpack_rows(qzeros, bits, n) + 1  # [G, N], stored zero - 1
    s = scales[g_idx].T  # [N, K]
    zk = z[g_idx].T.astype(np.float32)
    return s * (q.astype(np.float32) - zk)


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def awq_unpack(words):
    """[R, N/8] words -> [R, N] nibbles in AutoAWQ's GEMM order."""
    w = words.astype(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1] * 8), dtype=np.int64)
    for i, col in enumerate(AWQ_ORDER):
        out[:, col::8] = (w >> np.uint32(4 * i)) & np.uint32(15)
    return out


def awq_weight(t, prefix, group_size):
    q = awq_unpack(t[prefix + ".qweight"])  # [K, N]
    z = awq_unpack(t[prefix + ".qzeros"])  # [G, N]
    s = t[prefix + ".scales"].astype(np.float32)  # [G, N]
    g = np.arange(q.shape[0]) // group_size
    return (s[g] * (q.astype(np.float32) - z[g].astype(np.float32))).T


def ct_int_weight(t, prefix, bits):
    n, k = (int(v) for v in t[prefix + ".weight_shape"])
    offset = 1 << (bits - 1)
    q = unpack_rows(t[prefix + ".weight_packed"], bits, k) - offset  # signed [N, K]
    scale = t[prefix + ".weight_scale"].astype(np.float32)  # [N, G]
    groups = scale.shape[1]
    if prefix + ".weight_zero_point" in t:
        zp = unpack_rows(t[prefix + ".weight_zero_point"].T, bits, n).T - offset  # [N, G]
    else:
        zp = np.zeros((n, groups), dtype=np.int64)
    g = t[prefix + ".weight_g_idx"] if prefix + ".weight_g_idx" in t else np.arange(k) // (k // groups)
    return scale[:, g] * (q.astype(np.float32) - zp[:, g].astype(np.float32))


def ct_float_weight(t, prefix):
    w = t[prefix + ".weight"].astype(np.float32)
    s = t[prefix + ".weight_scale"].astype(np.float32)
    n, k = w.shape
    if s.size == 1:
        return w * s.reshape(())
    if s.shape == (n, 1):
        return w * s
    bn = -(-n // s.shape[0])
    bk = -(-k // s.shape[1])
    return w * np.repeat(np.repeat(s, bn, axis=0), bk, axis=1)[:n, :k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("expected")
    ap.add_argument("--atol", type=float, default=0.0)
    a = ap.parse_args()
    with open(os.path.join(a.folder, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    t = read_folder(a.folder)
    expected = read_safetensors(a.expected)
    method = qc["quant_method"]
    report = {"method": method, "checked": 0, "max_abs_diff": 0.0, "failures": []}
    for name, want in expected.items():
        prefix = name[: -len(".weight")]
        if method == "gptq" and prefix + ".qweight" in t:
            got = gptq_weight(t, prefix, qc["bits"])
        elif method == "awq" and prefix + ".qweight" in t:
            got = awq_weight(t, prefix, qc["group_size"])
        elif method == "compressed-tensors" and prefix + ".weight_packed" in t:
            bits = qc["config_groups"]["group_0"]["weights"]["num_bits"]
            got = ct_int_weight(t, prefix, bits)
        elif method == "compressed-tensors" and prefix + ".weight_scale" in t:
            got = ct_float_weight(t, prefix)
        elif name in t:
            got = t[name].astype(np.float32)
        else:
            report["failures"].append(f"{name}: not in the folder")
            continue
        report["checked"] += 1
        if got.shape != want.shape:
            report["failures"].append(f"{name}: shape {list(got.shape)} != {list(want.shape)}")
            continue
        diff = float(np.max(np.abs(got - want))) if got.size else 0.0
        report["max_abs_diff"] = max(report["max_abs_diff"], diff)
        if not diff <= a.atol:
            report["failures"].append(f"{name}: max |diff| {diff}")
    print(json.dumps(report))
    return 1 if report["failures"] or report["checked"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

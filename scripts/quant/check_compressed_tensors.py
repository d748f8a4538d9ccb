#!/usr/bin/env python3
"""Checks a compressed-tensors folder written by `lathe quantize` with the `compressed-tensors`
package itself (the library vLLM and llm-compressor use). Needs torch, so it runs on the GPU
machine, not in CI:

    pip install compressed-tensors safetensors torch numpy
    python scripts/quant/check_compressed_tensors.py OUT_FOLDER [EXPECTED.safetensors]

Every quantized linear is decompressed by the package's own compressor for the folder's format
(pack-quantized or float-quantized) and compared with the numpy reference reader of this folder
(read_quantized_folder.py, written from the published layout) and, when given, with EXPECTED
(float32 "<module>.weight" tensors, what Lathe says it wrote). Exit status 1 on any mismatch.
"""
import json
import os
import sys

import numpy as np
import torch
from compressed_tensors.compressors import ModelCompressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_quantized_folder as ref  # noqa: E402


def compressor_for(mc, fmt):
    c = mc.quantization_compressor
    if isinstance(c, dict):  # newer releases keep one compressor per format
        return c[fmt]
    return c


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    with open(os.path.join(folder, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    fmt = qc["format"]
    mc = ModelCompressor.from_pretrained(folder)
    weights_args = mc.quantization_config.config_groups["group_0"].weights
    tensors = ref.read_folder(folder)
    prefixes = sorted({n[: -len(".weight_scale")] for n in tensors if n.endswith(".weight_scale")})
    names_to_scheme = {p: weights_args for p in prefixes}
    expected = ref.read_safetensors(sys.argv[2]) if len(sys.argv) == 3 else {}
    failures, checked = [], 0
    for name, value in compressor_for(mc, fmt).decompress(folder, names_to_scheme=names_to_scheme):
        got = value.to(torch.float32).cpu().numpy()
        prefix = name[: -len(".weight")]
        if fmt == "pack-quantized":
            mine = ref.ct_int_weight(tensors, prefix, qc["config_groups"]["group_0"]["weights"]["num_bits"])
        else:
            mine = ref.ct_float_weight(tensors, prefix)
        checked += 1
        # The package computes in the scale's dtype (bf16 / f16): allow its rounding.
        tol = 1e-2 * float(np.max(np.abs(mine))) + 1e-6
        if got.shape != mine.shape or float(np.max(np.abs(got - mine))) > tol:
            failures.append(f"{name}: differs from the reference reader")
        if name in expected and float(np.max(np.abs(got - expected[name]))) > tol:
            failures.append(f"{name}: differs from EXPECTED")
    print(json.dumps({"format": fmt, "checked": checked, "failures": failures}))
    return 1 if failures or checked != len(prefixes) else 0


if __name__ == "__main__":
    sys.exit(main())

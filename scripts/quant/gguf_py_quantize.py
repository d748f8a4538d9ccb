#!/usr/bin/env python3
"""Quantizes float32 rows with gguf-py's own quantizers (gguf.quants.quantize), for comparing
Lathe's GGUF block quantizers byte for byte (tests/quant/ggml_quantize_test.cpp).

usage: gguf_py_quantize.py INPUT.f32 ROW_LENGTH OUT_DIR TYPE...
  INPUT.f32   little-endian float32 values, rows of ROW_LENGTH
  TYPE        q8_0 | q4_0 | q4_1 | q5_0 | q5_1 (the types gguf-py can quantize)
writes OUT_DIR/<type>.bin (the blocks, row after row).
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

TYPES = {
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_0": GGMLQuantizationType.Q4_0,
    "q4_1": GGMLQuantizationType.Q4_1,
    "q5_0": GGMLQuantizationType.Q5_0,
    "q5_1": GGMLQuantizationType.Q5_1,
}


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    data = np.fromfile(sys.argv[1], dtype="<f4")
    row = int(sys.argv[2])
    rows = data.reshape(-1, row)
    for name in sys.argv[4:]:
        if name not in TYPES:
            print(f"unknown type {name}; gguf-py quantizes {', '.join(TYPES)}", file=sys.stderr)
            return 2
        out = quantize(rows, TYPES[name])
        out.tofile(f"{sys.argv[3]}/{name}.bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())

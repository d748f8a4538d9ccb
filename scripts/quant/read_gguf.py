#!/usr/bin/env python3
"""Reads a GGUF file with gguf-py (llama.cpp's own reader) and dequantizes every tensor with
gguf.quants.dequantize, for checking files Lathe writes (tests/quant/quant_writers_test.cpp,
quantize_model_test.cpp). Prints JSON:
  {"version": 3, "alignment": 32, "metadata": {key: value or "<array of N>"},
   "tensors": [{"name", "type", "shape" (PyTorch order), "offset", "sum", "sum_abs"}]}

usage: read_gguf.py FILE.gguf
"""
import json
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType
from gguf.quants import dequantize


def value_of(field):
    t = field.types[0] if field.types else None
    if t == GGUFValueType.ARRAY:
        return f"<array of {len(field.data)}>"
    if t == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
    v = field.parts[field.data[0]][0]
    return v.item() if hasattr(v, "item") else v


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    r = GGUFReader(sys.argv[1])
    out = {"alignment": int(r.alignment), "metadata": {}, "tensors": []}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            if name == "GGUF.version":
                out["version"] = int(field.parts[field.data[0]][0])
            continue
        out["metadata"][name] = value_of(field)
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float64)
        out["tensors"].append({
            "name": t.name,
            "type": t.tensor_type.name.lower(),
            "shape": [int(d) for d in reversed(t.shape.tolist())],
            "offset": int(t.data_offset),
            "sum": float(w.sum()),
            "sum_abs": float(np.abs(w).sum()),
        })
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

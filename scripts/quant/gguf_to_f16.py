#!/usr/bin/env python3
"""Writes the 16-bit GGUF of a quantized GGUF, the input llama.cpp's `llama-quantize` needs.

Every tensor is dequantized with gguf-py (llama.cpp's own Python package) and stored as F16 when it
has two or more dimensions; one-dimensional tensors (norms, biases) stay F32, as llama.cpp's
converter writes them, but hold f16-rounded values, so the file carries exactly the weights of
`lathe quantize MODEL.gguf -s f16 -o ref-f16` (a folder in which every tensor is f16). The
metadata is copied whole; general.file_type becomes 1 (MOSTLY_F16).

With --f32, every tensor is stored as F32 holding the dequantized values unrounded
(general.file_type 0): the weights of a quantized GGUF in a form whose matrix products llama.cpp's
CPU backend runs in float32, without quantizing the activations to 8 bits as it does for
quantized weights.

Usage: gguf_to_f16.py [--f32] IN.gguf OUT.gguf   (the venv of scripts/fetch-quant-tools.sh)
"""
import os
import sys

import gguf
import numpy as np
from gguf.quants import dequantize


def main() -> int:
    args = sys.argv[1:]
    f32 = args[:1] == ["--f32"]
    if f32:
        args = args[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = args
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    tmp = f"{dst}.tmp-{os.getpid()}"
    writer = gguf.GGUFWriter(tmp, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if f32 else gguf.LlamaFileType.MOSTLY_F16)

    tensors = []
    for t in reader.tensors:
        # gguf-py's shape is ggml's (innermost first); numpy arrays are outermost first.
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        w = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if f32:
            tensors.append((t.name, w))
            continue
        w16 = w.astype(np.float16)
        if not np.all(np.isfinite(w16)):
            print(f"gguf_to_f16: {t.name} does not fit f16", file=sys.stderr)
            return 1
        out = w16 if len(shape) >= 2 else w16.astype(np.float32)
        tensors.append((t.name, out))
    for name, out in tensors:
        writer.add_tensor(name, out)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, dst)
    print(f"gguf_to_f16: {dst} ({len(tensors)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

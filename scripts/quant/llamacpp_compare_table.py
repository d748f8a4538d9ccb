#!/usr/bin/env python3
"""Prints the tables of scripts/quant/llamacpp-compare.sh from its work folder (markdown).

Usage: llamacpp_compare_table.py WORK SOURCE.gguf   (the venv of scripts/fetch-quant-tools.sh)
"""
import json
import os
import re
import sys
from collections import Counter

import gguf

K_TYPES = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}


def tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: t for t in r.tensors}


def fallbacks(ts):
    """Quantized tensors whose rows do not fit 256-weight k-quant blocks, and their types."""
    out = {}
    for name, t in ts.items():
        ty = t.tensor_type.name
        if len(t.shape) >= 2 and int(t.shape[0]) % 256 != 0 and ty not in K_TYPES | {"F32", "F16"}:
            out[name] = ty
    return out


def cpu(work, tag):
    p = f"{work}/time-{tag}"
    if not os.path.exists(p):
        return "?"
    u, s, e = (float(x) for x in open(p).read().split())
    return f"{u + s:.1f} s ({e:.0f} s wall)"


def llama_ppl(log):
    text = open(log).read()
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", text)
    if not m:
        sys.exit(f"llamacpp_compare_table: no final PPL in {log}:\n{text[-2000:]}")
    chunks = re.search(r"calculating perplexity over (\d+) chunks, n_ctx=(\d+)", text)
    return float(m.group(1)), float(m.group(2)), int(chunks.group(1)), int(chunks.group(2))


def main():
    work, source = sys.argv[1], sys.argv[2]
    k = {m: json.load(open(f"{work}/kld-{m}.json")) for m in ("llama", "lathe", "lathe-folder", "ref-gguf")}
    base = k["llama"]["kld"]["mean"]
    print(f"source: {os.path.basename(source)}; reference: ref-f16 (lathe quantize -s f16); "
          f"{k['llama']['windows']} windows of {k['llama']['ctx']} tokens "
          f"({k['llama']['scored_positions']} positions) of {os.path.basename(k['llama']['text'])}\n")
    print("| q4_k_m made by | size | PPL | mean KLD | × llama.cpp's | p99 KLD | top-1 | quantize CPU time |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [("llama.cpp `llama-quantize ref-f16.gguf Q4_K_M`", "llama", f"{work}/llama-q4_k_m.gguf"),
            ("Lathe `lathe quantize ref-f16.gguf -s q4_k_m`", "lathe", f"{work}/lathe-q4_k_m.gguf"),
            ("Lathe `lathe quantize ref-f16 -s q4_k_m` (the folder)", "lathe-folder",
             f"{work}/lathe-folder-q4_k_m.gguf")]
    for label, m, f in rows:
        e = k[m]
        print(f"| {label} | {os.path.getsize(f) / 2**20:.1f} MiB | {e['perplexity']:.3f} | "
              f"{e['kld']['mean']:.5f} | {e['kld']['mean'] / base:.3f} | {e['kld']['p99']:.4f} | "
              f"{100 * e['top1_agreement']:.1f}% | {cpu(work, m) if m != 'lathe-folder' else ''} |")
    r = k["ref-gguf"]
    print(f"\nref-f16.gguf (gguf-py) against ref-f16 (Lathe's folder): mean KLD {r['kld']['mean']:.2e}, "
          f"max {r['kld']['max']:.2e}, top-1 {100 * r['top1_agreement']:.1f}% (the same weights)")

    a, b = tensors(f"{work}/llama-q4_k_m.gguf"), tensors(f"{work}/lathe-q4_k_m.gguf")
    same_type = [n for n in a if n in b and a[n].tensor_type == b[n].tensor_type]
    diff_type = sorted(n for n in a if n in b and a[n].tensor_type != b[n].tensor_type)
    identical = [n for n in same_type if bytes(a[n].data.tobytes()) == bytes(b[n].data.tobytes())]
    print(f"\ntensors: llama.cpp {len(a)}, Lathe {len(b)}; only in one: "
          f"{sorted(set(a) ^ set(b)) or 'none'}; same type {len(same_type)}, "
          f"byte-identical data {len(identical)}")
    print(f"types, llama.cpp: {dict(sorted(Counter(t.tensor_type.name for t in a.values()).items()))}")
    print(f"types, Lathe:     {dict(sorted(Counter(t.tensor_type.name for t in b.values()).items()))}")
    for n in diff_type:
        print(f"  type differs: {n} {list(a[n].shape)}: llama.cpp {a[n].tensor_type.name}, "
              f"Lathe {b[n].tensor_type.name}")
    for n in same_type:
        if n not in identical:
            print(f"  data differs: {n} {list(a[n].shape)} {a[n].tensor_type.name}")
    fa, fb = fallbacks(a), fallbacks(b)
    log = open(f"{work}/llama-quantize.log").read()
    n_log = len(re.findall(r"not divisible by", log))
    print(f"fallbacks (rows not a multiple of 256): llama.cpp {len(fa)} "
          f"({dict(Counter(fa.values()))}; its log warns {n_log} times), Lathe {len(fb)} "
          f"({dict(Counter(fb.values()))}); same tensors: {fa == fb}")
    roles = Counter((re.sub(r"^blk\.\d+\.", "", n), ty) for n, ty in fa.items())
    print("  by role (llama.cpp's file): " +
          ", ".join(f"{r} -> {ty} x{c}" for (r, ty), c in sorted(roles.items())))

    print("\n| GGUF | llama-perplexity | lathe eval, the same tokens | difference | "
          "lathe eval, every target of the windows |")
    print("|---|---|---|---|---|")
    names = {"source": os.path.basename(source), "ref-gguf": "ref-f16.gguf",
             "llama": "llama.cpp's q4_k_m", "llama-f32": "the same, dequantized to F32"}
    for m, label in names.items():
        ppl, err, chunks, n_ctx = llama_ppl(f"{work}/ppl-llama-{m}.log")
        l = json.load(open(f"{work}/ppl-lathe-{m}.json"))
        full = json.load(open(f"{work}/ppl-lathe-all-{m}.json"))
        print(f"| {label} | {ppl:.4f} ± {err:.4f} ({chunks} × {n_ctx}) | {l['perplexity']:.4f} "
              f"({l['scored_positions']} positions) | {100 * (l['perplexity'] / ppl - 1):+.3f}% | "
              f"{full['perplexity']:.4f} ({full['scored_positions']} positions) |")


if __name__ == "__main__":
    main()

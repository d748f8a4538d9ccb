#!/usr/bin/env python3
"""The summary of scripts/gpu/llamacpp-bench.sh: for each GGUF type, llama.cpp's tg128 (llama-bench
JSON) and Lathe's batch-1 decode (lathe_cuda_bench) on the same file, Lathe / llama.cpp, and each
figure as a share of its roofline:
  roofline tok/s = copy bandwidth / (weight bytes read per token + KV bytes at the mean context)
where the weight bytes are the file's tensors but token_embd, as stored (lathe_dummy_gguf's
dummy_gguf.weight_bytes_per_token), and the KV cache is 16-bit K and V for every layer
(llama.cpp's default f16 cache; Lathe's 16-bit cache). Mean context: llama-bench's depth + 64
(tg128), Lathe's latency run input + output / 2 (as lathe_cuda_bench computes its own bound), its
decode steps context + 24.

usage: llamacpp_summary.py --out OUT --config CONFIG_DIR --copy-gbps G --types "q4_k_m q8_0 q4_0"
Reads OUT/llamacpp-<type>-gguf.txt, -llama-bench.json and -lathe.txt; what is missing shows as "-".
"""
import argparse
import json
import os
import re
import sys


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def gguf_report(text):
    r = {}
    for line in text.splitlines():
        m = re.match(r"dummy_gguf\.(\w+) (.*)$", line)
        if m:
            r[m.group(1)] = m.group(2).strip()
    return r


def llama_bench_results(text):
    """{(flash_attn, depth): (avg_ts, stddev_ts)} of the tg results (n_prompt 0)."""
    try:
        rows = json.loads(text) if text.strip() else []
    except json.JSONDecodeError:
        return {}
    out = {}
    for r in rows:
        if r.get("n_gen", 0) <= 0 or r.get("n_prompt", 0) != 0:
            continue
        fa = r.get("flash_attn")
        fa = {True: 1, False: 0}.get(fa, fa)
        out[(int(fa), int(r.get("n_depth", 0)))] = (float(r["avg_ts"]), float(r.get("stddev_ts", 0)))
    return out


def lathe_results(text):
    """(latency tok/s, input, output, {context: decode B1 tok/s}) or None."""
    m = re.search(r"^batch-1 decode \(in (\d+), out (\d+)\)\s+([\d.]+) tok/s", text, re.M)
    if not m:
        return None
    b1 = {int(c): float(v) for c, v in
          re.findall(r"^decode tok/s \(context (\d+)\):.*\bB1=([\d.]+)", text, re.M)}
    return (float(m.group(3)), int(m.group(1)), int(m.group(2)), b1)


def kv_bytes_per_token(config_dir):
    with open(os.path.join(config_dir, "config.json"), encoding="utf-8") as f:
        c = json.load(f)
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", c["num_attention_heads"])
    return 2 * c["num_hidden_layers"] * kv_heads * head_dim * 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--copy-gbps", type=float, default=0.0)
    ap.add_argument("--types", required=True)
    a = ap.parse_args()
    kv = kv_bytes_per_token(a.config)
    copy = a.copy_gbps * 1e9

    def roofline(weights, ctx):
        return copy / (weights + ctx * kv) if copy > 0 and weights > 0 else 0.0

    def pct(tps, bound):
        return f" = {100 * tps / bound:.1f}% of {bound:.0f}" if bound > 0 else ""

    print(f"batch-1 decode on the same GGUF files ({os.path.basename(os.path.normpath(a.config))} "
          f"shape, random weights); "
          f"copy bandwidth {a.copy_gbps:.0f} GB/s; KV {kv} B/token")
    table = []
    for t in a.types.split():
        g = gguf_report(read(os.path.join(a.out, f"llamacpp-{t}-gguf.txt")))
        weights = int(g.get("weight_bytes_per_token", "0") or 0)
        print(f"{t}: file {int(g.get('file_bytes', '0') or 0) / 1e9:.2f} GB ({g.get('types', '-')}), "
              f"weights read per token {weights / 1e9:.3f} GB, written in {g.get('seconds', '-')} s")
        lb = llama_bench_results(read(os.path.join(a.out, f"llamacpp-{t}-llama-bench.json")))
        for depth in sorted({d for (_, d) in lb}):
            parts = []
            for fa in (0, 1):
                if (fa, depth) in lb:
                    ts, sd = lb[(fa, depth)]
                    parts.append(f"fa {'on' if fa else 'off'} {ts:.1f} ± {sd:.1f} tok/s"
                                 f"{pct(ts, roofline(weights, depth + 64))}")
            print(f"  llama.cpp tg128 depth {depth}: " + ", ".join(parts))
        if not lb:
            print("  llama.cpp: no result (see llamacpp-%s-llama-bench.err)" % t)
        best = {d: max(v[0] for (fa, dd), v in lb.items() if dd == d) for (_, d) in lb}
        le = lathe_results(read(os.path.join(a.out, f"llamacpp-{t}-lathe.txt")))
        if le:
            tps, n_in, n_out, b1 = le
            bound = roofline(weights, n_in + n_out / 2)
            line = f"  Lathe latency {n_in} in / {n_out} out: {tps:.1f} tok/s{pct(tps, bound)}"
            print(line)
            for ctx, v in sorted(b1.items()):
                # lathe_cuda_bench's decode steps run at context ctx .. ctx + 48 (mean ctx + 24).
                print(f"  Lathe decode steps at batch 1, context {ctx}: {v:.1f} tok/s"
                      f"{pct(v, roofline(weights, ctx + 24))}")
        else:
            print("  Lathe: no result (see llamacpp-%s-lathe.txt)" % t)
        ref0, ref512 = best.get(0), best.get(512)
        lat = le[0] if le else None
        b64 = le[3].get(64) if le else None
        if lat and ref512:
            print(f"  Lathe / llama.cpp at the same context (latency 512/128 vs tg128 depth 512, "
                  f"best of fa off/on): {lat / ref512:.2f}x")
        if b64 and ref0:
            print(f"  Lathe / llama.cpp at context ~64 (decode steps vs tg128 depth 0): "
                  f"{b64 / ref0:.2f}x")
        if lat and ref0:
            print(f"  Lathe latency 512/128 / llama.cpp tg128 depth 0: {lat / ref0:.2f}x")
        r0 = roofline(weights, 64)
        rl = roofline(weights, le[1] + le[2] / 2) if le else 0
        table.append((t, ref0, b64, ref512, lat, r0 and ref0 and 100 * ref0 / r0,
                      rl and lat and 100 * lat / rl))
    print()
    print("| type | llama.cpp tg128 d0 | Lathe B1 ctx 64 | ratio | llama.cpp tg128 d512 "
          "| Lathe 512/128 | ratio | llama.cpp d0 % roofline | Lathe 512/128 % roofline |")
    print("|---|---|---|---|---|---|---|---|---|")

    def f(v, fmt):
        return fmt.format(v) if v else "-"

    def ratio(x, y):
        return f"{x / y:.2f}x" if x and y else "-"
    for t, r0, b64, r512, lat, p0, pl in table:
        print(f"| {t} | {f(r0, '{:.1f}')} | {f(b64, '{:.1f}')} | {ratio(b64, r0)} | "
              f"{f(r512, '{:.1f}')} | {f(lat, '{:.1f}')} | {ratio(lat, r512)} | {f(p0, '{:.1f}%')} "
              f"| {f(pl, '{:.1f}%')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

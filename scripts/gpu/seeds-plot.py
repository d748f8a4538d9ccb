#!/usr/bin/env python3
"""The seeds' experiment as a Markdown table and an SVG plot (no dependencies).

    scripts/gpu/seeds-plot.py OUT.svg LABEL=FILE.json [LABEL=FILE.json ...]

Each FILE.json is `lathe bench serve --sweep-concurrency ... --json` output (scripts/gpu/seeds-
experiment.sh). Prints the table (per variant and concurrency: output tok/s, TTFT p50/p99, ITL
p50/p99) and writes four panels (output throughput, TTFT p99, ITL p50, ITL p99 against concurrency,
log scale on x) with one series per variant.
"""
import json
import math
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
PANELS = [("output_throughput", "output tokens/s"), ("p99_ttft_ms", "TTFT p99 (ms)"),
          ("median_itl_ms", "ITL p50 (ms)"), ("p99_itl_ms", "ITL p99 (ms)")]


def load(args):
    series = []
    for a in args:
        label, path = a.split("=", 1)
        with open(path) as f:
            rows = sorted(json.load(f)["sweep"], key=lambda r: r["max_concurrency"])
        series.append((label, rows))
    return series


def table(series):
    out = ["| variant | concurrency | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | "
           "ITL p99 (ms) |", "|---|---|---|---|---|---|---|"]
    for label, rows in series:
        for r in rows:
            out.append("| %s | %d | %.0f | %.1f | %.1f | %.2f | %.2f |" % (
                label, r["max_concurrency"], r["output_throughput"], r["median_ttft_ms"],
                r["p99_ttft_ms"], r["median_itl_ms"], r["p99_itl_ms"]))
    return "\n".join(out)


def panel(x0, y0, w, h, key, title, series):
    xs = sorted({r["max_concurrency"] for _, rows in series for r in rows})
    ymax = max(r[key] for _, rows in series for r in rows) * 1.1 or 1.0
    lx = lambda c: x0 + 50 + (w - 70) * (math.log(c) - math.log(xs[0])) / (
        (math.log(xs[-1]) - math.log(xs[0])) or 1.0)
    ly = lambda v: y0 + h - 30 - (h - 60) * v / ymax
    s = ['<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>' % (x0 + 50, y0 + 16, title),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>' % (x0 + 50, y0 + h - 30, x0 + w - 20, y0 + h - 30),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>' % (x0 + 50, y0 + 30, x0 + 50, y0 + h - 30)]
    for c in xs:
        s.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%d</text>' % (lx(c), y0 + h - 16, c))
    for i in range(5):
        v = ymax * i / 4
        s.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%s</text>' % (
            x0 + 46, ly(v) + 3, ("%.0f" % v) if ymax > 20 else ("%.1f" % v)))
        s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0 + 50, ly(v), x0 + w - 20, ly(v)))
    for i, (label, rows) in enumerate(series):
        pts = " ".join("%.1f,%.1f" % (lx(r["max_concurrency"]), ly(r[key])) for r in rows)
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (COLORS[i % 5], pts))
        for r in rows:
            s.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (lx(r["max_concurrency"]), ly(r[key]), COLORS[i % 5]))
    return s


def svg(series, path):
    w, h = 460, 300
    body = []
    for i, (key, title) in enumerate(PANELS):
        body += panel((i % 2) * w, 30 + (i // 2) * h, w, h, key, title + " vs concurrency", series)
    for i, (label, _) in enumerate(series):
        body.append('<rect x="%d" y="8" width="14" height="10" fill="%s"/>' % (60 + 150 * i, COLORS[i % 5]))
        body.append('<text x="%d" y="17" font-size="12">%s</text>' % (80 + 150 * i, label))
    with open(path, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">\n'
                '<rect width="100%%" height="100%%" fill="white"/>\n%s\n</svg>\n' % (2 * w, 30 + 2 * h, "\n".join(body)))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    s = load(sys.argv[2:])
    svg(s, sys.argv[1])
    print(table(s))

#!/usr/bin/env python3
"""Compares lm-eval's per-choice log-likelihoods with Lathe's own (scripts/lm-eval.sh).

lm-eval (model local-completions) tokenized each (context, continuation) with its tokenizer and
read the continuation's logprobs back from /v1/completions with echo. Lathe's own figure comes
from the same server through its own tokenizer and a text prompt: the logprobs of the
continuation's tokens (those after the context's) in an echo of context + continuation, as a
log-likelihood task defines them. Prints both per choice, the accuracy each gives, and the largest
difference; exits 1 when that exceeds --tolerance. Standard library only.
"""
import argparse
import glob
import json
import os
import sys
import urllib.request


def post(base_url, path, body):
    req = urllib.request.Request(base_url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def lathe_loglikelihood(base_url, model, context, continuation):
    """The sum of the continuation tokens' logprobs, Lathe tokenizing the text itself."""
    # As lm-eval splits a pair: trailing spaces of the context belong to the continuation.
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = post(base_url, "/tokenize", {"model": model, "prompt": context + continuation})["tokens"]
    ctx = post(base_url, "/tokenize", {"model": model, "prompt": context})["tokens"]
    out = post(base_url, "/v1/completions", {"model": model, "prompt": context + continuation,
                                              "echo": True, "logprobs": 1, "max_tokens": 1,
                                              "temperature": 0})
    lps = out["choices"][0]["logprobs"]["token_logprobs"]
    # The echoed prompt's logprobs, then the one generated token's.
    assert len(lps) == len(whole) + 1, (len(lps), len(whole))
    return sum(lps[len(ctx):len(whole)]), len(whole) - len(ctx)


def pairs_of(sample):
    args = sample["arguments"]
    if isinstance(args, dict):  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
        return [(a["arg_0"], a["arg_1"]) for a in args.values()]
    return [(a[0], a[1]) for a in args]


def loglik_of(resp):
    # resps: one list per request, holding [loglikelihood, is_greedy] (numbers or strings).
    while isinstance(resp, list) and resp and isinstance(resp[0], list):
        resp = resp[0]
    return float(resp[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples-dir", required=True, help="lm_eval --output_path folder")
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--model", required=True, help="the served model name")
    ap.add_argument("--tolerance", type=float, default=1e-3, help="largest |difference| (nats)")
    args = ap.parse_args()
    files = glob.glob(os.path.join(args.samples_dir, "**", "samples_*.jsonl"), recursive=True)
    if not files:
        sys.exit(f"lm_eval_compare: no samples_*.jsonl under {args.samples_dir}")
    samples = [json.loads(line) for line in open(sorted(files)[-1])]
    samples.sort(key=lambda s: s["doc_id"])
    print(f"{'doc':>3} {'choice':<16} {'tokens':>6} {'lm-eval':>12} {'lathe':>12} {'|diff|':>10}")
    max_diff = 0.0
    correct_lm = correct_lathe = 0
    for s in samples:
        pairs = pairs_of(s)
        lm = [loglik_of(r) for r in s["resps"]]
        own = []
        for (context, continuation), ll in zip(pairs, lm):
            mine, n = lathe_loglikelihood(args.base_url, args.model, context, continuation)
            own.append(mine)
            diff = abs(mine - ll)
            max_diff = max(max_diff, diff)
            print(f"{s['doc_id']:>3} {continuation.strip()[:16]:<16} {n:>6} {ll:>12.5f} "
                  f"{mine:>12.5f} {diff:>10.2e}")
        target = int(s["target"]) if not isinstance(s["target"], list) else s["target"][0]
        correct_lm += int(max(range(len(lm)), key=lm.__getitem__) == target)
        correct_lathe += int(max(range(len(own)), key=own.__getitem__) == target)
    n = len(samples)
    print(f"\n{n} questions, {sum(len(pairs_of(s)) for s in samples)} choices")
    print(f"accuracy: lm-eval {correct_lm}/{n}, Lathe's own log-likelihoods {correct_lathe}/{n}")
    print(f"max |lm-eval - lathe| = {max_diff:.3e} nats (tolerance {args.tolerance:g})")
    sys.exit(0 if max_diff <= args.tolerance else 1)


if __name__ == "__main__":
    main()

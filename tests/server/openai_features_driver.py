#!/usr/bin/env python3
"""Drives a running `lathe serve` (default model, CPU) with the official `openai` SDK through the
API features beyond plain chat: n > 1, logit_bias, structured output, tool calls, echo.

    openai_features_driver.py BASE_URL API_KEY [SECTION ...]

Sections (all by default): n, logit_bias, structured, tools, echo. Prints one line per check and
exits 0 only when every check passed.
"""
import json
import sys
import time
import urllib.request

import openai

FAILURES = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ((": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILURES.append(name)


class Ctx:
    def __init__(self, base_url, api_key):
        self.base_url = base_url
        self.api_key = api_key
        self.client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0,
                                    timeout=600)
        self.model = self.client.models.list().data[0].id

    def post(self, path, body):
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + self.api_key})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def token_id(self, text):
        """The id of `text` when it is exactly one token, else None."""
        r = self.post("/tokenize", {"prompt": text, "add_special_tokens": False})
        return r["tokens"][0] if r["count"] == 1 else None


def section_n(ctx):
    # A prompt of several KV blocks, unique per run so the first choice finds nothing cached.
    prompt = ("Run %d. Here is a list of colours, animals and cities that a child might name when "
              "asked to say whatever comes to mind first, one after another:" % time.time_ns())
    r = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=16, n=4, seed=123,
                                      temperature=1.0)
    texts = [c.text for c in sorted(r.choices, key=lambda c: c.index)]
    check("n=4: four choices indexed 0..3", sorted(c.index for c in r.choices) == [0, 1, 2, 3])
    check("n=4: the samples differ", len(set(texts)) == 4, repr(texts))
    cached = r.usage.prompt_tokens_details.cached_tokens if r.usage.prompt_tokens_details else 0
    check("n=4: the choices share the prompt's KV blocks (cached prompt tokens)",
          cached >= 16 and r.usage.prompt_tokens > 32, "cached %s of %d" % (cached, r.usage.prompt_tokens))
    check("n=4: usage counts the prompt once and every choice's tokens",
          4 <= r.usage.completion_tokens <= 64 and r.usage.prompt_tokens < 64, str(r.usage))
    single = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=16, seed=125,
                                           temperature=1.0)
    check("n=4: choice 2 is the sample of seed + 2", single.choices[0].text == texts[2],
          repr(single.choices[0].text) + " vs " + repr(texts[2]))
    again = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=16, n=4, seed=123,
                                          temperature=1.0)
    check("n=4: seeded choices reproduce",
          [c.text for c in sorted(again.choices, key=lambda c: c.index)] == texts)

    stream = ctx.client.chat.completions.create(
        model=ctx.model, messages=[{"role": "user", "content": "Name a fruit."}], max_tokens=8, n=3,
        seed=5, temperature=1.0, stream=True)
    parts, finishes = {}, {}
    for chunk in stream:
        for c in chunk.choices:
            parts[c.index] = parts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    check("n=3 stream: every index streams and finishes", sorted(finishes) == [0, 1, 2], str(finishes))
    plain = ctx.client.chat.completions.create(
        model=ctx.model, messages=[{"role": "user", "content": "Name a fruit."}], max_tokens=8, n=3,
        seed=5, temperature=1.0)
    check("n=3 stream: same texts as non-streaming",
          [parts.get(i) for i in range(3)] == [c.message.content for c in plain.choices],
          repr(parts) + " vs " + repr([c.message.content for c in plain.choices]))

    for bad in (0, 17):
        try:
            ctx.client.completions.create(model=ctx.model, prompt="x", max_tokens=2, n=bad)
            check("n=%d is refused" % bad, False, "no error")
        except openai.BadRequestError as e:
            check("n=%d is refused" % bad, e.status_code == 400 and "n must be" in str(e.body))
    try:
        ctx.client.completions.create(model=ctx.model, prompt="x", max_tokens=2, n=1, best_of=3)
        check("best_of > n is refused", False, "no error")
    except openai.BadRequestError as e:
        check("best_of > n is refused", "best_of" in str(e.body), str(e.body))


def section_logit_bias(ctx):
    prompt = "The capital of France is"
    base = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=6, temperature=0,
                                         logprobs=0)
    tokens = base.choices[0].logprobs.tokens
    first = ctx.token_id(tokens[0])
    check("logit_bias: the greedy first token is one token", first is not None, repr(tokens[0]))
    if first is None:
        return
    banned = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=6,
                                           temperature=0, logprobs=0, logit_bias={str(first): -100})
    btokens = banned.choices[0].logprobs.tokens
    check("logit_bias -100 bans the token", tokens[0] not in btokens, repr(tokens) + " -> " + repr(btokens))
    sampled = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=12, n=4, seed=9,
                                            temperature=1.5, logprobs=0, logit_bias={str(first): -100})
    check("logit_bias -100 bans the token when sampling too",
          all(tokens[0] not in c.logprobs.tokens for c in sampled.choices))
    forced_id = ctx.token_id(" banana")
    forced = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=4, temperature=0,
                                           logit_bias={str(forced_id): 100})
    check("logit_bias +100 forces the token", forced.choices[0].text == " banana" * 4,
          repr(forced.choices[0].text))
    try:
        ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=2,
                                      logit_bias={"999999": 5})
        check("logit_bias outside the vocabulary is refused", False, "no error")
    except openai.BadRequestError as e:
        check("logit_bias outside the vocabulary is refused", "vocabulary" in str(e.body), str(e.body))


SECTIONS = {"n": section_n, "logit_bias": section_logit_bias}


def main():
    ctx = Ctx(sys.argv[1], sys.argv[2])
    for name in sys.argv[3:] or list(SECTIONS):
        print("--- " + name, flush=True)
        SECTIONS[name](ctx)
    print("%d checks failed" % len(FAILURES) if FAILURES else "all checks passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Drives a running `lathe serve` (default model, CPU) with the official `openai` SDK through the
API features beyond plain chat: n > 1, logit_bias, structured output, tool calls, echo.

    openai_features_driver.py BASE_URL API_KEY [SECTION ...]

Sections (all by default): n, logit_bias, structured, tools, echo. Prints one line per check and
exits 0 only when every check passed.
"""
import json
import os
import re
import sys
import time
import urllib.request

import openai

FAILURES = []
# Request timeouts scale like the C++ tests' limits (LATHE_TEST_TIME_SCALE, tests/test_support.h).
TIME_SCALE = max(1.0, float(os.environ.get("LATHE_TEST_TIME_SCALE") or 1))


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ((": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILURES.append(name)


class Ctx:
    def __init__(self, base_url, api_key):
        self.base_url = base_url
        self.api_key = api_key
        self.client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0,
                                    timeout=600 * TIME_SCALE)
        self.model = self.client.models.list().data[0].id

    def post(self, path, body):
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + self.api_key})
        with urllib.request.urlopen(req, timeout=600 * TIME_SCALE) as r:
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


def short_str(n=24):
    return {"type": "string", "maxLength": n}


# 20 schemas of varying shape: nested objects, arrays, enums, numbers with bounds, required and
# optional properties. Strings and arrays are bounded so that a small model finishes in time.
SCHEMAS = [
    ("person", {"type": "object", "properties": {"name": short_str(), "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                "required": ["name", "age"]}),
    ("city", {"type": "object", "properties": {"city": short_str(), "country": short_str(), "population": {"type": "integer", "minimum": 0}},
              "required": ["city", "country"]}),
    ("colour enum", {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"]}),
    ("bounded number", {"type": "object", "properties": {"temperature": {"type": "number", "minimum": -50, "maximum": 60}},
                        "required": ["temperature"]}),
    ("boolean", {"type": "object", "properties": {"is_capital": {"type": "boolean"}}, "required": ["is_capital"]}),
    ("list of strings", {"type": "object", "properties": {"fruits": {"type": "array", "items": short_str(16), "minItems": 2, "maxItems": 4}},
                         "required": ["fruits"]}),
    ("nested", {"type": "object", "properties": {
        "book": {"type": "object", "properties": {"title": short_str(), "author": {"type": "object", "properties": {"name": short_str(), "born": {"type": "integer", "minimum": 1000, "maximum": 2025}}, "required": ["name"]}},
                 "required": ["title", "author"]}}, "required": ["book"]}),
    ("array of objects", {"type": "object", "properties": {"items": {"type": "array", "maxItems": 3, "minItems": 1, "items": {
        "type": "object", "properties": {"sku": short_str(8), "qty": {"type": "integer", "minimum": 1, "maximum": 99}}, "required": ["sku", "qty"]}}},
        "required": ["items"]}),
    ("optional fields", {"type": "object", "properties": {"title": short_str(), "subtitle": short_str(), "pages": {"type": "integer", "minimum": 1, "maximum": 2000}},
                         "required": ["title"]}),
    ("top-level array", {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 3, "maxItems": 3}),
    ("enum of numbers", {"type": "object", "properties": {"stars": {"enum": [1, 2, 3, 4, 5]}}, "required": ["stars"]}),
    ("nullable", {"type": "object", "properties": {"middle_name": {"anyOf": [short_str(), {"type": "null"}]}}, "required": ["middle_name"]}),
    ("date format", {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}, "required": ["date"]}),
    ("pattern", {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}}, "required": ["code"]}),
    ("tuple", {"type": "array", "prefixItems": [short_str(), {"type": "integer", "minimum": 0, "maximum": 100}], "items": False}),
    ("defs and ref", {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -10, "maximum": 10}, "y": {"type": "integer", "minimum": -10, "maximum": 10}}, "required": ["x", "y"]}},
                      "type": "object", "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}}, "required": ["start", "end"]}),
    ("string lengths", {"type": "object", "properties": {"word": {"type": "string", "minLength": 3, "maxLength": 8}}, "required": ["word"]}),
    ("exclusive bounds", {"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}}, "required": ["n"]}),
    ("map", {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100}, "maxProperties": None} if False else
            {"type": "object", "properties": {"scores": {"type": "object", "properties": {"math": {"type": "integer", "minimum": 0, "maximum": 100}, "art": {"type": "integer", "minimum": 0, "maximum": 100}}}}, "required": ["scores"]}),
    ("status record", {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 99999}, "status": {"enum": ["open", "closed", "pending"]},
                       "tags": {"type": "array", "items": {"enum": ["bug", "ui", "docs"]}, "maxItems": 3}}, "required": ["id", "status", "tags"]}),
]


def validate(schema, value):
    import jsonschema
    jsonschema.validate(value, schema)


def section_structured(ctx):
    check("20 schemas", len(SCHEMAS) == 20, str(len(SCHEMAS)))
    for i, (name, schema) in enumerate(SCHEMAS):
        messages = [{"role": "system", "content": "Reply with JSON only."},
                    {"role": "user", "content": "Give an example of a %s as JSON." % name}]
        kwargs = dict(model=ctx.model, messages=messages, max_tokens=160, temperature=0.7, seed=i,
                      response_format={"type": "json_schema", "json_schema": {"name": "s%d" % i, "schema": schema}})
        stream = i % 2 == 1
        if stream:
            text, finish = "", None
            for chunk in ctx.client.chat.completions.create(stream=True, **kwargs):
                for c in chunk.choices:
                    text += c.delta.content or ""
                    finish = c.finish_reason or finish
        else:
            r = ctx.client.chat.completions.create(**kwargs)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        ok, why = False, ""
        try:
            value = json.loads(text)
            validate(schema, value)
            ok = finish == "stop"
            why = "finish_reason " + str(finish)
        except Exception as e:  # noqa: BLE001 - report any failure
            why = "%s: %s" % (type(e).__name__, e)
        check("schema %-16s%s valid JSON" % (name, " (stream)" if stream else ""), ok, why + " " + repr(text)[:160])

    r = ctx.client.chat.completions.create(
        model=ctx.model, messages=[{"role": "system", "content": "Reply with JSON only."},
                                   {"role": "user", "content": "Give a cat's name and age as JSON."}],
        max_tokens=120, temperature=0, response_format={"type": "json_object"})
    text = r.choices[0].message.content
    try:
        ok = isinstance(json.loads(text), dict) and r.choices[0].finish_reason == "stop"
    except ValueError:
        ok = False
    check("json_object: a JSON object", ok, repr(text)[:160])
    cut = ctx.client.chat.completions.create(
        model=ctx.model, messages=[{"role": "user", "content": "List many fruits in JSON."}], max_tokens=5,
        temperature=0, response_format={"type": "json_schema", "json_schema": {"name": "f", "schema": SCHEMAS[5][1]}})
    check("cut short: finish_reason length", cut.choices[0].finish_reason == "length", repr(cut.choices[0].message.content))

    # vLLM's extras, through extra_body.
    r = ctx.client.completions.create(model=ctx.model, prompt="Is Paris in France? Answer:", max_tokens=5, temperature=0,
                                      extra_body={"guided_choice": ["yes", "no"]})
    check("guided_choice picks a choice", r.choices[0].text in ("yes", "no"), repr(r.choices[0].text))
    r = ctx.client.completions.create(model=ctx.model, prompt="A phone number:", max_tokens=20, temperature=0.9, seed=1,
                                      extra_body={"guided_regex": "\\(\\d{3}\\) \\d{3}-\\d{4}"})
    check("guided_regex matches", re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", r.choices[0].text) is not None, repr(r.choices[0].text))
    r = ctx.client.completions.create(model=ctx.model, prompt="A person as JSON:", max_tokens=60, temperature=0.9, seed=2, n=3,
                                      extra_body={"guided_json": SCHEMAS[0][1]})
    good = 0
    for c in r.choices:
        try:
            validate(SCHEMAS[0][1], json.loads(c.text))
            good += 1
        except Exception:  # noqa: BLE001
            pass
    check("guided_json with n=3: every choice validates", good == 3, repr([c.text for c in r.choices]))

    bad = [
        ("invalid schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}}, "unknown type strin"),
        ("unsupported feature", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "multipleOf": 5}}}}, "multipleOf"),
        ("pattern that cannot match", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "string", "pattern": "^\"+$"}}}}, "cannot match"),
        ("unsupported regex", {"extra_body": {"guided_regex": "(?!a)b"}}, "lookaround"),
        ("broken regex", {"extra_body": {"guided_regex": "(ab"}}, "missing ')'"),
        ("missing schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "schema"),
    ]
    for name, extra, needle in bad:
        try:
            ctx.client.chat.completions.create(model=ctx.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, **extra)
            check("bad input (%s) is a 400" % name, False, "no error")
        except openai.BadRequestError as e:
            body = str(e.body)
            check("bad input (%s) is a 400" % name, e.status_code == 400 and needle in body, body)


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                                                        "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
                       "required": ["a", "b"]}}},
]


def check_calls(name, calls, allowed):
    ok = bool(calls)
    for c in calls or []:
        tool = next((t for t in TOOLS if t["function"]["name"] == c.function.name), None)
        try:
            validate(tool["function"]["parameters"], json.loads(c.function.arguments))
        except Exception:  # noqa: BLE001
            ok = False
        ok = ok and c.function.name in allowed and c.type == "function" and len(c.id) > 0
    check(name, ok, repr([(c.function.name, c.function.arguments) for c in calls or []]))


def section_tools(ctx):
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    # One call (parallel_tool_calls false): a small model would otherwise repeat calls up to the cap.
    r = ctx.client.chat.completions.create(model=ctx.model, messages=messages, tools=TOOLS, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=80, temperature=0)
    msg = r.choices[0].message
    check("required: finish_reason tool_calls", r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason)
    check_calls("required: calls of the given tools with valid arguments", msg.tool_calls, {"get_weather", "add"})
    if not msg.tool_calls:
        return
    call = msg.tool_calls[0]
    # The round trip: the call goes back in the history with the tool's result; the model answers.
    history = messages + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "unit": "celsius", "sky": "sunny"})}]
    final = ctx.client.chat.completions.create(model=ctx.model, messages=history, tools=TOOLS, tool_choice="none",
                                               max_tokens=40, temperature=0)
    fm = final.choices[0].message
    check("round trip: a text answer after the tool result",
          isinstance(fm.content, str) and len(fm.content) > 0 and not fm.tool_calls
          and final.choices[0].finish_reason in ("stop", "length"), repr(fm.content))

    named = ctx.client.chat.completions.create(
        model=ctx.model, messages=[{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "add"}}, max_tokens=40, temperature=0)
    check_calls("named: exactly the named function", named.choices[0].message.tool_calls, {"add"})
    check("named: one call", len(named.choices[0].message.tool_calls or []) == 1)

    calls, finish, content = {}, None, ""
    for chunk in ctx.client.chat.completions.create(model=ctx.model, messages=messages, tools=TOOLS, tool_choice="required",
                                                    parallel_tool_calls=False, max_tokens=80, temperature=0, stream=True):
        for c in chunk.choices:
            content += c.delta.content or ""
            for tc in c.delta.tool_calls or []:
                e = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                e["id"] += tc.id or ""
                e["name"] += (tc.function.name or "") if tc.function else ""
                e["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = c.finish_reason or finish
    streamed = [(e["name"], json.loads(e["arguments"])) for _, e in sorted(calls.items())]
    check("stream: the same calls as non-streaming, finish_reason tool_calls",
          finish == "tool_calls" and streamed == [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls],
          repr(streamed))

    auto = ctx.client.chat.completions.create(model=ctx.model, messages=messages, tools=TOOLS, max_tokens=60, temperature=0)
    am = auto.choices[0].message
    check("auto: either text or well-formed calls",
          (am.tool_calls and auto.choices[0].finish_reason == "tool_calls") or (am.content and not am.tool_calls),
          repr(am.content) + " " + repr(am.tool_calls))

    bad = [
        ("malformed tool", {"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools", "name"),
        ("tool_choice naming an unknown function",
         {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "launch_rocket"}}}, "tool_choice", "launch_rocket"),
        ("unsupported parameters schema", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer", "multipleOf": 2}}}}}], "tool_choice": "required"},
         "tools", "multipleOf"),
    ]
    for name, extra, param, needle in bad:
        try:
            ctx.client.chat.completions.create(model=ctx.model, messages=messages, max_tokens=4, **extra)
            check("bad input (%s) is a 400" % name, False, "no error")
        except openai.BadRequestError as e:
            check("bad input (%s) is a 400" % name, e.body.get("param") == param and needle in str(e.body), str(e.body))


def section_echo(ctx):
    prompt = "The quick brown fox jumps over the lazy"
    # The engine's own logprobs for three greedy tokens...
    gen = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=3, temperature=0, logprobs=2)
    glp = gen.choices[0].logprobs
    ids = ctx.post("/tokenize", {"prompt": prompt})["tokens"]
    gen_ids = [ctx.token_id(t) for t in glp.tokens]  # each generated token, by its text
    cont = ids + gen_ids
    # ...equal the prompt logprobs of the same text as a prompt (echo), token for token.
    r = ctx.client.completions.create(model=ctx.model, prompt=cont, max_tokens=1, temperature=0, logprobs=2, echo=True)
    lp = r.choices[0].logprobs
    check("echo: the text starts with the prompt", r.choices[0].text.startswith(prompt + gen.choices[0].text),
          repr(r.choices[0].text))
    check("echo: one entry per prompt token and the completion's", len(lp.tokens) == len(cont) + 1,
          "%d vs %d" % (len(lp.tokens), len(cont) + 1))
    check("echo: the first prompt token has no logprob", lp.token_logprobs[0] is None and lp.top_logprobs[0] is None)
    same = None not in gen_ids
    if same:
        diffs = [abs(a - b) for a, b in zip(lp.token_logprobs[len(ids):len(ids) + 3], glp.token_logprobs)]
        check("echo: prompt logprobs equal the engine's logprobs of the same tokens", max(diffs) < 1e-4, str(diffs))
        check("echo: and their top alternatives", [set(t) for t in lp.top_logprobs[len(ids):len(ids) + 3]] ==
              [set(t) for t in glp.top_logprobs], str(lp.top_logprobs[len(ids):]) + " vs " + str(glp.top_logprobs))
    else:
        check("echo: each generated token is one token by its text", False, repr(glp.tokens))
    check("echo: logprobs are <= 0", all(v <= 0 for v in lp.token_logprobs[1:]))
    # What lm-eval's local-completions sends for a log-likelihood request.
    ll = ctx.client.completions.create(model=ctx.model, prompt=prompt + " dog", max_tokens=1, temperature=0, logprobs=1,
                                       echo=True, seed=1234)
    check("echo: lm-eval's request shape", ll.choices[0].logprobs.tokens[-2] == " dog", repr(ll.choices[0].logprobs.tokens[-3:]))
    parts, plps = "", []
    for chunk in ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=3, temperature=0, logprobs=0,
                                               echo=True, stream=True):
        for c in chunk.choices:
            parts += c.text
            if c.logprobs:
                plps += c.logprobs.token_logprobs
    check("echo stream: prompt then completion", parts == prompt + gen.choices[0].text, repr(parts))
    check("echo stream: logprobs for the prompt and the completion", len(plps) == len(ids) + 3, str(len(plps)))
    plain = ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=2, temperature=0, echo=True)
    check("echo without logprobs", plain.choices[0].text.startswith(prompt) and plain.choices[0].logprobs is None)
    try:
        ctx.client.completions.create(model=ctx.model, prompt=prompt, max_tokens=2, n=1, best_of=2)
        check("best_of is refused", False, "no error")
    except openai.BadRequestError as e:
        check("best_of is refused", "best_of" in str(e.body))


SECTIONS = {"n": section_n, "logit_bias": section_logit_bias, "structured": section_structured,
            "tools": section_tools, "echo": section_echo}


def main():
    ctx = Ctx(sys.argv[1], sys.argv[2])
    for name in sys.argv[3:] or list(SECTIONS):
        print("--- " + name, flush=True)
        SECTIONS[name](ctx)
    print("%d checks failed" % len(FAILURES) if FAILURES else "all checks passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

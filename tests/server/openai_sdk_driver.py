#!/usr/bin/env python3
"""Drives a running `lathe serve` with the official `openai` Python SDK and checks what a user would.

    openai_sdk_driver.py BASE_URL API_KEY

Checks: the model list; chat completions non-streaming and streaming (greedy, so both give the same
text, and the streamed usage chunk agrees); completions non-streaming and streaming; a wrong API key
raises openai.AuthenticationError; n=17 raises openai.BadRequestError; an unknown model raises
openai.NotFoundError. Prints one line per check and exits 0 only when every check passed.
"""
import os
import sys

import openai

FAILURES = []
# Request timeouts scale like the C++ tests' limits (LATHE_TEST_TIME_SCALE, tests/test_support.h).
TIME_SCALE = max(1.0, float(os.environ.get("LATHE_TEST_TIME_SCALE") or 1))


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ((": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILURES.append(name)


def main():
    base_url, api_key = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0,
                           timeout=300 * TIME_SCALE)

    models = client.models.list()
    ids = [m.id for m in models.data]
    check("models.list returns the served model", len(ids) == 1, str(ids))
    model = ids[0]
    check("models.retrieve finds it", client.models.retrieve(model).id == model)

    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is the capital of France?"}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    text = chat.choices[0].message.content
    check("chat: a reply with text", isinstance(text, str) and len(text) > 0, repr(text))
    check("chat: role assistant", chat.choices[0].message.role == "assistant")
    check("chat: finish_reason", chat.choices[0].finish_reason in ("stop", "length"), chat.choices[0].finish_reason)
    check("chat: usage", chat.usage is not None and 0 < chat.usage.completion_tokens <= 12
          and chat.usage.prompt_tokens > 0
          and chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens, str(chat.usage))
    check("chat: id and object", chat.id.startswith("chatcmpl-") and chat.object == "chat.completion")

    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    streamed = "".join(pieces)
    check("chat stream: same text as non-streaming (greedy)", streamed == text, repr(streamed) + " vs " + repr(text))
    check("chat stream: finish_reason", finish == chat.choices[0].finish_reason, str(finish))
    check("chat stream: usage chunk", usage is not None and usage.completion_tokens == chat.usage.completion_tokens,
          str(usage))

    comp = client.completions.create(model=model, prompt="The quick brown fox", max_tokens=8, temperature=0)
    ctext = comp.choices[0].text
    check("completions: text", isinstance(ctext, str) and len(ctext) > 0, repr(ctext))
    check("completions: usage", comp.usage is not None and 0 < comp.usage.completion_tokens <= 8, str(comp.usage))
    check("completions: object", comp.object == "text_completion")
    cpieces = []
    for chunk in client.completions.create(model=model, prompt="The quick brown fox", max_tokens=8,
                                           temperature=0, stream=True):
        for c in chunk.choices:
            cpieces.append(c.text)
    check("completions stream: same text as non-streaming", "".join(cpieces) == ctext, repr("".join(cpieces)))

    lp = client.chat.completions.create(model=model, messages=messages, max_tokens=3, temperature=0,
                                        logprobs=True, top_logprobs=2)
    content = lp.choices[0].logprobs.content if lp.choices[0].logprobs else None
    check("chat logprobs: one entry per token with 2 alternatives",
          content is not None and len(content) == lp.usage.completion_tokens
          and all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in content))

    try:
        wrong = openai.OpenAI(base_url=base_url + "/v1", api_key="wrong-" + api_key, max_retries=0)
        wrong.chat.completions.create(model=model, messages=messages, max_tokens=2)
        check("wrong API key raises AuthenticationError", False, "no error")
    except openai.AuthenticationError as e:
        check("wrong API key raises AuthenticationError", e.status_code == 401)

    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=2, n=17)
        check("n=17 raises BadRequestError", False, "no error")
    except openai.BadRequestError as e:
        check("n=17 raises BadRequestError", e.status_code == 400 and "n" in str(e.body), str(e.body))

    try:
        client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=2)
        check("unknown model raises NotFoundError", False, "no error")
    except openai.NotFoundError as e:
        check("unknown model raises NotFoundError", e.status_code == 404)

    print("%d checks failed" % len(FAILURES) if FAILURES else "all checks passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

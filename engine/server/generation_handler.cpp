#include "engine/server/generation_handler.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

#include "engine/core/strings.h"
#include "engine/server/guided_decoding.h"
#include "engine/server/openai_response.h"
#include "engine/server/request_stream.h"
#include "engine/server/tool_reply.h"

namespace lathe {
namespace {

// The 500 an engine failure during generation becomes (streamed as an error event, or returned).
ApiError engine_failure(const RequestStream::Final& fin) {
  ApiError err;
  err.status = 500;
  err.type = "server_error";
  err.message = fin.error.empty() ? "the engine failed while generating" : fin.error;
  return err;
}

using namespace std::chrono_literals;

// How long a connection thread waits for output before checking on its client again.
constexpr auto kPollInterval = 50ms;
// After aborting, how long to wait for the engine's final event (it comes at the next step).
constexpr auto kAbortWait = 30s;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

const char* endpoint_path(ApiEndpoint e) {
  return e == ApiEndpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions";
}

const char* prompt_param(const OpenAiRequest& r) {
  return r.endpoint == ApiEndpoint::kChatCompletions ? "messages" : "prompt";
}

// Tokenizes the prompt (text, ids or chat) so lengths can be checked before submitting; the
// engine then gets the ids. Fills spec.prompt_tokens and clears the other prompt forms.
MaybeApiError tokenize_prompt(ServerContext& ctx, OpenAiRequest& r) {
  const int64_t vocab = ctx.engine.model().config.vocab_size;
  RequestSpec& spec = r.spec;
  if (!spec.prompt_tokens.empty()) {
    for (size_t i = 0; i < spec.prompt_tokens.size(); ++i) {
      if (spec.prompt_tokens[i] >= vocab)
        return bad_request(strformat("prompt[%zu]: token id %d is outside the vocabulary [0, %lld)",
                                     i, spec.prompt_tokens[i], static_cast<long long>(vocab)),
                           "prompt");
    }
    if (r.echo && ctx.tokenizer != nullptr) r.echo_text = ctx.tokenizer->decode(spec.prompt_tokens);
    return {};
  }
  if (ctx.tokenizer == nullptr)
    return bad_request(
        "this model has no tokenizer (it was loaded with --load-format dummy): send the prompt "
        "as a list of token ids to /v1/completions",
        prompt_param(r));
  if (r.echo) r.echo_text = spec.prompt;
  std::vector<TokenId> ids;
  if (r.endpoint == ApiEndpoint::kCompletions && !r.add_special_tokens) {
    EncodeOptions options;
    options.add_special_tokens = false;
    ids = ctx.tokenizer->encode(spec.prompt, options);
  } else {
    Result<std::vector<TokenId>> tokens = ctx.engine.tokenize(spec);
    if (!tokens.is_ok()) return error_from_status(tokens.status(), prompt_param(r));
    ids = std::move(tokens).value();
  }
  if (ids.empty())
    return bad_request("the prompt is empty: it tokenizes to no tokens", prompt_param(r));
  spec.prompt_tokens = std::move(ids);
  spec.prompt.clear();
  spec.messages.clear();
  return {};
}

// max_tokens against max-model-len, with vLLM's wording.
MaybeApiError fit_context(const ServerContext& ctx, OpenAiRequest& r) {
  const int64_t max_len = ctx.max_model_len;
  const int64_t prompt = static_cast<int64_t>(r.spec.prompt_tokens.size());
  const char* where = prompt_param(r);
  if (max_len > 0 && prompt >= max_len)
    return bad_request(
        strformat("This model's maximum context length is %lld tokens. However, your request has "
                  "%lld input tokens, which leaves no room for output. Please reduce the length "
                  "of the %s.",
                  static_cast<long long>(max_len), static_cast<long long>(prompt), where),
        where);
  int32_t& max_tokens = r.spec.sampling.max_tokens;
  if (r.max_tokens_given) {
    if (max_len > 0 && prompt + max_tokens > max_len)
      return bad_request(
          strformat("This model's maximum context length is %lld tokens. However, you requested "
                    "%lld tokens (%lld in the %s, %d in the completion). Please reduce the length "
                    "of the %s or completion.",
                    static_cast<long long>(max_len), static_cast<long long>(prompt + max_tokens),
                    static_cast<long long>(prompt), where, max_tokens, where),
          r.endpoint == ApiEndpoint::kChatCompletions ? "max_completion_tokens" : "max_tokens");
  } else if (max_len > 0) {
    const int64_t room = max_len - prompt;
    max_tokens = r.endpoint == ApiEndpoint::kChatCompletions
                     ? static_cast<int32_t>(room)
                     : static_cast<int32_t>(std::min<int64_t>(max_tokens, room));
  }
  if (r.spec.sampling.min_tokens > max_tokens) r.spec.sampling.min_tokens = max_tokens;
  const int64_t vocab = ctx.engine.model().config.vocab_size;
  for (const TokenBias& b : r.spec.sampling.logit_bias) {
    if (b.token >= vocab)
      return bad_request(strformat("logit_bias: token %d is outside the vocabulary [0, %lld)",
                                   b.token, static_cast<long long>(vocab)),
                         "logit_bias");
  }
  for (const TokenId id : r.spec.sampling.stop_token_ids) {
    if (id >= vocab)
      return bad_request(strformat("stop_token_ids: %d is outside the vocabulary [0, %lld)", id,
                                   static_cast<long long>(vocab)),
                         "stop_token_ids");
  }
  return {};
}

// The n choices of one request together: prompt tokens counted once (as OpenAI bills them),
// completion tokens summed, cached tokens the most any choice had from the prefix cache.
RequestUsage combined_usage(const RequestStream& stream) {
  RequestUsage u;
  for (int32_t i = 0; i < stream.num_choices(); ++i) {
    const RequestUsage c = stream.final(i).usage;
    u.prompt_tokens = std::max(u.prompt_tokens, c.prompt_tokens);
    u.completion_tokens += c.completion_tokens;
    u.cached_prompt_tokens = std::max(u.cached_prompt_tokens, c.cached_prompt_tokens);
  }
  return u;
}

// One submitted request (n engine requests, one per choice) and what its connection thread needs
// to answer it. finish() does the bookkeeping exactly once: the log entry, the active set; if the
// response was dropped before completing (client gone, server stopping), it aborts the engine
// requests.
class GenerationJob {
 public:
  GenerationJob(ServerContext& ctx, OpenAiRequest request, ResponseHeader header,
                Clock::time_point received)
      : ctx_(ctx),
        request_(std::move(request)),
        header_(std::move(header)),
        received_(received),
        stream_(std::make_shared<RequestStream>(request_.n)),
        tool_syntax_(tool_syntax_of(ctx.engine.model().chat_template)) {}
  ~GenerationJob() { finish(/*client_gone=*/true); }

  // Submits the n choices together (all or none). A seeded request's choice i gets seed + i, so
  // the samples differ and each is reproducible; unseeded ones get a random seed each. Choices
  // after the first find the prompt's full blocks in the prefix cache (published when the first
  // is scheduled, even in the same step).
  Status submit() {
    std::vector<RequestSpec> specs;
    std::vector<StreamCallback> callbacks;
    for (int32_t i = 0; i < request_.n; ++i) {
      specs.push_back(request_.spec);
      if (request_.spec.sampling.seed)
        specs.back().sampling.seed = *request_.spec.sampling.seed + static_cast<uint64_t>(i);
      std::shared_ptr<RequestStream> stream = stream_;
      callbacks.push_back([stream, i](const StreamEvent& e) { stream->on_event(i, e); });
    }
    if (request_.n == 1) {
      Result<RequestId> id = ctx_.engine.submit(specs[0], std::move(callbacks[0]));
      if (!id.is_ok()) return id.status();
      engine_ids_ = {id.value()};
    } else {
      Result<std::vector<RequestId>> ids = ctx_.engine.submit_batch(specs, std::move(callbacks));
      if (!ids.is_ok()) return ids.status();
      engine_ids_ = std::move(ids).value();
    }
    submitted_ = true;
    for (RequestId id : engine_ids_) ctx_.add_active(id);
    return Status();
  }

  // Ends the job: aborts when the client went away before the end, waits for the engine's final
  // events, logs, and leaves the active set.
  void finish(bool client_gone) {
    if (!submitted_ || finished_) return;
    finished_ = true;
    bool disconnected = false;
    if (!stream_->wait_finished(0ms)) {
      if (client_gone) {
        disconnected = true;
        ctx_.client_disconnects.fetch_add(1);
      }
      for (RequestId id : engine_ids_) ctx_.engine.abort(id);
      stream_->wait_finished(kAbortWait);
    }
    const RequestStream::Final f = stream_->final(0);
    const RequestUsage usage = combined_usage(*stream_);
    RequestLogEntry e;
    e.time = std::chrono::system_clock::now();
    e.id = header_.id;
    e.endpoint = endpoint_path(request_.endpoint);
    e.stream = request_.stream;
    e.prompt_tokens = usage.prompt_tokens > 0
                          ? usage.prompt_tokens
                          : static_cast<int32_t>(request_.spec.prompt_tokens.size());
    e.completion_tokens = usage.completion_tokens;
    e.cached_prompt_tokens = usage.cached_prompt_tokens;
    if (f.first_token != Clock::time_point{} && f.arrival != Clock::time_point{})
      e.ttft_ms = ms_between(f.arrival, f.first_token);
    if (f.usage.completion_tokens >= 2 && f.first_token != Clock::time_point{} &&
        f.finished_at > f.first_token)
      e.tokens_per_s =
          (f.usage.completion_tokens - 1) / (ms_between(f.first_token, f.finished_at) / 1000.0);
    e.e2e_ms = ms_between(received_, Clock::now());
    const char* reason = finish_reason_json(f.reason);
    e.finish_reason = reason != nullptr ? reason : "abort";
    for (int32_t i = 0; i < stream_->num_choices() && e.error.empty(); ++i)
      e.error = stream_->final(i).error;
    e.client_disconnected = disconnected;
    ctx_.request_log.record(e);
    for (RequestId id : engine_ids_) ctx_.remove_active(id);
  }

  // Streams the answer as server-sent events until the end or until the client goes away. Chunks
  // of the n choices interleave as their tokens come, each with its index.
  void stream(ResponseStream& out) {
    std::vector<LogprobsBuilder> logprobs(
        static_cast<size_t>(request_.n),
        LogprobsBuilder(request_.endpoint, ctx_.tokenizer, request_.top_logprobs));
    std::vector<char> first(static_cast<size_t>(request_.n), 1);
    std::vector<ToolReply> replies;
    if (request_.uses_tools())
      replies.assign(static_cast<size_t>(request_.n), ToolReply(request_, tool_syntax_));
    for (;;) {
      std::vector<RequestStream::Piece> pieces;
      const bool done = stream_->take(kPollInterval, &pieces);
      std::string buf;
      for (const RequestStream::Piece& piece : pieces) {
        const size_t i = static_cast<size_t>(piece.index);
        if (request_.echo && first[i] != 0) {
          // The prompt first, in a chunk of its own (with its logprobs when asked).
          const bool echo_lp = request_.logprobs && !piece.prompt_logprobs.empty();
          const nlohmann::json plp =
              echo_lp ? logprobs[i].append(piece.prompt_logprobs) : nlohmann::json();
          buf += stream_chunk_event(header_, piece.index, request_.echo_text, true,
                                    echo_lp ? &plp : nullptr, nullptr, request_.spec.sampling.stop,
                                    request_.include_usage);
          first[i] = 0;
        }
        RequestStream::Final fin;
        ResponseFinish rf;
        if (piece.last) {
          fin = stream_->final(piece.index);
          rf = ResponseFinish{fin.reason, false, fin.stop_reason, fin.usage};
        }
        // The finish reason rides on the last token's chunk, as vLLM sends it (no extra chunk
        // that a client would count as one more token).
        const bool last = piece.last && fin.reason != FinishReason::kError;
        const bool has_lp = request_.logprobs && !piece.logprobs.empty();
        const nlohmann::json lp = has_lp ? logprobs[i].append(piece.logprobs) : nlohmann::json();
        // A token whose bytes are held back (an incomplete character, a possible stop string)
        // still gets its chunk, as vLLM sends it: clients time tokens by chunks, and models
        // without a tokenizer produce no text at all.
        std::string text = piece.text;
        std::vector<ToolCall> calls;
        if (!replies.empty()) {
          text = replies[i].feed(piece.text);
          if (last) {
            ParsedReply pr = replies[i].finish();
            text += pr.content;
            calls = std::move(pr.calls);
          }
        }
        const auto& stop = request_.spec.sampling.stop;
        if (!calls.empty()) {
          // Content (if any), the calls whole, then the finish reason.
          buf += stream_chunk_event(header_, piece.index, text, first[i] != 0,
                                    has_lp ? &lp : nullptr, nullptr, stop, request_.include_usage);
          buf += tool_calls_chunk_event(header_, piece.index, calls, false, request_.include_usage);
          rf.tool_calls = true;
          buf += stream_chunk_event(header_, piece.index, "", false, nullptr, &rf, stop,
                                    request_.include_usage);
        } else if (!text.empty() || !piece.token_ids.empty() || has_lp || last) {
          buf +=
              stream_chunk_event(header_, piece.index, text, first[i] != 0, has_lp ? &lp : nullptr,
                                 last ? &rf : nullptr, stop, request_.include_usage);
        }
        first[i] = 0;
        if (piece.last && fin.reason == FinishReason::kError)
          buf += error_event(error_json(engine_failure(fin)));
      }
      if (done) {
        if (request_.include_usage) buf += usage_chunk_event(header_, combined_usage(*stream_));
        buf += done_event();
      }
      if (!buf.empty() && !out.write(buf)) return finish(/*client_gone=*/true);
      if (done) return finish(/*client_gone=*/false);
      if (!out.client_alive()) return finish(/*client_gone=*/true);
    }
  }

  // Waits for the whole answer; gives up (aborting) if the client disconnects meanwhile.
  HttpResponse wait_and_respond(const HttpRequest& http) {
    const size_t n = static_cast<size_t>(request_.n);
    std::vector<std::string> texts(n);
    std::vector<std::vector<SampledToken>> lps(n);
    for (;;) {
      std::vector<RequestStream::Piece> pieces;
      const bool done = stream_->take(kPollInterval * 2, &pieces);
      for (RequestStream::Piece& p : pieces) {
        const size_t i = static_cast<size_t>(p.index);
        texts[i] += p.text;
        // The prompt's entries come with the first token, before its own.
        lps[i].insert(lps[i].end(), p.prompt_logprobs.begin(), p.prompt_logprobs.end());
        lps[i].insert(lps[i].end(), p.logprobs.begin(), p.logprobs.end());
      }
      if (done) break;
      if (http.client_alive && !http.client_alive()) {
        finish(/*client_gone=*/true);
        return error_response(
            ApiError{499, "the client closed the connection", "invalid_request_error"});
      }
    }
    finish(/*client_gone=*/false);
    std::vector<nlohmann::json> lp_json(n);
    std::vector<ResponseChoice> choices(n);
    for (size_t i = 0; i < n; ++i) {
      const RequestStream::Final fin = stream_->final(static_cast<int32_t>(i));
      if (fin.reason == FinishReason::kError) return error_response(engine_failure(fin));
      ResponseChoice& c = choices[i];
      c.index = static_cast<int32_t>(i);
      c.text = request_.echo ? request_.echo_text + texts[i] : std::move(texts[i]);
      c.finish = ResponseFinish{fin.reason, false, fin.stop_reason, fin.usage};
      if (request_.uses_tools()) {
        ToolReply reply(request_, tool_syntax_);
        std::string content = reply.feed(c.text);
        ParsedReply pr = reply.finish();
        c.text = content + pr.content;
        c.tool_calls = std::move(pr.calls);
        c.finish.tool_calls = !c.tool_calls.empty();
      }
      if (request_.logprobs) {
        LogprobsBuilder builder(request_.endpoint, ctx_.tokenizer, request_.top_logprobs);
        lp_json[i] = builder.append(lps[i]);
        c.logprobs = &lp_json[i];
      }
    }
    HttpResponse r;
    r.body = completion_response(header_, choices, combined_usage(*stream_),
                                 request_.spec.sampling.stop);
    return r;
  }

 private:
  ServerContext& ctx_;
  const OpenAiRequest request_;
  const ResponseHeader header_;
  const Clock::time_point received_;
  std::shared_ptr<RequestStream> stream_;
  std::vector<RequestId> engine_ids_;
  const ToolSyntax tool_syntax_;
  bool submitted_ = false;
  bool finished_ = false;
};

HttpResponse reject(ServerContext& ctx, const std::string& id, ApiEndpoint endpoint, bool stream,
                    Clock::time_point received, const ApiError& error) {
  ctx.requests_rejected.fetch_add(1);
  RequestLogEntry e;
  e.time = std::chrono::system_clock::now();
  e.id = id;
  e.endpoint = endpoint_path(endpoint);
  e.http_status = error.status;
  e.stream = stream;
  e.e2e_ms = ms_between(received, Clock::now());
  e.error = error.message;
  ctx.request_log.record(e);
  return error_response(error);
}

}  // namespace

HttpResponse handle_generation(ServerContext& ctx, ApiEndpoint endpoint, const HttpRequest& http) {
  const Clock::time_point received = Clock::now();
  ctx.requests_total.fetch_add(1);
  const std::string id =
      ctx.new_id(endpoint == ApiEndpoint::kChatCompletions ? "chatcmpl" : "cmpl");
  try {
    if (ctx.draining.load()) {
      ApiError e = error_from_status(
          cancelled("the server is shutting down; retry against another instance"));
      return reject(ctx, id, endpoint, false, received, e);
    }
    nlohmann::json body;
    if (MaybeApiError e = parse_json_body(http.body, &body))
      return reject(ctx, id, endpoint, false, received, *e);
    OpenAiRequest request;
    if (MaybeApiError e = parse_openai_request(endpoint, body, &request))
      return reject(ctx, id, endpoint, false, received, *e);
    body = nlohmann::json();  // the prompt may be large; it now lives in request.spec
    if (request.endpoint == ApiEndpoint::kChatCompletions) {
      if (MaybeApiError e = prepare_tools(ctx, http.body, &request))
        return reject(ctx, id, endpoint, request.stream, received, *e);
    }
    if (request.guided.kind != GuidedKind::kNone) {
      Result<std::string> regex = guided_regex(request, http.body);
      if (!regex.is_ok())
        return reject(ctx, id, endpoint, request.stream, received,
                      bad_request(request.guided.param + ": " + regex.status().message(),
                                  request.guided.param));
      if (MaybeApiError e = attach_constraint(ctx, *regex, request.guided.param, &request))
        return reject(ctx, id, endpoint, request.stream, received, *e);
    }
    if (!request.model.empty() && request.model != ctx.model_name) {
      ApiError e;
      e.status = 404;
      e.message = "The model `" + request.model + "` does not exist. This server serves `" +
                  ctx.model_name + "`.";
      e.param = "model";
      e.code = "model_not_found";
      return reject(ctx, id, endpoint, request.stream, received, e);
    }
    if (MaybeApiError e = tokenize_prompt(ctx, request))
      return reject(ctx, id, endpoint, request.stream, received, *e);
    if (MaybeApiError e = fit_context(ctx, request))
      return reject(ctx, id, endpoint, request.stream, received, *e);
    request.spec.client_id = id;

    ResponseHeader header;
    header.endpoint = endpoint;
    header.id = id;
    header.model = ctx.model_name;
    header.created = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const bool stream = request.stream;
    auto job = std::make_shared<GenerationJob>(ctx, std::move(request), header, received);
    if (Status s = job->submit(); !s.is_ok())
      return reject(ctx, id, endpoint, stream, received, error_from_status(s));

    if (!stream) return job->wait_and_respond(http);
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.headers.emplace_back("X-Accel-Buffering", "no");
    // The job lives in the stream function: if the library drops the response unsent, the job's
    // destructor aborts the engine request.
    r.stream = [job](ResponseStream& out) { job->stream(out); };
    return r;
  } catch (const std::exception& e) {
    ApiError err;
    err.status = 500;
    err.type = "server_error";
    err.message = std::string("internal error while handling the request: ") + e.what();
    return reject(ctx, id, endpoint, false, received, err);
  }
}

}  // namespace lathe

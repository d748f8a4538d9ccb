#include "engine/server/generation_handler.h"

#include <nlohmann/json.hpp>

#include <memory>

#include "engine/core/strings.h"
#include "engine/server/openai_response.h"
#include "engine/server/request_stream.h"

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
    return {};
  }
  if (ctx.tokenizer == nullptr)
    return bad_request(
        "this model has no tokenizer (it was loaded with --load-format dummy): send the prompt "
        "as a list of token ids to /v1/completions",
        prompt_param(r));
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
  for (const TokenId id : r.spec.sampling.stop_token_ids) {
    if (id >= vocab)
      return bad_request(strformat("stop_token_ids: %d is outside the vocabulary [0, %lld)", id,
                                   static_cast<long long>(vocab)),
                         "stop_token_ids");
  }
  return {};
}

// One submitted request and what its connection thread needs to answer it. finish() does the
// bookkeeping exactly once: the log entry, the active set; if the response was dropped before
// completing (client gone, server stopping), it aborts the engine request.
class GenerationJob {
 public:
  GenerationJob(ServerContext& ctx, OpenAiRequest request, ResponseHeader header,
                Clock::time_point received)
      : ctx_(ctx),
        request_(std::move(request)),
        header_(std::move(header)),
        received_(received),
        stream_(std::make_shared<RequestStream>()) {}
  ~GenerationJob() { finish(/*client_gone=*/true); }

  Status submit() {
    std::shared_ptr<RequestStream> stream = stream_;
    Result<RequestId> id =
        ctx_.engine.submit(request_.spec, [stream](const StreamEvent& e) { stream->on_event(e); });
    if (!id.is_ok()) return id.status();
    engine_id_ = id.value();
    submitted_ = true;
    ctx_.add_active(engine_id_);
    return Status();
  }

  // Ends the job: aborts when the client went away before the end, waits for the engine's final
  // event, logs, and leaves the active set.
  void finish(bool client_gone) {
    if (!submitted_ || finished_) return;
    finished_ = true;
    bool disconnected = false;
    if (!stream_->wait_finished(0ms)) {
      if (client_gone) {
        disconnected = true;
        ctx_.client_disconnects.fetch_add(1);
      }
      ctx_.engine.abort(engine_id_);
      stream_->wait_finished(kAbortWait);
    }
    const RequestStream::Final f = stream_->final();
    RequestLogEntry e;
    e.time = std::chrono::system_clock::now();
    e.id = header_.id;
    e.endpoint = endpoint_path(request_.endpoint);
    e.stream = request_.stream;
    e.prompt_tokens = f.usage.prompt_tokens > 0
                          ? f.usage.prompt_tokens
                          : static_cast<int32_t>(request_.spec.prompt_tokens.size());
    e.completion_tokens = f.usage.completion_tokens;
    e.cached_prompt_tokens = f.usage.cached_prompt_tokens;
    if (f.first_token != Clock::time_point{} && f.arrival != Clock::time_point{})
      e.ttft_ms = ms_between(f.arrival, f.first_token);
    if (f.usage.completion_tokens >= 2 && f.first_token != Clock::time_point{} &&
        f.finished > f.first_token)
      e.tokens_per_s =
          (f.usage.completion_tokens - 1) / (ms_between(f.first_token, f.finished) / 1000.0);
    e.e2e_ms = ms_between(received_, Clock::now());
    const char* reason = finish_reason_json(f.reason);
    e.finish_reason = reason != nullptr ? reason : "abort";
    e.error = f.error;
    e.client_disconnected = disconnected;
    ctx_.request_log.record(e);
    ctx_.remove_active(engine_id_);
  }

  // Streams the answer as server-sent events until the end or until the client goes away.
  void stream(ResponseStream& out) {
    LogprobsBuilder logprobs(request_.endpoint, ctx_.tokenizer, request_.top_logprobs);
    bool first = true;
    for (;;) {
      std::vector<RequestStream::Piece> pieces;
      const bool done = stream_->take(kPollInterval, &pieces);
      RequestStream::Final fin;
      ResponseFinish rf;
      if (done) {
        fin = stream_->final();
        rf = ResponseFinish{fin.reason, fin.stop_reason, fin.usage};
      }
      std::string buf;
      bool finish_sent = false;
      for (size_t i = 0; i < pieces.size(); ++i) {
        // The finish reason rides on the last token's chunk, as vLLM sends it (no extra chunk
        // that a client would count as one more token).
        const bool last = done && i + 1 == pieces.size() && fin.reason != FinishReason::kError;
        const bool has_lp = request_.logprobs && !pieces[i].logprobs.empty();
        const nlohmann::json lp = has_lp ? logprobs.append(pieces[i].logprobs) : nlohmann::json();
        // A token whose bytes are held back (an incomplete character, a possible stop string)
        // still gets its chunk, as vLLM sends it: clients time tokens by chunks, and models
        // without a tokenizer produce no text at all.
        if (pieces[i].text.empty() && pieces[i].token_ids.empty() && !has_lp && !last) continue;
        buf += stream_chunk_event(header_, pieces[i].text, first, has_lp ? &lp : nullptr,
                                  last ? &rf : nullptr, request_.spec.sampling.stop,
                                  request_.include_usage);
        first = false;
        finish_sent = last;
      }
      if (done) {
        if (fin.reason == FinishReason::kError) {
          buf += error_event(error_json(engine_failure(fin)));
        } else if (!finish_sent) {
          buf += stream_chunk_event(header_, "", first, nullptr, &rf, request_.spec.sampling.stop,
                                    request_.include_usage);
        }
        if (request_.include_usage) buf += usage_chunk_event(header_, fin.usage);
        buf += done_event();
      }
      if (!buf.empty() && !out.write(buf)) return finish(/*client_gone=*/true);
      if (done) return finish(/*client_gone=*/false);
      if (!out.client_alive()) return finish(/*client_gone=*/true);
    }
  }

  // Waits for the whole answer; gives up (aborting) if the client disconnects meanwhile.
  HttpResponse wait_and_respond(const HttpRequest& http) {
    std::string text;
    std::vector<SampledToken> lps;
    for (;;) {
      std::vector<RequestStream::Piece> pieces;
      const bool done = stream_->take(kPollInterval * 2, &pieces);
      for (RequestStream::Piece& p : pieces) {
        text += p.text;
        lps.insert(lps.end(), p.logprobs.begin(), p.logprobs.end());
      }
      if (done) break;
      if (http.client_alive && !http.client_alive()) {
        finish(/*client_gone=*/true);
        return error_response(
            ApiError{499, "the client closed the connection", "invalid_request_error"});
      }
    }
    const RequestStream::Final fin = stream_->final();
    finish(/*client_gone=*/false);
    if (fin.reason == FinishReason::kError) return error_response(engine_failure(fin));
    nlohmann::json lp;
    if (request_.logprobs) {
      LogprobsBuilder builder(request_.endpoint, ctx_.tokenizer, request_.top_logprobs);
      lp = builder.append(lps);
    }
    HttpResponse r;
    r.body =
        completion_response(header_, text, ResponseFinish{fin.reason, fin.stop_reason, fin.usage},
                            request_.spec.sampling.stop, request_.logprobs ? &lp : nullptr);
    return r;
  }

 private:
  ServerContext& ctx_;
  const OpenAiRequest request_;
  const ResponseHeader header_;
  const Clock::time_point received_;
  std::shared_ptr<RequestStream> stream_;
  RequestId engine_id_ = 0;
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

#include "engine/server/routes.h"

#include <nlohmann/json.hpp>

#include <strings.h>

#include "engine/core/strings.h"
#include "engine/runtime/metrics.h"
#include "engine/server/api_error.h"
#include "engine/server/generation_handler.h"
#include "engine/server/openai_request.h"
#include "engine/server/server_security.h"

namespace lathe {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse json_response(const json& j, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

// Wraps `handler` with the API-key check (when a key is configured).
HttpHandler authenticated(const ServerContext& ctx, HttpHandler handler) {
  if (ctx.config.api_key.empty()) return handler;
  return [&ctx, handler = std::move(handler)](const HttpRequest& req) {
    const std::string auth = req.header("Authorization");
    ApiError e;
    e.status = 401;
    e.code = "invalid_api_key";
    if (auth.empty()) {
      e.message =
          "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (the key given "
          "to "
          "lathe serve with --api-key or LATHE_API_KEY).";
      return error_response(e);
    }
    const bool bearer = auth.size() > 7 && strncasecmp(auth.c_str(), "Bearer ", 7) == 0;
    const std::string key =
        bearer ? std::string(trim(std::string_view(auth).substr(7))) : std::string();
    if (!equal_constant_time(key, ctx.config.api_key)) {
      e.message =
          "Incorrect API key provided. Send the server's key as 'Authorization: Bearer <key>'.";
      return error_response(e);
    }
    return handler(req);
  };
}

// Wraps `handler` with the Host check (server_security.h: DNS rebinding).
HttpHandler host_checked(const ServerContext& ctx, HttpHandler handler) {
  return [&ctx, handler = std::move(handler)](const HttpRequest& req) {
    const std::string host = req.header("Host");
    if (host_allowed(ctx.config, host)) return handler(req);
    ApiError e;
    e.status = 403;
    e.code = "host_not_allowed";
    e.message = "Requests addressed to '" + host + "' are refused: this server listens on " +
                ctx.config.host +
                " and answers requests for localhost, 127.0.0.1 or [::1] only (a guard against "
                "DNS rebinding). To use another name, start it with --allowed-hosts NAME.";
    return error_response(e);
  };
}

// Wraps `handler` with the browser-origin policy (server_security.h): no Origin header passes;
// an allowed origin passes and gets Access-Control-Allow-Origin; any other gets 403.
HttpHandler origin_checked(const ServerContext& ctx, HttpHandler handler) {
  return [&ctx, handler = std::move(handler)](const HttpRequest& req) {
    if (!req.has_header("Origin")) return handler(req);
    const std::string origin = req.header("Origin");
    if (!origin_allowed(ctx.config.allowed_origins, origin)) {
      ApiError e;
      e.status = 403;
      e.code = "origin_not_allowed";
      e.message = "Requests from web pages are refused (Origin: " + origin +
                  "). To let this page call the server, start it with --allowed-origins " + origin +
                  ".";
      return error_response(e);
    }
    HttpResponse r = handler(req);
    r.headers.emplace_back("Access-Control-Allow-Origin", origin);
    r.headers.emplace_back("Vary", "Origin");
    return r;
  };
}

// The CORS preflight of an allowed origin (registered only with --allowed-origins).
HttpResponse preflight(const ServerContext& ctx, const HttpRequest& req) {
  const std::string origin = req.header("Origin");
  if (origin.empty() || !origin_allowed(ctx.config.allowed_origins, origin)) {
    ApiError e;
    e.status = 403;
    e.code = "origin_not_allowed";
    e.message = "Origin '" + origin + "' is not in --allowed-origins.";
    return error_response(e);
  }
  HttpResponse r;
  r.status = 204;
  r.headers = {{"Access-Control-Allow-Origin", origin},
               {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
               {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
               {"Access-Control-Max-Age", "600"},
               {"Vary", "Origin"}};
  return r;
}

// The server's own counters, appended to the engine's exposition.
std::string server_metrics_text(const ServerContext& ctx, int open_connections) {
  const std::string label = "{model_name=\"" + prometheus_escape_label(ctx.model_name) + "\"}";
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += strformat("# HELP %s %s\n# TYPE %s %s\n%s%s %.17g\n", name, help, name, type, name,
                     label.c_str(), value);
  };
  metric("lathe:http_generation_requests_total", "counter",
         "Generation requests received by the HTTP server.",
         static_cast<double>(ctx.requests_total.load()));
  metric("lathe:http_generation_requests_rejected_total", "counter",
         "Generation requests answered with an error before generating.",
         static_cast<double>(ctx.requests_rejected.load()));
  metric("lathe:http_client_disconnects_total", "counter",
         "Requests aborted because the client closed its connection.",
         static_cast<double>(ctx.client_disconnects.load()));
  metric("lathe:http_requests_in_flight", "gauge", "Generation requests being served.",
         static_cast<double>(ctx.num_active()));
  metric("lathe:http_open_connections", "gauge", "HTTP connections being served.",
         static_cast<double>(open_connections));
  return out;
}

json model_card(const ServerContext& ctx) {
  const LoadedModel& m = ctx.engine.model();
  return {{"id", ctx.model_name},
          {"object", "model"},
          {"created", ctx.created_unix},
          {"owned_by", "lathe"},
          {"root", m.path},
          {"parent", nullptr},
          {"max_model_len", ctx.max_model_len},
          {"vocab_size", m.config.vocab_size}};
}

// Reads an optional "model" and checks it names the served model.
MaybeApiError check_model(const ServerContext& ctx, const json& body) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_string()) return bad_request("model must be a string", "model");
  if (*it != ctx.model_name) {
    ApiError e;
    e.status = 404;
    e.message = "The model `" + it->get<std::string>() + "` does not exist. This server serves `" +
                ctx.model_name + "`.";
    e.param = "model";
    e.code = "model_not_found";
    return e;
  }
  return {};
}

HttpResponse handle_tokenize(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (MaybeApiError e = parse_json_body(req.body, &body)) return error_response(*e);
  if (MaybeApiError e = check_model(ctx, body)) return error_response(*e);
  if (ctx.tokenizer == nullptr)
    return error_response(
        bad_request("this model has no tokenizer (it was loaded with --load-format dummy)"));
  bool add_special = true, return_strs = false;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (k == "add_special_tokens" || k == "return_token_strs") {
      if (!it->is_boolean()) return error_response(bad_request(k + " must be true or false", k));
      (k == "add_special_tokens" ? add_special : return_strs) = it->get<bool>();
    } else if (k != "model" && k != "prompt" && k != "messages" && k != "add_generation_prompt") {
      return error_response(bad_request("Unrecognized request argument supplied: " + k, k));
    }
  }
  std::vector<TokenId> tokens;
  if (body.contains("messages")) {
    json chat = {{"messages", body["messages"]}};
    if (body.contains("add_generation_prompt"))
      chat["add_generation_prompt"] = body["add_generation_prompt"];
    OpenAiRequest parsed;
    if (MaybeApiError e = parse_openai_request(ApiEndpoint::kChatCompletions, chat, &parsed))
      return error_response(*e);
    Result<std::vector<TokenId>> r = ctx.engine.tokenize(parsed.spec);
    if (!r.is_ok()) return error_response(error_from_status(r.status(), "messages"));
    tokens = std::move(r).value();
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || !p->is_string())
      return error_response(
          bad_request("prompt (a string) or messages (a chat) is required", "prompt"));
    EncodeOptions options;
    options.add_special_tokens = add_special;
    tokens = ctx.tokenizer->encode(p->get<std::string>(), options);
  }
  json out = {{"count", tokens.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", tokens}};
  if (return_strs) {
    json strs = json::array();
    for (const TokenId t : tokens) strs.push_back(ctx.tokenizer->token_bytes(t));
    out["token_strs"] = std::move(strs);
  }
  return json_response(out);
}

HttpResponse handle_detokenize(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (MaybeApiError e = parse_json_body(req.body, &body)) return error_response(*e);
  if (MaybeApiError e = check_model(ctx, body)) return error_response(*e);
  if (ctx.tokenizer == nullptr)
    return error_response(
        bad_request("this model has no tokenizer (it was loaded with --load-format dummy)"));
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "tokens")
      return error_response(
          bad_request("Unrecognized request argument supplied: " + it.key(), it.key()));
  auto t = body.find("tokens");
  if (t == body.end() || !t->is_array())
    return error_response(bad_request("tokens (a list of token ids) is required", "tokens"));
  const int64_t vocab = ctx.tokenizer->vocab_size();
  std::vector<TokenId> ids;
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab ||
        (v.is_number_unsigned() && v.get<uint64_t>() >= static_cast<uint64_t>(vocab)))
      return error_response(bad_request(
          strformat("tokens[%zu] is not a token id in [0, %lld)", i, static_cast<long long>(vocab)),
          "tokens"));
    ids.push_back(static_cast<TokenId>(v.get<int64_t>()));
  }
  return json_response({{"prompt", ctx.tokenizer->decode(ids)}});
}

// GET /tokenizer_info (vLLM's endpoint; lm-eval's tokenizer_backend=remote reads it): the special
// tokens as text and ids (null when the model has none), whether /tokenize's add_special_tokens
// adds BOS / EOS, the vocabulary size, max-model-len and the chat template (absent when the model
// has none). Clients that read only the text (lm-eval) find the ids by sending it to /tokenize
// with add_special_tokens false: special tokens written in text encode as themselves.
HttpResponse handle_tokenizer_info(const ServerContext& ctx) {
  if (ctx.tokenizer == nullptr)
    return error_response(
        bad_request("this model has no tokenizer (it was loaded with --load-format dummy)"));
  const Tokenizer& t = *ctx.tokenizer;
  auto special = [&t](TokenId id, const char* name, json* out) {
    const bool known = id >= 0 && id < t.vocab_size();
    (*out)[std::string(name) + "_token"] = known ? json(t.token_bytes(id)) : json(nullptr);
    (*out)[std::string(name) + "_token_id"] = known ? json(id) : json(nullptr);
  };
  json out = {{"tokenizer_kind", t.kind()},
              {"vocab_size", t.vocab_size()},
              {"model_max_length", ctx.max_model_len},
              {"add_bos_token", t.add_bos()},
              {"add_eos_token", t.add_eos()}};
  special(t.bos_id(), "bos", &out);
  special(t.eos_id(), "eos", &out);
  const std::string& chat_template = ctx.engine.model().chat_template;
  if (!chat_template.empty()) out["chat_template"] = chat_template;
  return json_response(out);
}

}  // namespace

void register_routes(HttpServer& raw_http, ServerContext& ctx) {
  // Every route goes through the Host check and the origin policy; with --allowed-origins each
  // also answers the CORS preflight (OPTIONS).
  struct OriginCheckedRoutes {
    HttpServer& http;
    ServerContext& ctx;
    void set_error_responder(HttpErrorResponder r) { http.set_error_responder(std::move(r)); }
    void add_route(const std::string& method, const std::string& path, HttpHandler handler) {
      http.add_route(method, path, host_checked(ctx, origin_checked(ctx, std::move(handler))));
      if (!ctx.config.allowed_origins.empty() && method != "OPTIONS")
        http.add_route("OPTIONS", path, host_checked(ctx, [&c = ctx](const HttpRequest& req) {
                         return preflight(c, req);
                       }));
    }
  } http{raw_http, ctx};
  http.set_error_responder([](int status, const std::string& message) {
    ApiError e;
    e.status = status;
    e.message = message;
    if (status >= 500) e.type = "server_error";
    if (status == 404) e.code = "not_found";
    if (status == 413) e.code = "request_too_large";
    return error_response(e);
  });

  http.add_route("GET", "/health", [&ctx](const HttpRequest&) {
    if (ctx.draining.load()) return json_response({{"status", "stopping"}}, 503);
    return json_response({{"status", "ok"}});
  });
  http.add_route("GET", "/metrics", [&ctx, &raw_http](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = ctx.engine.metrics().prometheus_text() +
             server_metrics_text(ctx, raw_http.open_connections());
    return r;
  });
  http.add_route("GET", "/version", [](const HttpRequest&) {
    return json_response({{"version", LATHE_VERSION}});
  });
  http.add_route(
      "GET", "/v1/models", authenticated(ctx, [&ctx](const HttpRequest&) {
        return json_response({{"object", "list"}, {"data", json::array({model_card(ctx)})}});
      }));
  // GET /v1/models/{model} (the SDK's models.retrieve); other names fall through to 404.
  http.add_route(
      "GET", "/v1/models/" + ctx.model_name,
      authenticated(ctx, [&ctx](const HttpRequest&) { return json_response(model_card(ctx)); }));
  http.add_route("POST", "/v1/chat/completions", authenticated(ctx, [&ctx](const HttpRequest& req) {
                   return handle_generation(ctx, ApiEndpoint::kChatCompletions, req);
                 }));
  http.add_route("POST", "/v1/completions", authenticated(ctx, [&ctx](const HttpRequest& req) {
                   return handle_generation(ctx, ApiEndpoint::kCompletions, req);
                 }));
  http.add_route("POST", "/tokenize", authenticated(ctx, [&ctx](const HttpRequest& req) {
                   return handle_tokenize(ctx, req);
                 }));
  http.add_route("POST", "/detokenize", authenticated(ctx, [&ctx](const HttpRequest& req) {
                   return handle_detokenize(ctx, req);
                 }));
  http.add_route("GET", "/tokenizer_info", authenticated(ctx, [&ctx](const HttpRequest&) {
                   return handle_tokenizer_info(ctx);
                 }));
}

}  // namespace lathe

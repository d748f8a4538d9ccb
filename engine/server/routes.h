// Every route of the OpenAI-compatible server, registered in one place (routes.cpp):
//   GET  /health                 200 while serving, 503 while stopping (never touches the engine)
//   GET  /metrics                the engine's Prometheus text plus the server's own counters
//   GET  /version
//   GET  /v1/models              the served model (with max_model_len and vocab_size)
//   GET  /v1/models/{served name}
//   POST /v1/chat/completions    chat, streaming or not (generation_handler.h)
//   POST /v1/completions         text or token-id prompt, streaming or not
//   POST /tokenize               {"prompt"} or {"messages"} -> {"tokens", "count", "max_model_len"}
//   POST /detokenize             {"tokens"} -> {"prompt"}
//   GET  /tokenizer_info         BOS/EOS as text and ids, add_bos/eos, the chat template (vLLM's)
// With an API key configured, /v1/*, /tokenize, /detokenize and /tokenizer_info need
// "Authorization: Bearer <key>";
// /health and /metrics stay open for probes and scrapers.
#pragma once

#include "engine/server/http_server.h"
#include "engine/server/server_context.h"

namespace lathe {

void register_routes(HttpServer& http, ServerContext& ctx);

}  // namespace lathe

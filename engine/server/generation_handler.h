// POST /v1/chat/completions and /v1/completions: parse and check the body, tokenize on the
// connection thread (prompt + max_tokens must fit max-model-len), submit to the engine, then
// either wait for the whole answer or stream it as server-sent events. A client that goes away
// (its connection closes) gets its engine request aborted at once, freeing its KV blocks.
#pragma once

#include "engine/server/http_server.h"
#include "engine/server/openai_request.h"
#include "engine/server/server_context.h"

namespace lathe {

// Never throws; every failure is an OpenAI-shaped error response.
HttpResponse handle_generation(ServerContext& ctx, ApiEndpoint endpoint,
                               const HttpRequest& request);

}  // namespace lathe

// Structured output for the API: compiles a request's response_format / guided_* (parsed by
// openai_request) into the engine's TokenConstraint (a GrammarConstraint over the model's
// vocabulary) and puts it into the request's sampling parameters. Problems are 400s naming the
// field and what is wrong: an invalid or unsupported schema, a regex that does not compile or
// cannot match, a tool whose parameters schema is not supported.
#pragma once

#include <string>

#include "engine/server/api_error.h"
#include "engine/server/openai_request.h"
#include "engine/server/server_context.h"
#include "engine/server/tool_calls.h"

namespace lathe {

// The regex of `request.guided` (empty for none). `body` is the request's JSON text: schemas are
// read from it again, keeping their properties in the order the client wrote them.
Result<std::string> guided_regex(const OpenAiRequest& request, const std::string& body);

// Compiles `regex` into request->spec.sampling.constraint; `param` is the field blamed on error.
MaybeApiError attach_constraint(ServerContext& ctx, const std::string& regex,
                                const std::string& param, OpenAiRequest* request);

// Chat tools: renders the tools into the prompt (the template's `tools` variable, or for a
// template without tools a system message, with past calls written as text), keeps special
// tokens in the output text (call markers such as [TOOL_CALLS]), and for tool_choice required or
// a named function attaches the constraint that forces the call.
MaybeApiError prepare_tools(ServerContext& ctx, const std::string& body, OpenAiRequest* request);
// The prompt side of prepare_tools() for a template calling tools in `syntax`.
void render_tools_into_request(ToolSyntax syntax, OpenAiRequest* request);

}  // namespace lathe

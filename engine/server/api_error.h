// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP status.
// The message says what was wrong and what to send instead.
#pragma once

#include <optional>
#include <string>

#include "engine/core/status.h"
#include "engine/server/http_server.h"

namespace lathe {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error types
  std::string param;                           // the offending field; "" -> null
  std::string code;                            // e.g. "model_not_found"; "" -> null
  int retry_after_s = 0;                       // > 0: a Retry-After header (503)
};

// nullopt when fine, else the first problem found.
using MaybeApiError = std::optional<ApiError>;

ApiError bad_request(std::string message, std::string param = {});
// Maps an engine Status: invalid argument / unsupported / does not fit -> 400, not found -> 404,
// queue full -> 503 with Retry-After, anything else -> 500.
ApiError error_from_status(const Status& status, std::string param = {});

std::string error_json(const ApiError& error);
HttpResponse error_response(const ApiError& error);

}  // namespace lathe

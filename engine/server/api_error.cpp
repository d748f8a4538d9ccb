#include "engine/server/api_error.h"

#include <nlohmann/json.hpp>

namespace lathe {

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError error_from_status(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kOutOfMemory:  // the request cannot fit in the KV cache
      e.status = 400;
      break;
    case ErrorCode::kNotFound:
      e.status = 404;
      e.code = "not_found";
      break;
    case ErrorCode::kResourceExhausted:
      e.status = 503;
      e.type = "server_overloaded";
      e.code = "queue_full";
      e.retry_after_s = 1;
      break;
    case ErrorCode::kCancelled:
      e.status = 503;
      e.type = "server_error";
      e.retry_after_s = 1;
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

std::string error_json(const ApiError& error) {
  nlohmann::json j;
  j["error"] = {{"message", error.message},
                {"type", error.type},
                {"param", error.param.empty() ? nlohmann::json() : nlohmann::json(error.param)},
                {"code", error.code.empty() ? nlohmann::json() : nlohmann::json(error.code)}};
  // Messages may quote client input; invalid UTF-8 in it must not make dump() throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse error_response(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.content_type = "application/json";
  r.body = error_json(error);
  if (error.retry_after_s > 0)
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  return r;
}

}  // namespace lathe

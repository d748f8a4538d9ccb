// Fuzz target: the OpenAI request parser (body bytes -> JSON -> OpenAiRequest) for both endpoints.
#include <nlohmann/json.hpp>

#include "engine/server/openai_request.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  nlohmann::json json;
  if (parse_json_body(body, &json).has_value()) return 0;
  for (ApiEndpoint e : {ApiEndpoint::kChatCompletions, ApiEndpoint::kCompletions}) {
    OpenAiRequest request;
    (void)parse_openai_request(e, json, &request);
  }
  return 0;
}

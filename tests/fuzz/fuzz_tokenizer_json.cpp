// Fuzz target: tokenizer.json as the Hugging Face loader reads it; a byte-level BPE description
// becomes a BpeTokenizer that encodes and decodes a fixed text.
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  BpeTokenizerConfig config;
  std::string kind_name;
  Result<HfTokenizerJsonKind> kind =
      parse_hf_tokenizer_json(text, "tokenizer.json", &config, &kind_name);
  HfSpecialTokenSettings settings;
  (void)parse_hf_special_token_settings(text, "tokenizer_config.json", settings);
  if (!kind.is_ok()) {
    LATHE_FUZZ_CHECK(!kind.status().message().empty());
    return 0;
  }
  if (*kind != HfTokenizerJsonKind::kByteLevelBpe) return 0;
  Result<std::shared_ptr<const BpeTokenizer>> tok = BpeTokenizer::create(std::move(config));
  if (!tok.is_ok()) return 0;
  const Tokenizer& t = **tok;
  const std::vector<TokenId> ids =
      t.encode("Hello, wörld! <|im_start|> 12345\n\t  x \xF0\x9F\x98\x80");
  for (TokenId id : ids) LATHE_FUZZ_CHECK(id >= 0 && id < t.vocab_size());
  (void)t.decode(ids);
  (void)t.decode(ids, /*skip_special=*/true);
  return 0;
}

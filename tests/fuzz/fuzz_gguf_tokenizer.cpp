// Fuzz target: a GGUF file's tokenizer metadata (tokenizer.ggml.*) read as the loader reads it,
// built into a tokenizer (byte-level BPE or SentencePiece), then a fixed text encoded and decoded.
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/tokenizer/tokenizer_loader.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemoryFile file(data, size);
  Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(file.path());
  if (!g.is_ok()) return 0;
  Result<GgufTokenizerData> d = read_gguf_tokenizer_data(**g);
  if (!d.is_ok()) {
    LATHE_FUZZ_CHECK(!d.status().message().empty());
    return 0;
  }
  Result<std::shared_ptr<const Tokenizer>> tok = load_gguf_tokenizer(*d);
  if (!tok.is_ok()) return 0;
  const Tokenizer& t = **tok;
  const std::vector<TokenId> ids = t.encode("Hello, wörld! <|im_start|> 12345\n\t  x");
  for (TokenId id : ids) LATHE_FUZZ_CHECK(id >= 0 && id < t.vocab_size());
  (void)t.decode(ids);
  (void)t.decode(ids, /*skip_special=*/true);
  (void)t.decode({-1, 0, static_cast<TokenId>(t.vocab_size())});
  return 0;
}

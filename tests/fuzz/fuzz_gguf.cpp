// Fuzz target: the GGUF reader on a whole file (header, metadata of every type, tensor infos, the
// data section), then what the loader reads from it: the model config, generation defaults, the
// model's tensors (no tokenizer; fuzz_gguf_tokenizer covers it) and one dequantized row per tensor.
#include <algorithm>
#include <vector>

#include "engine/model/dequant.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config_parse.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemoryFile file(data, size);
  Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(file.path());
  if (!g.is_ok()) {
    LATHE_FUZZ_CHECK(!g.status().message().empty());
    return 0;
  }
  const GgufFile& gguf = **g;
  for (const auto& [key, value] : gguf.metadata()) {
    (void)value.to_display_string();
    (void)gguf.get_int(key);
    (void)gguf.get_float(key);
    (void)gguf.get_bool(key);
    (void)gguf.get_string(key);
    (void)gguf.get_string_array(key);
    (void)gguf.get_int_array(key);
    (void)gguf.get_float_array(key);
    LATHE_FUZZ_CHECK(gguf.find(key) != nullptr);
  }
  std::vector<float> row;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    LATHE_FUZZ_CHECK(t.data >= gguf.mapped_file()->data());
    LATHE_FUZZ_CHECK(t.data + t.nbytes <= gguf.mapped_file()->data() + gguf.file_size());
    const TensorView v = t.view();
    // One row of at most 4096 values (whole blocks), so a big tensor stays cheap.
    if (can_dequantize(t.dtype) && t.ne[0] > 0 && t.ne[0] <= 4096 && t.numel() > 0) {
      row.resize(static_cast<size_t>(t.ne[0]));
      dequantize_row(t.dtype, t.data, row.data(), t.ne[0]);
    }
    (void)v;
  }
  (void)config_from_gguf(gguf);
  (void)read_gguf_generation_defaults(gguf);

  LoadOptions options;
  options.load_tokenizer = false;
  Result<LoadedModel> model = load_gguf_model(file.path(), options);
  if (model.is_ok()) (void)bind_model_weights(*model);
  return 0;
}

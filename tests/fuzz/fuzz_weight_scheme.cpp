// Fuzz target: the quantized checkpoint scheme handlers (engine/model/weight_scheme_*.cpp) through
// the loader. The input is [u32 n][n bytes of config.json][model.safetensors]; both are written to
// a folder and loaded without a tokenizer, which binds every projection through the scheme the
// config names (gptq, awq, compressed-tensors, fp8). A bound model has each projection decoded.
#include "engine/model/layer_weights.h"
#include "engine/model/model_loader.h"
#include "engine/model/weight_dequant.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view config, weights;
  fuzz::split_length_prefixed(data, size, &config, &weights);
  fuzz::clear_scratch_folder();
  fuzz::write_scratch_file("config.json", config);
  fuzz::write_scratch_file("model.safetensors", weights);
  LoadOptions options;
  options.load_tokenizer = false;
  Result<LoadedModel> model = load_model(fuzz::scratch_folder(), options);
  if (!model.is_ok()) {
    LATHE_FUZZ_CHECK(!model.status().message().empty());
    return 0;
  }
  Result<ModelWeights> bound = bind_model_weights(*model);
  if (!bound.is_ok()) return 0;
  // Decode a few rows of every matrix the scheme built (validated at bind: must not crash).
  std::vector<float> rows;
  for (const LayerWeights& layer : bound->layers)
    for (const LinearGroup* group : {&layer.qkv, &layer.o, &layer.gate_up, &layer.down})
      for (const WeightMatrix& m : group->parts) {
        if (m.n <= 0 || m.k <= 0 || m.k > (1 << 16)) continue;
        const int64_t r1 = std::min<int64_t>(m.n, 2);
        rows.resize(static_cast<size_t>(r1 * m.k));
        dequantize_matrix_rows(m, 0, r1, rows.data(), m.k);
      }
  return 0;
}

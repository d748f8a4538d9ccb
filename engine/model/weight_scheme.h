// How a checkpoint stores its linear weights. One handler per checkpoint scheme turns the tensors a
// loader put in the WeightStore for one projection into a WeightMatrix (weight_matrix.h), checking
// that its parts agree with the model config and the quantization config (weight_dequant.h's
// validate_weight_matrix); bind_model_weights() (layer_weights.h) asks it for every projection.
//
// Handlers (one file each), selected from the checkpoint's quantization config
// (checkpoint_quant.h):
//   dense                f32/f16/bf16 safetensors and every GGUF file (its block types are
//                        formats of their own)                                   weight_scheme.cpp
//   gptq                 AutoGPTQ / GPTQModel: 4/8 bits, groups or per channel, sym/asym, desc_act
//                        (g_idx), checkpoint_format gptq (zero - 1) or gptq_v2, the zero-point
//                        convention checked against the data, `dynamic` per-module overrides
//                                                                           weight_scheme_gptq.cpp
//   awq                  AutoAWQ GEMM: 4 bits, zero points, groups          weight_scheme_awq.cpp
//   compressed-tensors   pack-quantized W4A16/W8A16, naive/int-quantized INT8, float-quantized
//                        FP8 (tensor, channel, block); config groups with targets; `ignore`
//                                                             weight_scheme_compressed_tensors.cpp
//   fp8                  vLLM / transformers FP8: per-tensor weight_scale (+ input_scale) or
//                        block-wise weight_scale_inv                        weight_scheme_fp8.cpp
//   online               --quantization fp8|int8|int4 over any of the above whose layer projections
//                        are 16-bit: RTN at bind time into buffers the scheme owns
//                                                                         weight_scheme_online.cpp
// Modules a quantized checkpoint leaves unquantized (ignore lists, `-:` dynamic rules, an
// unquantized lm_head) are read as dense tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_matrix.h"
#include "engine/model/weight_store.h"

namespace lathe {

struct LoadedModel;

class WeightScheme {
 public:
  virtual ~WeightScheme() = default;
  virtual const char* name() const = 0;  // "dense", "gptq", ...
  // One line for the load log: "gptq int4 g128 sym (checkpoint_format gptq)".
  virtual std::string description() const { return name(); }
  // The projection stored under canonical `name` (e.g. "blk.0.attn_q"), expected [n, k]. Errors
  // name the tensor and what disagrees.
  virtual Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                                      int64_t k) const = 0;
};

// Every tensor as stored: f32/f16/bf16 as kDense, GGUF block types as kGguf.
std::unique_ptr<WeightScheme> make_dense_scheme();

// The quantized-checkpoint handlers. Each parses `quant.config_json` (errors name quant.source and
// the field) and may look at the stored tensors (GPTQ's zero-point convention).
Result<std::unique_ptr<WeightScheme>> make_gptq_scheme(const CheckpointQuant& quant,
                                                       const ModelConfig& config,
                                                       const WeightStore& store);
Result<std::unique_ptr<WeightScheme>> make_awq_scheme(const CheckpointQuant& quant);
Result<std::unique_ptr<WeightScheme>> make_compressed_tensors_scheme(const CheckpointQuant& quant);
Result<std::unique_ptr<WeightScheme>> make_fp8_scheme(const CheckpointQuant& quant);

// Quantizes every layer projection `base` yields (which must be 16-bit or f32) at bind time; the
// embedding and the LM head pass through. The matrices point into buffers the scheme owns.
std::unique_ptr<WeightScheme> make_online_quant_scheme(OnlineQuant mode,
                                                       std::unique_ptr<WeightScheme> base);
// One dense matrix quantized as `mode` (checkpoint_quant.h says how); the parts are appended to
// `owned`, which must outlive the result.
Result<WeightMatrix> quantize_matrix_online(const WeightMatrix& dense, OnlineQuant mode,
                                            std::vector<std::unique_ptr<uint8_t[]>>* owned);

// The handler for `model`'s checkpoint (wrapped by the online scheme when the model was loaded with
// a --quantization). Shared: the bound ModelWeights keep it (and the buffers it owns) alive.
Result<std::shared_ptr<const WeightScheme>> select_weight_scheme(const LoadedModel& model);

// Helpers for the handlers.
namespace scheme_detail {

// The Hugging Face module of a canonical projection: "blk.0.attn_q" ->
// "model.layers.0.self_attn.q_proj", "output" -> "lm_head".
std::string hf_module_name(const std::string& canonical);
// The stored quantized part `part` ("qweight", "weight_scale", ...) of a projection; an empty view
// when absent. Loaders store parts under "<canonical>.<part>" (model_weights.h).
TensorView part(const WeightStore& store, const std::string& canonical, const char* part);
bool has_part(const WeightStore& store, const std::string& canonical, const char* part);
// A projection the scheme leaves unquantized: its plain f32/f16/bf16 weight. Errors name the
// scheme when the weight is missing or stored in another type.
Result<WeightMatrix> dense_matrix(const WeightStore& store, const std::string& name, int64_t n,
                                  int64_t k, const std::string& scheme);
// Python's re.match (anchored at the start, not at the end) with ECMAScript syntax.
// kInvalidArgument naming `where` and the pattern when it does not compile.
Result<bool> regex_match_prefix(const std::string& pattern, const std::string& text,
                                const std::string& where);
// A quantized matrix's header: name, format, element type of `data`, shape [n, k], data.
WeightMatrix quantized_matrix(const std::string& name, WeightFormat format, DType dtype, int64_t n,
                              int64_t k, const TensorView& data);
// kCorruptFile: "<name> (<module>): the <scheme> config (<source>) quantizes this module, but the
// checkpoint has no <module>.<what>; the checkpoint does not match its quantization config".
Status missing_part(const std::string& name, const std::string& scheme, const std::string& source,
                    const std::string& what);
// `m` checked (validate_weight_matrix) and labelled with its scheme.
Result<WeightMatrix> checked(WeightMatrix m, const char* scheme);

}  // namespace scheme_detail

}  // namespace lathe

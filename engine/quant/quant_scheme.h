// The quantization schemes of `lathe quantize`, parsed from the user's words and checked for
// combinations that cannot work, before anything is read or written:
//   rtn          int4 / int8 round-to-nearest weights (bits, group size, sym/asym), written as a
//                GPTQ, AWQ or compressed-tensors (default) Hugging Face folder
//   gptq         int4 / int8 weights chosen by GPTQ on calibration data (calibrated_quantizer.h):
//                bits, group size, sym (default) / asym, --desc-act, --damp-percent (0.1); a GPTQ
//                (default) or compressed-tensors folder
//   awq          int4 weights with a zero point (default g128) after AWQ's activation-aware scale
//                and clip search on calibration data; an AWQ (default), GPTQ or compressed-tensors
//                folder
//   fp8-dynamic  FP8 E4M3 weights with per-channel scales, dynamic per-token activations
//                (compressed-tensors float-quantized, vLLM's FP8_DYNAMIC)
//   fp8-block    FP8 weights with 128x128 block scales (FP8_BLOCK)
//   int8-w8a16   int8 weights, per-channel symmetric (compressed-tensors pack-quantized W8A16)
//   q8_0, q6_k, q5_k_m, q4_k_m, q4_0   a GGUF file with llama.cpp's per-tensor type mix
//   f16, bf16    no quantization: every tensor in 16 bits, a plain Hugging Face folder (a GGUF
//                source dequantized, e.g. the reference `lathe eval` compares quantizations with)
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/status.h"
#include "engine/quant/fp8.h"
#include "engine/quant/gguf_type_mix.h"
#include "engine/quant/int_quant.h"

namespace lathe {

enum class QuantOutputFormat { kGguf, kGptq, kAwq, kCompressedTensors };
const char* quant_output_format_name(QuantOutputFormat f);  // "gguf", "gptq", "awq", ...

enum class QuantKind { kInt, kFp8, kGguf, kDense };
// How integer codes are chosen: rtn needs nothing, gptq and awq calibration data.
enum class QuantMethod { kRtn, kGptq, kAwq };

// What the user asked for (CLI flags). Unset optional values are -1 / empty.
struct QuantSchemeRequest {
  std::string scheme;          // rtn | fp8-dynamic | fp8-block | int8-w8a16 | q8_0 | q6_k | ...
  int bits = -1;               // rtn: 4 (default) or 8
  int64_t group_size = 0;      // rtn: 0 = default (128); -1 = per channel
  int symmetric = -1;          // -1 default (symmetric), 0 asym, 1 sym
  std::string format;          // rtn: gptq | awq | compressed-tensors (default)
  bool desc_act = false;       // gptq: act-order (columns by descending Hessian diagonal)
  double damp_percent = -1.0;  // gptq: -1 = default (0.1 of the mean Hessian diagonal)
};

struct QuantScheme {
  std::string name;  // as parsed: "rtn", "q4_k_m", ...
  QuantKind kind = QuantKind::kInt;
  QuantOutputFormat format = QuantOutputFormat::kCompressedTensors;
  IntQuantConfig int_config;                  // kInt (scale_dtype and min_zero set per format)
  Fp8ScaleKind fp8 = Fp8ScaleKind::kChannel;  // kFp8
  GgufFileType gguf = GgufFileType::kQ8_0;    // kGguf
  DType dense_dtype = DType::kF16;            // kDense: f16 or bf16
  QuantMethod method = QuantMethod::kRtn;     // kInt
  bool desc_act = false;                      // kGptq
  double damp_percent = 0.1;                  // kGptq

  bool needs_calibration() const { return method != QuantMethod::kRtn; }

  // One line for messages: "rtn int4 g128 symmetric, compressed-tensors (pack-quantized)".
  std::string description() const;
};

// "rtn, gptq, awq, fp8-dynamic, fp8-block, int8-w8a16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, f16, bf16"
std::string supported_quant_schemes();

// Parses and checks the request: an unknown scheme, flags the scheme does not take (--bits for
// fp8), a format that cannot hold the scheme (awq with 8 bits, act-order...), are
// kInvalidArgument errors that say what to use instead. `scale_dtype_16` is the 16-bit type the
// HF output stores its unquantized tensors and compressed-tensors scales in (kBF16 or kF16).
Result<QuantScheme> resolve_quant_scheme(const QuantSchemeRequest& request, DType scale_dtype_16);

}  // namespace lathe

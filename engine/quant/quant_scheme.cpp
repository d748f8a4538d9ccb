#include "engine/quant/quant_scheme.h"

#include <cctype>

#include "engine/core/strings.h"

namespace lathe {

const char* quant_output_format_name(QuantOutputFormat f) {
  switch (f) {
    case QuantOutputFormat::kGguf:
      return "gguf";
    case QuantOutputFormat::kGptq:
      return "gptq";
    case QuantOutputFormat::kAwq:
      return "awq";
    case QuantOutputFormat::kCompressedTensors:
      return "compressed-tensors";
  }
  return "?";
}

std::string supported_quant_schemes() {
  return "rtn, gptq, awq, fp8-dynamic, fp8-block, int8-w8a16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, "
         "f16, bf16";
}

std::string QuantScheme::description() const {
  switch (kind) {
    case QuantKind::kGguf:
      return std::string("GGUF ") + gguf_file_type_name(gguf) + " (llama.cpp's tensor type mix)";
    case QuantKind::kDense:
      return std::string("no quantization: every tensor in ") +
             (dense_dtype == DType::kF16 ? "f16" : "bf16") + " (Hugging Face folder)";
    case QuantKind::kFp8:
      return std::string("FP8 E4M3 weights, ") + fp8_scale_kind_name(fp8) +
             " scales, dynamic activations; compressed-tensors (float-quantized)";
    case QuantKind::kInt: {
      const std::string g = int_config.group_size > 0
                                ? strformat("g%lld", static_cast<long long>(int_config.group_size))
                                : std::string("per channel");
      std::string fmt = quant_output_format_name(format);
      if (format == QuantOutputFormat::kCompressedTensors) fmt += " (pack-quantized)";
      std::string extra;
      if (method == QuantMethod::kGptq)
        extra = strformat("%s, damp %g", desc_act ? " act-order" : "", damp_percent);
      return strformat("%s int%d %s %s%s; %s", name.c_str(), int_config.bits, g.c_str(),
                       int_config.symmetric ? "symmetric" : "asymmetric", extra.c_str(),
                       fmt.c_str());
    }
  }
  return name;
}

Result<QuantScheme> resolve_quant_scheme(const QuantSchemeRequest& r, DType scale_dtype_16) {
  QuantScheme s;
  s.name = r.scheme;
  for (char& ch : s.name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool int_flags =
      r.bits != -1 || r.group_size != 0 || r.symmetric != -1 || r.desc_act || r.damp_percent != -1;
  auto no_int_flags = [&]() -> Status {
    if (int_flags)
      return invalid_argument("--scheme " + s.name +
                              " takes no --bits, --group-size, --sym, --asym, --desc-act or "
                              "--damp-percent (they are for --scheme rtn, gptq and awq)");
    if (!r.format.empty() && s.kind != QuantKind::kGguf && r.format != "compressed-tensors")
      return invalid_argument("--scheme " + s.name +
                              " is written as compressed-tensors; --format " + r.format +
                              " cannot hold it");
    if (!r.format.empty() && s.kind == QuantKind::kGguf && r.format != "gguf")
      return invalid_argument("--scheme " + s.name + " writes a GGUF file; --format " + r.format +
                              " cannot hold it (use --scheme rtn for GPTQ / AWQ folders)");
    return Status();
  };
  if (const std::optional<GgufFileType> g = parse_gguf_file_type(s.name)) {
    s.kind = QuantKind::kGguf;
    s.gguf = *g;
    s.format = QuantOutputFormat::kGguf;
    LATHE_RETURN_IF_ERROR(no_int_flags());
    return s;
  }
  if (s.name == "f16" || s.name == "bf16") {
    s.kind = QuantKind::kDense;
    s.dense_dtype = s.name == "f16" ? DType::kF16 : DType::kBF16;
    LATHE_RETURN_IF_ERROR(no_int_flags());
    return s;
  }
  if (s.name == "fp8-dynamic" || s.name == "fp8-block") {
    s.kind = QuantKind::kFp8;
    s.fp8 = s.name == "fp8-block" ? Fp8ScaleKind::kBlock : Fp8ScaleKind::kChannel;
    LATHE_RETURN_IF_ERROR(no_int_flags());
    return s;
  }
  if (s.name == "int8-w8a16") {
    s.kind = QuantKind::kInt;
    LATHE_RETURN_IF_ERROR(no_int_flags());
    s.int_config = IntQuantConfig{8, -1, true, scale_dtype_16, 0};
    return s;
  }
  if (s.name == "rtn") {
    s.method = QuantMethod::kRtn;
  } else if (s.name == "gptq") {
    s.method = QuantMethod::kGptq;
  } else if (s.name == "awq") {
    s.method = QuantMethod::kAwq;
  } else {
    return invalid_argument("unknown --scheme '" + r.scheme +
                            "'; supported: " + supported_quant_schemes());
  }
  s.kind = QuantKind::kInt;
  const bool gptq = s.method == QuantMethod::kGptq, awq = s.method == QuantMethod::kAwq;
  if (!gptq && (r.desc_act || r.damp_percent != -1))
    return invalid_argument("--desc-act and --damp-percent are GPTQ's; --scheme " + s.name +
                            " takes neither");
  s.desc_act = r.desc_act;
  s.damp_percent = r.damp_percent == -1 ? 0.1 : r.damp_percent;
  if (!(s.damp_percent > 0.0 && s.damp_percent <= 1.0))
    return invalid_argument(
        strformat("--damp-percent must be in (0, 1] (a share of the mean Hessian diagonal), got %g",
                  r.damp_percent));
  IntQuantConfig& c = s.int_config;
  c.bits = r.bits == -1 ? 4 : r.bits;
  c.group_size = r.group_size == 0 ? 128 : r.group_size;
  // AWQ keeps AutoAWQ's zero point unless --sym is asked for.
  c.symmetric = awq ? r.symmetric == 1 : r.symmetric != 0;
  if (c.bits != 4 && c.bits != 8)
    return invalid_argument(strformat("--bits must be 4 or 8, got %d", c.bits));
  if (awq && c.bits != 4)
    return invalid_argument("--scheme awq makes 4-bit weights only; use --scheme gptq for 8 bits");
  if (c.group_size < -1 || c.group_size == 0)
    return invalid_argument(strformat(
        "--group-size must be a positive number of columns (32, 64, 128, ...) or -1 for one group "
        "per output channel, got %lld",
        static_cast<long long>(c.group_size)));
  const std::string fmt = !r.format.empty() ? r.format
                          : gptq            ? "gptq"
                          : awq             ? "awq"
                                            : "compressed-tensors";
  if (s.desc_act && fmt != "gptq")
    return invalid_argument(
        "--desc-act (act-order) is written in the GPTQ layout only; use "
        "--format gptq (the default of --scheme gptq)");
  if (fmt == "compressed-tensors") {
    s.format = QuantOutputFormat::kCompressedTensors;
    c.scale_dtype = scale_dtype_16;
  } else if (fmt == "gptq") {
    s.format = QuantOutputFormat::kGptq;
    c.scale_dtype = DType::kF16;
    c.min_zero = c.symmetric ? 0 : 1;  // v1 stores zero - 1
  } else if (fmt == "awq") {
    s.format = QuantOutputFormat::kAwq;
    c.scale_dtype = DType::kF16;
    if (c.bits != 4)
      return invalid_argument(
          "--format awq holds 4-bit weights only (AutoAWQ's GEMM layout); use "
          "--format gptq or compressed-tensors for 8 bits");
    if (c.group_size <= 0)
      return invalid_argument(
          "--format awq needs a group size (e.g. --group-size 128); per-channel "
          "scales are not an AWQ layout");
  } else if (fmt == "gguf") {
    return invalid_argument(
        "--scheme rtn writes Hugging Face folders; for a GGUF file pick a GGUF "
        "type as the scheme (q8_0, q6_k, q5_k_m, q4_k_m, q4_0)");
  } else {
    return invalid_argument("unknown --format '" + fmt +
                            "'; supported: gptq, awq, compressed-tensors");
  }
  return s;
}

}  // namespace lathe

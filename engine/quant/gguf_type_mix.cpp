#include "engine/quant/gguf_type_mix.h"

#include "engine/core/strings.h"

namespace lathe {
namespace {

enum class Category { kTokenEmbd, kOutput, kAttnV, kFfnDown, kOther };

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (name.find("attn_v.weight") != std::string_view::npos) return Category::kAttnV;
  if (name.find("ffn_down") != std::string_view::npos) return Category::kFfnDown;
  return Category::kOther;
}

bool fits(DType t, int64_t row_length) {
  return row_length % dtype_info(t).block_size == 0;
}

// llama.cpp's tensor_type_fallback for the types this file can choose.
DType fallback(DType t, int64_t row_length) {
  if (fits(t, row_length)) return t;
  DType r = t;
  switch (t) {
    case DType::kQ4_K:
      r = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      r = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      r = DType::kQ8_0;
      break;
    default:
      break;
  }
  return fits(r, row_length) ? r : DType::kF16;
}

}  // namespace

std::optional<GgufFileType> parse_gguf_file_type(std::string_view name) {
  for (GgufFileType t : {GgufFileType::kQ4_0, GgufFileType::kQ8_0, GgufFileType::kQ4_K_M,
                         GgufFileType::kQ5_K_M, GgufFileType::kQ6_K})
    if (iequals(name, gguf_file_type_name(t))) return t;
  return std::nullopt;
}

const char* gguf_file_type_name(GgufFileType t) {
  switch (t) {
    case GgufFileType::kQ4_0:
      return "q4_0";
    case GgufFileType::kQ8_0:
      return "q8_0";
    case GgufFileType::kQ4_K_M:
      return "q4_k_m";
    case GgufFileType::kQ5_K_M:
      return "q5_k_m";
    case GgufFileType::kQ6_K:
      return "q6_k";
  }
  return "?";
}

DType gguf_file_type_base(GgufFileType t) {
  switch (t) {
    case GgufFileType::kQ4_0:
      return DType::kQ4_0;
    case GgufFileType::kQ8_0:
      return DType::kQ8_0;
    case GgufFileType::kQ4_K_M:
      return DType::kQ4_K;
    case GgufFileType::kQ5_K_M:
      return DType::kQ5_K;
    case GgufFileType::kQ6_K:
      return DType::kQ6_K;
  }
  return DType::kQ8_0;
}

bool gguf_use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

std::optional<DType> gguf_tensor_type(GgufFileType ft, const GgufTensorQuery& q) {
  const std::string_view name = q.name;
  const bool quantizable = q.n_dims >= 2 && ends_with(name, "weight") &&
                           name.find("_norm.weight") == std::string_view::npos;
  if (!quantizable) return std::nullopt;
  const DType base = gguf_file_type_base(ft);
  DType t = base;
  const Category cat = category_of(name);
  const bool k_m = ft == GgufFileType::kQ4_K_M || ft == GgufFileType::kQ5_K_M;
  if (cat == Category::kOutput || (q.tied_embeddings && cat == Category::kTokenEmbd)) {
    if (!fits(base, q.row_length)) {
      t = DType::kQ8_0;
    } else if (base != DType::kQ8_0) {
      t = DType::kQ6_K;
    }
  } else if (cat == Category::kAttnV) {
    if (k_m && gguf_use_more_bits(q.layer, q.num_layers)) t = DType::kQ6_K;
    if (q.is_70b && t == DType::kQ4_K) t = DType::kQ5_K;
  } else if (cat == Category::kFfnDown) {
    if (k_m && gguf_use_more_bits(q.layer, q.num_layers)) t = DType::kQ6_K;
  }
  return fallback(t, q.row_length);
}

}  // namespace lathe

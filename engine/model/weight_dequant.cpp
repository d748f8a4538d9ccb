#include "engine/model/weight_dequant.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/model/dequant.h"
#include "engine/model/tensor_names.h"
#include "engine/quant/fp8.h"

namespace lathe {
namespace {

// AWQ GEMM: nibble i of a word holds column 8c + kAwqOrder[i]; this is the inverse (column offset
// -> nibble).
constexpr int kAwqNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};

inline float load_scale(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.bytes() + 4 * i, 4);
      return f;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, t.bytes() + 2 * i, 2);
      return f16_to_f32(h);
    }
    default: {  // bf16 (validate_weight_matrix allows only these three)
      uint16_t h;
      std::memcpy(&h, t.bytes() + 2 * i, 2);
      return bf16_to_f32(h);
    }
  }
}

inline uint32_t load_word(const TensorView& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.bytes() + 4 * i, 4);
  return w;
}

// "blk.0.attn_q (model.layers.0.self_attn.q_proj)"
std::string label(const WeightMatrix& m) {
  std::string hf = hf_name_from_canonical(m.name);
  if (ends_with(hf, ".weight")) hf.resize(hf.size() - 7);
  return hf.empty() ? m.name : m.name + " (" + hf + ")";
}

std::string shape_of(std::initializer_list<int64_t> dims) {
  return make_view(DType::kF32, dims, nullptr).shape_string();
}

bool has_shape(const TensorView& t, std::initializer_list<int64_t> dims) {
  const TensorView want = make_view(t.dtype, dims, nullptr);
  if (want.ndim != t.ndim) return false;
  for (int i = 0; i < t.ndim; ++i)
    if (want.shape[i] != t.shape[i]) return false;
  return true;
}

bool present(const TensorView& t) {
  return t.data != nullptr || t.ndim > 0;
}

class Checker {
 public:
  explicit Checker(const WeightMatrix& m) : m_(m) {}

  Status part(const TensorView& t, const char* part, std::initializer_list<DType> dtypes,
              std::initializer_list<int64_t> shape, const std::string& why) const {
    if (!present(t))
      return corrupt_file(label(m_) + ": " + part + " is missing (" + why +
                          "); the checkpoint does not match its quantization config");
    bool dtype_ok = false;
    std::string names;
    for (DType d : dtypes) {
      dtype_ok = dtype_ok || d == t.dtype;
      if (!names.empty()) names += " or ";
      names += dtype_name(d);
    }
    if (!dtype_ok)
      return corrupt_file(label(m_) + ": " + part + " is stored as " +
                          std::string(dtype_name(t.dtype)) + ", expected " + names);
    if (!has_shape(t, shape))
      return corrupt_file(label(m_) + ": " + part + " has shape " + t.shape_string() +
                          ", expected " + shape_of(shape) + " (" + why + ")");
    return Status();
  }

  // A scale (or input scale) that covers the whole tensor: shape [] or [1].
  Status scalar(const TensorView& t, const char* part) const {
    if (!present(t))
      return corrupt_file(label(m_) + ": " + part + " is missing (one scale for the tensor)");
    if (t.numel() != 1 || t.ndim > 1 || !is_scale_type(t.dtype))
      return corrupt_file(label(m_) + ": " + part + " is a " + std::string(dtype_name(t.dtype)) +
                          " tensor of shape " + t.shape_string() +
                          ", expected one f32/f16/bf16 value (shape [] or [1])");
    return Status();
  }

  // Every scale is a finite number (a NaN or infinite scale would turn logits into NaN).
  Status finite_scales(const TensorView& t, const char* part) const {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(load_scale(t, i)))
        return corrupt_file(strformat("%s: %s[%lld] is not a finite number", label(m_).c_str(),
                                      part, static_cast<long long>(i)));
    return Status();
  }

  Status g_idx(const TensorView& t, int64_t groups) const {
    if (!present(t)) return Status();
    LATHE_RETURN_IF_ERROR(
        part(t, "g_idx", {DType::kI32}, {m_.k}, "the group of each of the inputs"));
    for (int64_t i = 0; i < m_.k; ++i) {
      int32_t g;
      std::memcpy(&g, t.bytes() + 4 * i, 4);
      if (g < 0 || g >= groups)
        return corrupt_file(strformat(
            "%s: g_idx[%lld] is %d, outside the %lld scale groups; the checkpoint is corrupt",
            label(m_).c_str(), static_cast<long long>(i), g, static_cast<long long>(groups)));
    }
    return Status();
  }

  static bool is_scale_type(DType d) {
    return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
  }

 private:
  const WeightMatrix& m_;
};

constexpr std::initializer_list<DType> kScaleTypes = {DType::kF16, DType::kBF16, DType::kF32};

Status validate_int(const WeightMatrix& m) {
  const WeightQuant& q = m.quant;
  const Checker c(m);
  const std::string what = label(m);
  if (q.bits != 4 && q.bits != 8)
    return unsupported(strformat("%s: %d-bit integer weights are not supported (4 or 8 bits)",
                                 what.c_str(), q.bits));
  if (q.granularity == ScaleGranularity::kGroup) {
    if (q.group_size <= 0 || m.k % q.group_size != 0)
      return corrupt_file(strformat("%s: the group size %d does not divide the %lld inputs",
                                    what.c_str(), q.group_size, static_cast<long long>(m.k)));
  } else if (q.granularity != ScaleGranularity::kChannel &&
             !(q.granularity == ScaleGranularity::kTensor && q.layout == IntLayout::kInt8Rows)) {
    return unsupported(what + ": integer weights need group or per-channel scales");
  }
  const int64_t g = q.num_groups(m.k), p = 32 / q.bits, n = m.n, k = m.k;
  const std::string groups =
      strformat("%lld group%s", static_cast<long long>(g), g == 1 ? "" : "s");
  switch (q.layout) {
    case IntLayout::kGptq: {
      if (k % p != 0 || n % p != 0)
        return corrupt_file(strformat(
            "%s: a [%lld, %lld] matrix cannot hold GPTQ's %d-bit packing (both dimensions must be "
            "multiples of %lld)",
            what.c_str(), static_cast<long long>(n), static_cast<long long>(k), q.bits,
            static_cast<long long>(p)));
      LATHE_RETURN_IF_ERROR(
          c.part(m.data, "qweight", {DType::kI32}, {k / p, n},
                 strformat("%d-bit codes of %lld inputs x %lld outputs", q.bits,
                           static_cast<long long>(k), static_cast<long long>(n))));
      LATHE_RETURN_IF_ERROR(c.part(q.scales, "scales", kScaleTypes, {g, n}, groups));
      LATHE_RETURN_IF_ERROR(c.part(q.zeros, "qzeros", {DType::kI32}, {g, n / p},
                                   strformat("%d-bit zero points of %lld outputs in %s", q.bits,
                                             static_cast<long long>(n), groups.c_str())));
      LATHE_RETURN_IF_ERROR(c.g_idx(q.g_idx, g));
      break;
    }
    case IntLayout::kAwq:
      if (q.bits != 4) return unsupported(what + ": the AWQ GEMM layout holds 4-bit codes only");
      if (n % 8 != 0)
        return corrupt_file(strformat("%s: %lld outputs cannot hold AWQ's packing (multiple of 8)",
                                      what.c_str(), static_cast<long long>(n)));
      if (present(q.g_idx)) return corrupt_file(what + ": the AWQ GEMM layout has no g_idx");
      LATHE_RETURN_IF_ERROR(
          c.part(m.data, "qweight", {DType::kI32}, {k, n / 8},
                 strformat("4-bit codes of %lld inputs x %lld outputs", static_cast<long long>(k),
                           static_cast<long long>(n))));
      LATHE_RETURN_IF_ERROR(c.part(q.scales, "scales", kScaleTypes, {g, n}, groups));
      LATHE_RETURN_IF_ERROR(c.part(q.zeros, "qzeros", {DType::kI32}, {g, n / 8},
                                   strformat("zero points of %lld outputs in %s",
                                             static_cast<long long>(n), groups.c_str())));
      break;
    case IntLayout::kCompressedTensors:
      LATHE_RETURN_IF_ERROR(
          c.part(m.data, "weight_packed", {DType::kI32}, {n, (k + p - 1) / p},
                 strformat("%d-bit codes of %lld outputs x %lld inputs", q.bits,
                           static_cast<long long>(n), static_cast<long long>(k))));
      LATHE_RETURN_IF_ERROR(c.part(q.scales, "weight_scale", kScaleTypes, {n, g}, groups));
      if (!q.symmetric)
        LATHE_RETURN_IF_ERROR(c.part(q.zeros, "weight_zero_point", {DType::kI32},
                                     {(n + p - 1) / p, g},
                                     strformat("%d-bit zero points of %lld outputs in %s", q.bits,
                                               static_cast<long long>(n), groups.c_str())));
      LATHE_RETURN_IF_ERROR(c.g_idx(q.g_idx, g));
      break;
    case IntLayout::kInt8Rows:
      if (q.bits != 8 || !q.symmetric || present(q.zeros))
        return unsupported(what + ": int8 rows are read as symmetric 8-bit codes only");
      LATHE_RETURN_IF_ERROR(c.part(m.data, "weight", {DType::kI8}, {n, k}, "int8 codes"));
      if (q.granularity == ScaleGranularity::kTensor) {
        LATHE_RETURN_IF_ERROR(c.scalar(q.scales, "weight_scale"));
      } else if (!(q.granularity == ScaleGranularity::kChannel && has_shape(q.scales, {n}))) {
        LATHE_RETURN_IF_ERROR(c.part(q.scales, "weight_scale", kScaleTypes, {n, g}, groups));
      }
      break;
    case IntLayout::kNone:
      return unsupported(what + ": integer weights without a layout");
  }
  return c.finite_scales(q.scales, "the scales");
}

Status validate_fp8(const WeightMatrix& m) {
  const WeightQuant& q = m.quant;
  const Checker c(m);
  LATHE_RETURN_IF_ERROR(c.part(m.data, "weight", {DType::kF8E4M3}, {m.n, m.k}, "fp8 e4m3 codes"));
  switch (q.granularity) {
    case ScaleGranularity::kTensor:
      LATHE_RETURN_IF_ERROR(c.scalar(q.scales, "weight_scale"));
      break;
    case ScaleGranularity::kChannel:
      if (!has_shape(q.scales, {m.n}) || !Checker::is_scale_type(q.scales.dtype))
        LATHE_RETURN_IF_ERROR(
            c.part(q.scales, "weight_scale", kScaleTypes, {m.n, 1}, "one scale per output"));
      break;
    case ScaleGranularity::kBlock: {
      if (q.block_rows <= 0 || q.block_cols <= 0)
        return corrupt_file(label(m) + ": a block-scaled fp8 weight needs a block size");
      const int64_t br = (m.n + q.block_rows - 1) / q.block_rows;
      const int64_t bc = (m.k + q.block_cols - 1) / q.block_cols;
      LATHE_RETURN_IF_ERROR(
          c.part(q.scales, "weight_scale_inv", kScaleTypes, {br, bc},
                 strformat("one scale per %dx%d block", q.block_rows, q.block_cols)));
      break;
    }
    default:
      return unsupported(label(m) + ": fp8 weights need per-tensor, per-channel or block scales");
  }
  if (present(q.input_scale)) LATHE_RETURN_IF_ERROR(c.scalar(q.input_scale, "input_scale"));
  return c.finite_scales(q.scales, "the scales");
}

// ---- decoders: one row of W into y[0, k) ------------------------------------------------------

void row_gptq(const WeightMatrix& m, int64_t r, float* y) {
  const WeightQuant& q = m.quant;
  const int b = q.bits, p = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  const int64_t n = m.n, gs = q.granularity == ScaleGranularity::kGroup ? q.group_size : m.k;
  const bool act_order = present(q.g_idx);
  const int32_t* g_idx = act_order ? q.g_idx.as<int32_t>() : nullptr;
  const int32_t zero_add = q.zeros_minus_one ? 1 : 0;
  for (int64_t k = 0; k < m.k; ++k) {
    const int64_t g = act_order ? g_idx[k] : k / gs;
    const uint32_t code = (load_word(m.data, (k / p) * n + r) >> (b * (k % p))) & mask;
    const int32_t zero =
        static_cast<int32_t>((load_word(q.zeros, g * (n / p) + r / p) >> (b * (r % p))) & mask) +
        zero_add;
    y[k] = load_scale(q.scales, g * n + r) * static_cast<float>(static_cast<int32_t>(code) - zero);
  }
}

void row_awq(const WeightMatrix& m, int64_t r, float* y) {
  const WeightQuant& q = m.quant;
  const int64_t words = m.n / 8,
                gs = q.granularity == ScaleGranularity::kGroup ? q.group_size : m.k;
  const int shift = 4 * kAwqNibbleOfColumn[r % 8];
  for (int64_t k = 0; k < m.k; ++k) {
    const int64_t g = k / gs;
    const int32_t code = static_cast<int32_t>((load_word(m.data, k * words + r / 8) >> shift) & 15);
    const int32_t zero =
        static_cast<int32_t>((load_word(q.zeros, g * words + r / 8) >> shift) & 15);
    y[k] = load_scale(q.scales, g * m.n + r) * static_cast<float>(code - zero);
  }
}

void row_ct(const WeightMatrix& m, int64_t r, float* y) {
  const WeightQuant& q = m.quant;
  const int b = q.bits, p = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  const int64_t kw = (m.k + p - 1) / p, groups = q.num_groups(m.k);
  const int64_t gs = q.granularity == ScaleGranularity::kGroup ? q.group_size : m.k;
  const bool act_order = present(q.g_idx);
  const int32_t* g_idx = act_order ? q.g_idx.as<int32_t>() : nullptr;
  for (int64_t k = 0; k < m.k; ++k) {
    const int64_t g = act_order ? g_idx[k] : k / gs;
    const int32_t code =
        static_cast<int32_t>((load_word(m.data, r * kw + k / p) >> (b * (k % p))) & mask);
    const int32_t zero =
        q.symmetric ? (1 << (b - 1))
                    : static_cast<int32_t>(
                          (load_word(q.zeros, (r / p) * groups + g) >> (b * (r % p))) & mask);
    y[k] = load_scale(q.scales, r * groups + g) * static_cast<float>(code - zero);
  }
}

void row_int8(const WeightMatrix& m, int64_t r, float* y) {
  const WeightQuant& q = m.quant;
  const int8_t* codes = m.data.as<int8_t>() + r * m.k;
  if (q.granularity == ScaleGranularity::kGroup) {
    const int64_t groups = q.num_groups(m.k);
    for (int64_t k = 0; k < m.k; ++k)
      y[k] = load_scale(q.scales, r * groups + k / q.group_size) * static_cast<float>(codes[k]);
    return;
  }
  const float s = load_scale(q.scales, q.granularity == ScaleGranularity::kTensor ? 0 : r);
  for (int64_t k = 0; k < m.k; ++k) y[k] = s * static_cast<float>(codes[k]);
}

void row_fp8(const WeightMatrix& m, int64_t r, float* y) {
  const WeightQuant& q = m.quant;
  const uint8_t* codes = m.data.bytes() + r * m.k;
  if (q.granularity == ScaleGranularity::kBlock) {
    const int64_t bc = (m.k + q.block_cols - 1) / q.block_cols;
    const int64_t row0 = (r / q.block_rows) * bc;
    for (int64_t k = 0; k < m.k; ++k)
      y[k] = e4m3_to_f32(codes[k]) * load_scale(q.scales, row0 + k / q.block_cols);
    return;
  }
  const float s = load_scale(q.scales, q.granularity == ScaleGranularity::kTensor ? 0 : r);
  for (int64_t k = 0; k < m.k; ++k) y[k] = e4m3_to_f32(codes[k]) * s;
}

}  // namespace

Status validate_weight_matrix(const WeightMatrix& m) {
  if (m.n <= 0 || m.k <= 0)
    return corrupt_file(strformat("%s: a weight of shape [%lld, %lld]", label(m).c_str(),
                                  static_cast<long long>(m.n), static_cast<long long>(m.k)));
  switch (m.format) {
    case WeightFormat::kDense:
    case WeightFormat::kGguf:
      if (!can_dequantize(m.dtype))
        return unsupported(label(m) + ": weights stored as " + std::string(dtype_name(m.dtype)) +
                           " cannot be computed with");
      if (!has_shape(m.data, {m.n, m.k}))
        return corrupt_file(label(m) + ": has shape " + m.data.shape_string() + ", expected " +
                            shape_of({m.n, m.k}));
      return Status();
    case WeightFormat::kInt:
      return validate_int(m);
    case WeightFormat::kFp8:
      return validate_fp8(m);
  }
  return unsupported(label(m) + ": unknown weight format");
}

void dequantize_matrix_rows(const WeightMatrix& m, int64_t r0, int64_t r1, float* dst, int64_t ld) {
  for (int64_t r = r0; r < r1; ++r) {
    float* y = dst + (r - r0) * ld;
    switch (m.format) {
      case WeightFormat::kDense:
      case WeightFormat::kGguf:
        dequantize_row(m.dtype, m.data.row_ptr(r), y, m.k);
        break;
      case WeightFormat::kFp8:
        row_fp8(m, r, y);
        break;
      case WeightFormat::kInt:
        switch (m.quant.layout) {
          case IntLayout::kGptq:
            row_gptq(m, r, y);
            break;
          case IntLayout::kAwq:
            row_awq(m, r, y);
            break;
          case IntLayout::kCompressedTensors:
            row_ct(m, r, y);
            break;
          case IntLayout::kInt8Rows:
            row_int8(m, r, y);
            break;
          case IntLayout::kNone:
            break;
        }
        break;
    }
  }
}

std::vector<float> dequantize_matrix(const WeightMatrix& m) {
  std::vector<float> out(static_cast<size_t>(m.n * m.k));
  dequantize_matrix_rows(m, 0, m.n, out.data(), m.k);
  return out;
}

}  // namespace lathe

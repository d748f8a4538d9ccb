// Online quantization at bind time (vLLM's `--quantization fp8` for a 16-bit checkpoint, and int8 /
// int4 weight-only): every layer projection of the wrapped scheme is dequantized to float32 and
// quantized round-to-nearest with engine/quant's primitives (quantize_fp8, quantize_int_rtn, the
// compressed-tensors packing), into buffers the scheme owns. checkpoint_quant.h names the
// granularities. The results are ordinary WeightMatrix values (kFp8, kInt8Rows, kInt in the
// compressed-tensors layout), so every backend runs them as it runs the same format from a file.
#include <cstring>
#include <mutex>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/weight_dequant.h"
#include "engine/model/weight_scheme.h"
#include "engine/quant/compressed_tensors_layout.h"
#include "engine/quant/fp8.h"
#include "engine/quant/int_quant.h"

namespace lathe {
namespace {

constexpr int64_t kInt4GroupSize = 128;

// A copy of `bytes` the caller keeps alive in `owned`; a view of it with `dtype` and `shape`.
TensorView own(const uint8_t* bytes, size_t size, DType dtype, std::initializer_list<int64_t> shape,
               std::vector<std::unique_ptr<uint8_t[]>>* owned) {
  owned->push_back(std::make_unique<uint8_t[]>(size));
  if (size > 0) std::memcpy(owned->back().get(), bytes, size);
  return make_view(dtype, shape, owned->back().get());
}

class OnlineQuantScheme final : public WeightScheme {
 public:
  OnlineQuantScheme(OnlineQuant mode, std::unique_ptr<WeightScheme> base)
      : mode_(mode), base_(std::move(base)) {}

  const char* name() const override { return "online"; }
  std::string description() const override {
    const char* how =
        mode_ == OnlineQuant::kFp8 ? "fp8 e4m3, one scale per tensor"
        : mode_ == OnlineQuant::kInt8
            ? "int8, one scale per output channel"
            : "int4 symmetric, g128 (per channel where 128 does not divide the inputs)";
    return strformat("online %s (round-to-nearest at load) over %s weights", how, base_->name());
  }

  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    LATHE_ASSIGN_OR_RETURN(WeightMatrix m, base_->matrix(store, name, n, k));
    if (!starts_with(name, "blk.")) return m;  // the LM head stays as stored (vLLM's rule)
    if (!m.is_dense())
      return invalid_argument(strformat(
          "--quantization %s quantizes 16-bit weights at load, but %s is stored as %s; load "
          "this checkpoint without --quantization",
          online_quant_name(mode_), name.c_str(), m.describe().c_str()));
    std::lock_guard<std::mutex> lock(mu_);
    return quantize_matrix_online(m, mode_, &owned_);
  }

 private:
  OnlineQuant mode_;
  std::unique_ptr<WeightScheme> base_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<uint8_t[]>> owned_;
};

}  // namespace

std::unique_ptr<WeightScheme> make_online_quant_scheme(OnlineQuant mode,
                                                       std::unique_ptr<WeightScheme> base) {
  return std::make_unique<OnlineQuantScheme>(mode, std::move(base));
}

Result<WeightMatrix> quantize_matrix_online(const WeightMatrix& dense, OnlineQuant mode,
                                            std::vector<std::unique_ptr<uint8_t[]>>* owned) {
  if (!dense.is_dense() && dense.format != WeightFormat::kGguf)
    return invalid_argument(dense.name + ": only dense weights can be quantized at load");
  const int64_t n = dense.n, k = dense.k;
  const std::vector<float> w = dequantize_matrix(dense);
  WeightMatrix m;
  m.name = dense.name;
  m.n = n;
  m.k = k;
  m.scheme = "online";
  WeightQuant& q = m.quant;
  switch (mode) {
    case OnlineQuant::kNone:
      return dense;
    case OnlineQuant::kFp8: {
      const Fp8Matrix f = quantize_fp8(w.data(), n, k, Fp8ScaleKind::kTensor);
      m.format = WeightFormat::kFp8;
      m.dtype = DType::kF8E4M3;
      m.data = own(f.codes.data(), f.codes.size(), DType::kF8E4M3, {n, k}, owned);
      q.bits = 8;
      q.granularity = ScaleGranularity::kTensor;
      q.scales = own(reinterpret_cast<const uint8_t*>(f.scales.data()), 4, DType::kF32, {1}, owned);
      break;
    }
    case OnlineQuant::kInt8: {
      IntQuantConfig c;
      c.bits = 8;
      c.group_size = -1;
      c.scale_dtype = DType::kF16;
      LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix iq, quantize_int_rtn(w.data(), n, k, c));
      std::vector<uint8_t> codes(iq.codes.size());
      for (size_t i = 0; i < codes.size(); ++i)  // unsigned code - 128: the signed int8 value
        codes[i] = static_cast<uint8_t>(static_cast<int8_t>(iq.codes[i] - 128));
      const std::vector<uint8_t> scales = float_bytes(iq.scales, "F16");
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI8;
      m.data = own(codes.data(), codes.size(), DType::kI8, {n, k}, owned);
      q.bits = 8;
      q.layout = IntLayout::kInt8Rows;
      q.granularity = ScaleGranularity::kChannel;
      q.scales = own(scales.data(), scales.size(), DType::kF16, {n, 1}, owned);
      break;
    }
    case OnlineQuant::kInt4: {
      IntQuantConfig c;
      c.bits = 4;
      c.group_size = k % kInt4GroupSize == 0 ? kInt4GroupSize : -1;
      c.scale_dtype = DType::kF16;
      LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix iq, quantize_int_rtn(w.data(), n, k, c));
      LATHE_ASSIGN_OR_RETURN(std::vector<PackedTensor> packed,
                             pack_ct_int_linear(dense.name, iq, "F16"));
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI32;
      q.bits = 4;
      q.layout = IntLayout::kCompressedTensors;
      q.granularity = c.group_size > 0 ? ScaleGranularity::kGroup : ScaleGranularity::kChannel;
      q.group_size = c.group_size > 0 ? static_cast<int32_t>(c.group_size) : 0;
      for (const PackedTensor& p : packed) {
        const std::vector<int64_t>& s = p.spec.shape;
        if (ends_with(p.spec.name, ".weight_packed"))
          m.data = own(p.data.data(), p.data.size(), DType::kI32, {s[0], s[1]}, owned);
        else if (ends_with(p.spec.name, ".weight_scale"))
          q.scales = own(p.data.data(), p.data.size(), DType::kF16, {s[0], s[1]}, owned);
      }
      break;
    }
  }
  LATHE_RETURN_IF_ERROR(validate_weight_matrix(m));
  return m;
}

}  // namespace lathe

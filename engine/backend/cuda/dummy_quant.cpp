#include "engine/backend/cuda/dummy_quant.h"

#include "engine/backend/cuda/random_fill.h"

namespace lathe::cuda {

WeightMatrix dummy_quant_matrix(OnlineQuant mode, const std::string& name, int64_t n, int64_t k) {
  WeightMatrix m;
  m.name = name;
  m.n = n;
  m.k = k;
  m.scheme = "dummy";
  WeightQuant& q = m.quant;
  switch (mode) {
    case OnlineQuant::kFp8:
      m.format = WeightFormat::kFp8;
      m.dtype = DType::kF8E4M3;
      q.bits = 8;
      q.granularity = ScaleGranularity::kTensor;
      q.scales.dtype = DType::kF32;
      break;
    case OnlineQuant::kInt8:
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI8;
      q.bits = 8;
      q.layout = IntLayout::kInt8Rows;
      q.granularity = ScaleGranularity::kChannel;
      q.scales.dtype = DType::kF16;
      break;
    default:  // kInt4 (kNone is never asked for)
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI32;
      q.bits = 4;
      q.layout = IntLayout::kCompressedTensors;
      q.granularity = k % 128 == 0 ? ScaleGranularity::kGroup : ScaleGranularity::kChannel;
      q.group_size = k % 128 == 0 ? 128 : 0;
      q.scales.dtype = DType::kF16;
      break;
  }
  return m;
}

Status fill_dummy_quant_part(const QuantPart& part, const RepackShape& s, uint64_t seed,
                             uint64_t stream_id, cudaStream_t stream) {
  // Codes: uniform over the format's values. int4 codes (zero 8) spread with std ~4.6 and int8
  // codes (zero 128) with std ~74; E4M3 bytes with bit 6 clear (exponents 0..7, no NaN) reach
  // +-1.875 with std ~0.6. The scale brings each to std ~0.02.
  const bool fp8 = part.format == WeightFormat::kFp8;
  const float scale = fp8 ? 0.03f : s.bits == 4 ? 0.0043f : 0.00027f;
  LATHE_RETURN_IF_ERROR(random_bytes(const_cast<void*>(part.data), s.data_bytes, fp8 ? 0xBF : 0xFF,
                                     seed, stream_id, stream));
  const int64_t scale_size = s.scale_dtype == DType::kF16 ? 2 : 4;
  return constant_fill(s.scale_dtype, const_cast<void*>(part.scales), s.scale_bytes / scale_size,
                       scale, stream);
}

}  // namespace lathe::cuda

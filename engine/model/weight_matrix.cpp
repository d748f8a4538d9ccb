#include "engine/model/weight_matrix.h"

#include "engine/core/strings.h"

namespace lathe {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kGguf:
      return "gguf";
    case WeightFormat::kInt:
      return "int";
    case WeightFormat::kFp8:
      return "fp8";
  }
  return "?";
}

int64_t WeightQuant::num_groups(int64_t k) const {
  return granularity == ScaleGranularity::kGroup && group_size > 0 ? k / group_size : 1;
}

int64_t WeightMatrix::bytes() const {
  // A part is present when it points at data (a 0-dim scalar scale has ndim 0).
  int64_t b = 0;
  for (const TensorView* t : {&data, &quant.scales, &quant.zeros, &quant.g_idx, &quant.input_scale})
    if (t->data != nullptr || t->ndim > 0) b += t->nbytes();
  return b;
}

std::string WeightMatrix::describe() const {
  switch (format) {
    case WeightFormat::kDense:
    case WeightFormat::kGguf:
      return std::string(dtype_name(dtype));
    case WeightFormat::kInt: {
      std::string s = strformat("int%d", quant.bits);
      if (quant.granularity == ScaleGranularity::kGroup && quant.group_size > 0)
        s += strformat(" g%d", quant.group_size);
      else if (quant.granularity == ScaleGranularity::kTensor)
        s += " per-tensor";
      else
        s += " per-channel";
      if (!quant.symmetric) s += " asym";
      if (quant.g_idx.ndim > 0) s += " act-order";
      return s;
    }
    case WeightFormat::kFp8:
      switch (quant.granularity) {
        case ScaleGranularity::kTensor:
          return "fp8 per-tensor";
        case ScaleGranularity::kChannel:
          return "fp8 per-channel";
        case ScaleGranularity::kBlock:
          return strformat("fp8 block %dx%d", quant.block_rows, quant.block_cols);
        default:
          return "fp8";
      }
  }
  return "?";
}

WeightMatrix plain_matrix(const std::string& name, const TensorView& t) {
  WeightMatrix m;
  m.name = name;
  m.format = is_quantized(t.dtype) ? WeightFormat::kGguf : WeightFormat::kDense;
  m.dtype = t.dtype;
  m.n = t.ndim == 2 ? t.shape[0] : 0;
  m.k = t.ndim == 2 ? t.shape[1] : 0;
  m.data = t;
  return m;
}

}  // namespace lathe

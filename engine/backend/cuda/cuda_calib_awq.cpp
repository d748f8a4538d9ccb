// AWQ's searches of CudaCalibOps (calib_ops.h's contract; the kernels in calib_awq.cu): the fake
// quantization of a weight tensor for the scale grid and the clip search, both on the device, so
// the AWQ block never takes its weights or activations back to the host but for the clip ranges.
#include <cuda_runtime.h>

#include "engine/backend/cuda/calib_awq.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/backend/cuda/cuda_calib_ops_impl.h"
#include "engine/core/strings.h"
#include "engine/quant/int_quant.h"

namespace lathe::cuda {

Status CudaCalibOps::awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                                       const IntQuantConfig& quant, CalibTensor& out) {
  if (!same_shape(w, out) || static_cast<int64_t>(s.size()) != w.cols())
    return invalid_argument(strformat("awq_fake_quantize: w %s into out %s with %zu scales",
                                      shape_text(w).c_str(), shape_text(out).c_str(), s.size()));
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(quant, w.cols()));
  if (w.size() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  LATHE_RETURN_IF_ERROR(upload_vec(s));
  return cuda::awq_fake_quantize(dev(w), vec_.as<float>(), w.rows(), w.cols(),
                                 effective_group_size(quant, w.cols()), calib_grid_of(quant),
                                 dev(out), stream_);
}

Result<std::vector<float>> CudaCalibOps::awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                                  const AwqConfig& c) {
  if (xs.cols() != w.cols())
    return invalid_argument(strformat("awq_clip: input rows %s for weights %s",
                                      shape_text(xs).c_str(), shape_text(w).c_str()));
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, w.cols()));
  if (xs.rows() <= 0) return invalid_argument("the AWQ clip search needs at least one input row");
  const int64_t g = effective_group_size(c.quant, w.cols());
  const int64_t n = w.rows() * (w.cols() / g);
  std::vector<float> best(static_cast<size_t>(n));
  if (n == 0) return best;
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  LATHE_RETURN_IF_ERROR(reserve({{&partial_, n * 4}}));
  LATHE_RETURN_IF_ERROR(cuda::awq_clip_search(
      dev(w), w.rows(), w.cols(), dev(xs), xs.rows(), g, calib_grid_of(c.quant), c.clip_grid,
      static_cast<int>(c.max_shrink * c.clip_grid), partial_.as<float>(), stream_));
  LATHE_RETURN_IF_ERROR(staging_.download(best.data(), partial_.buf.get(), n * 4, stream_));
  return best;
}

}  // namespace lathe::cuda

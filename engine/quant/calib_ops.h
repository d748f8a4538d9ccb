// Where the arithmetic of a calibrated quantization (calibrated_quantizer.h) runs, and where its
// activations live. The calibration forward of a block (calib_block.h) is a sequence of these ops
// on CalibTensors: norms, RoPE, the linears (the MLP's gate and up with their SwiGLU in one call),
// the causal attention over the calibration samples, residual adds; then the Hessians of the
// linears' inputs and GPTQ on each matrix. The activations never leave the implementation's
// memory between ops: on a GPU a whole block's forward runs without a copy over PCIe but the
// weights going up and the small results (Hessians, losses, sampled rows) coming down.
//
// Two implementations with one contract (the CPU one's):
//   - make_cpu_calib_ops(): host vectors, the CPU reference backend's float32 loops (cpu_ops.h),
//     gptq.h's column loop, on ThreadPool::global();
//   - the CUDA plugin's (cuda_backend::create_calib_ops(device), engine/runtime/cuda_plugin.h):
//     tensors in device memory, cuBLAS for the products, cuSOLVER for GPTQ's Cholesky
//     factorizations, its column loop in a kernel. Weights go up one matrix at a time, so a model
//     far larger than the GPU's memory quantizes block by block ("layer streaming"); the
//     activations of the calibration batch (about 10 x rows x hidden floats) must fit.
// The two agree up to float32 summation order (double sums: up to double rounding);
// test_cuda_calib_ops checks each op against the CPU one (GPTQ: the same codes but for values on a
// rounding boundary, the same loss to 1e-3).
//
// Host pointers are row-major and never read after the call returns. An op may run
// asynchronously: the results are there for the next op, and for the host after a call that
// returns host data (download, hessian, gptq, column_abs_mean, squared_difference) or sync().
// Not thread-safe: one quantization job owns one CalibOps; its tensors must not outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model_config.h"
#include "engine/quant/awq_search.h"
#include "engine/quant/gptq.h"

namespace lathe {

// Where each calibration sample's tokens sit in the batch (make_calib_layout, calib_block.h).
struct CalibLayout {
  std::vector<int64_t> start;      // S + 1 row offsets
  std::vector<int32_t> positions;  // per row: its position in its sample
  int64_t rows() const { return start.empty() ? 0 : start.back(); }
  int64_t num_samples() const { return start.empty() ? 0 : static_cast<int64_t>(start.size()) - 1; }
};

// A linear's weight [n, k] and bias [n] (empty: none), float32, on the host.
struct CalibLinear {
  std::vector<float> w;
  std::vector<float> bias;
  int64_t n = 0, k = 0;
};

// A float32 matrix [rows, cols], row-major, in the memory of the CalibOps that made it (alloc,
// gather_rows). Only that CalibOps reads or writes it.
class CalibTensor {
 public:
  virtual ~CalibTensor() = default;
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }

 protected:
  CalibTensor(int64_t rows, int64_t cols) : rows_(rows), cols_(cols) {}

 private:
  int64_t rows_, cols_;
};
using CalibTensorPtr = std::unique_ptr<CalibTensor>;

// The attention of one calibration batch: q [rows, num_heads * head_dim], k and v [rows,
// num_kv_heads * head_dim] (QK norm and RoPE already applied), causal within each sample of
// `layout` (rows of sample s: layout.start[s] .. start[s + 1]); query head h reads kv head
// h / (num_heads / num_kv_heads); scores scaled by 1 / sqrt(head_dim); sliding_window > 0: row i
// sees rows i - sliding_window + 1 .. i of its sample. out [rows, num_heads * head_dim].
struct CalibAttentionShape {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t sliding_window = 0;  // 0: none
};

class CalibOps {
 public:
  virtual ~CalibOps() = default;

  // Where the work runs, for logs and the progress line: "cpu (16 threads)", "cuda:0 NVIDIA H200".
  virtual std::string name() const = 0;

  // --- Tensors -----------------------------------------------------------------------------
  // A [rows, cols] tensor with unspecified contents. kResourceExhausted (CUDA) when it does not
  // fit, naming its size and the device's free memory.
  virtual Result<CalibTensorPtr> alloc(int64_t rows, int64_t cols) = 0;
  // t = host [t.rows(), t.cols()].
  virtual Status upload(const float* host, CalibTensor& t) = 0;
  // host [count, t.cols()] = rows row0 .. row0 + count of t (0 <= row0, row0 + count <= rows).
  virtual Status download(const CalibTensor& t, int64_t row0, int64_t count, float* host) = 0;
  // A new tensor [rows.size(), x.cols()] of x's rows in that order (each in [0, x.rows())).
  virtual Result<CalibTensorPtr> gather_rows(const CalibTensor& x,
                                             const std::vector<int64_t>& rows) = 0;
  // Waits for every op issued so far (profiling; errors of asynchronous work surface here or at
  // the next op).
  virtual Status sync() { return Status::ok(); }

  // --- The forward's elementwise ops (cpu_ops.h's definitions, float32) ------------------------
  // out = cpu::rms_norm of each run of `width` values of x (x.cols() % width == 0; weight [width]);
  // out has x's shape and may be x.
  virtual Status rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& weight,
                          float eps, CalibTensor& out) = 0;
  // cpu::rope's rotation of x [rows, heads * head_dim] in place with the angles' cos and sin
  // [rows, head_dim / 2] (cpu::rope_table's, so both implementations rotate by the same values;
  // the engine has no partial rotary: model_config_parse refuses it).
  virtual Status rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& cos_t,
                      const CalibTensor& sin_t, RopeStyle style) = 0;
  // x += y (same shape).
  virtual Status add(CalibTensor& x, const CalibTensor& y) = 0;
  // x[:, j] /= s[j] (s [x.cols()]).
  virtual Status divide_columns(CalibTensor& x, const std::vector<float>& s) = 0;

  // --- The heavy ops -----------------------------------------------------------------------
  // y [x.rows(), l.n] = x [rows, l.k] l.w^T + l.bias (bias empty: none); float32 products and sums.
  // y is allocated by the caller and is not x (the same holds for every op with an output but the
  // elementwise ones above).
  virtual Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) = 0;
  // The MLP's activation, the input of its down projection: m [rows, gate.n] = SiLU(x gate.w^T) *
  // (x up.w^T) for x [rows, gate.k] (each with its bias, if any; SiLU(g) = g / (1 + exp(-g)),
  // float32).
  virtual Status mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                         CalibTensor& m) = 0;
  // The causal attention above.
  virtual Status attention(const CalibLayout& layout, const CalibAttentionShape& shape,
                           const CalibTensor& q, const CalibTensor& k, const CalibTensor& v,
                           CalibTensor& out) = 0;
  // GPTQ's H = 2 X^T X / n of x's first n rows [n, k = x.cols()] as [k, k] row-major doubles:
  // float32 products over chunks of 1024 rows, the chunks summed in double. kInvalidArgument
  // naming the first non-finite row and feature ("calibration activations are not finite ...").
  virtual Result<std::vector<double>> hessian(const CalibTensor& x, int64_t n) = 0;
  // gptq_quantize (gptq.h): the same arguments, checks, fallbacks and result (host weights).
  virtual Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols,
                                  const std::vector<double>& h, const GptqConfig& config) = 0;

  // --- AWQ's searches (awq_search.h) on weights held as tensors [n, k] ---------------------
  // y [x.rows(), w.rows()] = x [rows, k] w^T (no bias).
  virtual Status linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) = 0;
  // out = awq_fake_quantize_scaled(w, s, quant): Q(W diag(s)) diag(s)^-1, out has w's shape.
  virtual Status awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                                   const IntQuantConfig& quant, CalibTensor& out) = 0;
  // awq_search_clip(w, xs): the clipping range per (row, group) of w [n, k] on the input rows
  // xs [tokens, k], [n, k / group] row-major.
  virtual Result<std::vector<float>> awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                              const AwqConfig& config) = 0;

  // --- Small reductions (results on the host) ----------------------------------------------
  // Per column j of x's first n rows: the mean of |x[r, j]| (summed in double over the rows in
  // order; AWQ's activation statistic, awq_activation_means).
  virtual Result<std::vector<float>> column_abs_mean(const CalibTensor& x, int64_t n) = 0;
  // sum over all values of (a - b)^2 in double (same shapes).
  virtual Result<double> squared_difference(const CalibTensor& a, const CalibTensor& b) = 0;

  // The most device memory this object has held at once, bytes (0 on the CPU).
  virtual int64_t peak_device_bytes() const { return 0; }
};

// The CPU implementation (never fails to create).
std::unique_ptr<CalibOps> make_cpu_calib_ops();

// Conveniences over any CalibOps.
// A new tensor holding host [rows, cols].
Result<CalibTensorPtr> calib_upload(CalibOps& ops, const float* host, int64_t rows, int64_t cols);
// The whole tensor on the host.
Result<std::vector<float>> calib_download(CalibOps& ops, const CalibTensor& t);

}  // namespace lathe

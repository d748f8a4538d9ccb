// CalibOps on one CUDA device (cuda_calib_ops.h; the contract is calib_ops.h's, the CPU one is the
// reference). Everything is enqueued on one stream, so ops run asynchronously in issue order; a
// call returns host data (download, hessian, gptq, column_abs_mean, squared_difference) after
// synchronizing, and sync() waits for the rest.
//
// Memory. A CalibTensor is a CudaCalibTensor (cuda_calib_ops_impl.h): one cudaMalloc of rows x
// cols float32, row-major, freed when the tensor is destroyed; a calibration batch's activations
// live there from the block's input to its output, so a block's forward copies nothing over PCIe
// but its weights (going up, one matrix at a time) and the small results (coming down). Besides
// the tensors the ops keep device buffers ("slots": the current weights, workspaces) between
// calls, grown on demand; when a slot cannot be grown, the slots the call does not need are
// released and it is tried once more, and a tensor that does not fit releases every slot before
// giving up (kResourceExhausted naming its shape, size and the device's free memory, and the
// flags that shrink the batch). peak_device_bytes() is the high-water mark of tensors + slots.
// Host <-> device copies (upload, download, weights, indices) go through two pinned staging
// buffers (calib_transfer.h).
//
//   elementwise  rms_norm, rope, add, divide_columns, gather_rows, column_abs_mean,
//                squared_difference: calib_elementwise.cu, float32 written as _rn intrinsics (the
//                host's uncontracted arithmetic), the double sums as tree / row-chunk reductions.
//   linear       the weight (and bias) uploaded into w_ (bias_), then one cuBLAS SGEMM from x's
//                memory into y's, float32 (CUBLAS_DEFAULT_MATH: no TF32), y preloaded with the
//                bias (calib_linear.cu). linear_t: the same product with the weight a tensor.
//   mlp_act      both weights uploaded once; gate's product straight into m, up's into a kept
//                buffer in pieces of rows (kLinearPieceBytes, halved while it does not fit), each
//                piece's SwiGLU (calib_linear.cu) in place into m's rows.
//   attention    calib_attention.cu on the q / k / v / out tensors, with each row's first row of
//                its sample uploaded per call.
//   hessian      chunks of 1024 rows (the CPU's) read from x's memory: float32 SGEMM panel
//                products X^T X[:, a0:a0+1024] summed into a float64 [k, k] on the device; first
//                non-finite index by atomicMin.
//   gptq         cuda_calib_gptq.cpp: host weights and Hessian in, as before.
#include "engine/backend/cuda/cuda_calib_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "engine/backend/cuda/calib_attention.h"
#include "engine/backend/cuda/calib_elementwise.h"
#include "engine/backend/cuda/calib_hessian.h"
#include "engine/backend/cuda/calib_linear.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/backend/cuda/cuda_calib_ops_impl.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/core/strings.h"

namespace lathe {
namespace cuda {
namespace {

constexpr int64_t kStagePieceBytes = 64ll << 20;    // each of the two pinned staging buffers
constexpr int64_t kLinearPieceBytes = 512ll << 20;  // mlp_act: up's output rows of one piece
constexpr int64_t kHessianChunkRows = 1024;         // calib_ops.cpp's chunk
constexpr int64_t kHessianPanel = 1024;             // rows of H per panel product

std::string bytes_text(int64_t b) {
  return format_bytes(static_cast<double>(b));
}

bool bad_linear(const CalibLinear& l) {
  return l.n < 0 || l.k < 0 || static_cast<int64_t>(l.w.size()) != l.n * l.k ||
         (!l.bias.empty() && static_cast<int64_t>(l.bias.size()) != l.n);
}

}  // namespace

CudaCalibOps::CudaCalibOps(int32_t device) : device_(device) {
  const std::pair<Slot*, const char*> slots[] = {{&w2_, "MLP up weights"},
                                                 {&bias2_, "MLP up bias"},
                                                 {&y2_, "MLP up output"},
                                                 {&w_, "linear weights"},
                                                 {&bias_, "linear bias"},
                                                 {&first_, "attention sample rows"},
                                                 {&vec_, "norm weights / column divisors"},
                                                 {&index_, "gathered row indices"},
                                                 {&partial_, "reduction partial sums"},
                                                 {&panel_, "Hessian panel"},
                                                 {&sum_, "Hessian sum"},
                                                 {&bad_, "non-finite index"},
                                                 {&ha_, "GPTQ Hessian"},
                                                 {&hb_, "GPTQ factor"},
                                                 {&wf_, "GPTQ float weights"},
                                                 {&wp_, "GPTQ weights"},
                                                 {&err_, "GPTQ errors"},
                                                 {&codes_p_, "GPTQ codes"},
                                                 {&codes_, "GPTQ codes (column order)"},
                                                 {&scales_, "GPTQ scales"},
                                                 {&zeros_, "GPTQ zero points"},
                                                 {&loss_, "GPTQ losses"},
                                                 {&perm_, "GPTQ permutation"},
                                                 {&dead_, "GPTQ dead columns"},
                                                 {&work_, "cuSOLVER workspace"},
                                                 {&info_, "cuSOLVER info"}};
  for (const auto& [slot, what] : slots) {
    slot->what = what;
    slots_.push_back(slot);
  }
}

CudaCalibOps::~CudaCalibOps() {
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (params_ != nullptr) cusolverDnDestroyParams(params_);
  if (solver_ != nullptr) cusolverDnDestroy(solver_);
  if (blas_ != nullptr) cublasDestroy(blas_);
  release_all();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaCalibOps::init() {
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  cudaDeviceProp p{};
  LATHE_CUDA_TRY(cudaGetDeviceProperties(&p, device_));
  name_ = strformat("cuda:%d %s", device_, p.name);
  LATHE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  LATHE_CUBLAS_TRY(cublasCreate(&blas_));
  LATHE_CUBLAS_TRY(cublasSetStream(blas_, stream_));
  // Plain float32 / float64 arithmetic (no TF32): the CPU reference is float32.
  LATHE_CUBLAS_TRY(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  LATHE_CUSOLVER_TRY(cusolverDnCreate(&solver_));
  LATHE_CUSOLVER_TRY(cusolverDnSetStream(solver_, stream_));
  LATHE_CUSOLVER_TRY(cusolverDnCreateParams(&params_));
  return staging_.init(kStagePieceBytes);
}

// --- Tensors -------------------------------------------------------------------------------------

Result<CalibTensorPtr> CudaCalibOps::alloc(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return invalid_argument(strformat("alloc: a tensor cannot have the shape [%lld, %lld]",
                                      static_cast<long long>(rows), static_cast<long long>(cols)));
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  auto exhausted = [&] {
    return resource_exhausted(
        strformat("a [%lld, %lld] calibration tensor (%s of float32) does not fit %s (%s): %s",
                  static_cast<long long>(rows), static_cast<long long>(cols),
                  format_bytes(4.0 * static_cast<double>(rows) * static_cast<double>(cols)).c_str(),
                  name_.c_str(), memory_text().c_str(), kCalibMemoryAdvice));
  };
  if (cols > 0 && rows > std::numeric_limits<int64_t>::max() / 4 / cols) return exhausted();
  const int64_t bytes = rows * cols * 4;
  DeviceBuffer buf;
  Status st = buf.allocate(bytes, "calibration tensor");
  if (st.code() == ErrorCode::kOutOfMemory) {  // the kept weights and workspaces go first
    release_all();
    st = buf.allocate(bytes, "calibration tensor");
  }
  if (st.code() == ErrorCode::kOutOfMemory) return exhausted();
  LATHE_RETURN_IF_ERROR(st);
  note_held(buf.bytes());
  return CalibTensorPtr(
      std::make_unique<CudaCalibTensor>(rows, cols, std::move(buf), device_, &held_));
}

Status CudaCalibOps::upload(const float* host, CalibTensor& t) {
  if (t.size() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  return staging_.upload(dev(t), host, t.size() * 4, stream_);
}

Status CudaCalibOps::download(const CalibTensor& t, int64_t row0, int64_t count, float* host) {
  if (row0 < 0 || count < 0 || row0 + count > t.rows())
    return invalid_argument(strformat("download: rows %lld .. %lld of a %s tensor",
                                      static_cast<long long>(row0),
                                      static_cast<long long>(row0 + count), shape_text(t).c_str()));
  if (count == 0 || t.cols() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  return staging_.download(host, dev(t) + row0 * t.cols(), count * t.cols() * 4, stream_);
}

Result<CalibTensorPtr> CudaCalibOps::gather_rows(const CalibTensor& x,
                                                 const std::vector<int64_t>& rows) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= x.rows())
      return invalid_argument(strformat("gather_rows: row %lld (entry %zu) of a %s tensor",
                                        static_cast<long long>(rows[i]), i, shape_text(x).c_str()));
  const int64_t count = static_cast<int64_t>(rows.size());
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr out, alloc(count, x.cols()));
  if (out->size() == 0) return out;
  LATHE_RETURN_IF_ERROR(reserve({{&index_, count * 8}}));
  LATHE_RETURN_IF_ERROR(staging_.upload(index_.buf.get(), rows.data(), count * 8, stream_));
  LATHE_RETURN_IF_ERROR(
      calib_gather_rows(dev(x), index_.as<int64_t>(), count, x.cols(), dev(*out), stream_));
  return out;
}

Status CudaCalibOps::sync() {
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}

// --- Elementwise ---------------------------------------------------------------------------------

Status CudaCalibOps::rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& weight,
                              float eps, CalibTensor& out) {
  if (width <= 0 || x.cols() % width != 0 || static_cast<int64_t>(weight.size()) != width ||
      !same_shape(x, out))
    return invalid_argument(strformat(
        "rms_norm: x %s in runs of %lld values with %zu weights into out %s", shape_text(x).c_str(),
        static_cast<long long>(width), weight.size(), shape_text(out).c_str()));
  if (x.size() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  LATHE_RETURN_IF_ERROR(upload_vec(weight));
  return calib_rms_norm(dev(x), vec_.as<float>(), x.size() / width, width, eps, dev(out), stream_);
}

Status CudaCalibOps::rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& cos_t,
                          const CalibTensor& sin_t, RopeStyle style) {
  const int64_t half = cos_t.cols();  // head_dim / 2 (the engine has no partial rotary)
  if (heads < 0 || head_dim <= 0 || x.cols() != heads * head_dim || cos_t.rows() != x.rows() ||
      !same_shape(cos_t, sin_t) || 2 * half != head_dim)
    return invalid_argument(strformat(
        "rope: x %s as %lld heads of %lld with cos %s and sin %s (want [%lld, %lld] each)",
        shape_text(x).c_str(), static_cast<long long>(heads), static_cast<long long>(head_dim),
        shape_text(cos_t).c_str(), shape_text(sin_t).c_str(), static_cast<long long>(x.rows()),
        static_cast<long long>(head_dim / 2)));
  if (x.size() == 0 || half == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  return calib_rope(dev(x), dev(cos_t), dev(sin_t), x.rows(), heads, head_dim, half,
                    style == RopeStyle::kInterleaved, stream_);
}

Status CudaCalibOps::add(CalibTensor& x, const CalibTensor& y) {
  if (!same_shape(x, y))
    return invalid_argument(strformat("add: x %s and y %s differ in shape", shape_text(x).c_str(),
                                      shape_text(y).c_str()));
  if (x.size() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  return calib_add(dev(x), dev(y), x.size(), stream_);
}

Status CudaCalibOps::divide_columns(CalibTensor& x, const std::vector<float>& s) {
  if (static_cast<int64_t>(s.size()) != x.cols())
    return invalid_argument(
        strformat("divide_columns: %zu divisors for x %s", s.size(), shape_text(x).c_str()));
  if (x.size() == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  LATHE_RETURN_IF_ERROR(upload_vec(s));
  return calib_divide_columns(dev(x), vec_.as<float>(), x.rows(), x.cols(), stream_);
}

// --- Linears -------------------------------------------------------------------------------------

Status CudaCalibOps::rows_times(const float* x, const float* w, const float* bias, int64_t n,
                                int64_t k, int64_t m, float* y) {
  if (bias != nullptr) LATHE_RETURN_IF_ERROR(calib_broadcast_bias(y, bias, m, n, stream_));
  const float one = 1.f, beta = bias != nullptr ? 1.f : 0.f;
  // Column-major view: y^T [n, m] = W [n, k] (the row-major [n, k] read transposed) x^T [k, m].
  // The 64-bit API: x and y may hold more than 2^31 values.
  LATHE_CUBLAS_TRY(
      cublasSgemm_64(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, x, k, &beta, y, n));
  return Status();
}

Status CudaCalibOps::linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) {
  const int64_t n = l.n, k = l.k, rows = x.rows();
  if (bad_linear(l))
    return invalid_argument(
        strformat("linear: the weight has %zu values and the bias %zu for a [%lld, %lld] linear",
                  l.w.size(), l.bias.size(), static_cast<long long>(n), static_cast<long long>(k)));
  if (x.cols() != k || y.rows() != rows || y.cols() != n || &x == &y)
    return invalid_argument(strformat(
        "linear: a [%lld, %lld] linear takes x [rows, %lld] into another tensor [rows, %lld]; got "
        "x %s and y %s",
        static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(k),
        static_cast<long long>(n), shape_text(x).c_str(), shape_text(y).c_str()));
  if (rows == 0 || n == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  const bool has_bias = !l.bias.empty();
  const int64_t w_bytes = n * k * 4;
  const Status st = reserve({{&w_, w_bytes}, {&bias_, has_bias ? n * 4 : 0}});
  if (!st.is_ok())
    return Status(st.code(), strformat("a [%lld, %lld] linear (%s of weights): %s",
                                       static_cast<long long>(n), static_cast<long long>(k),
                                       bytes_text(w_bytes).c_str(), st.message().c_str()));
  if (has_bias)
    LATHE_RETURN_IF_ERROR(staging_.upload(bias_.buf.get(), l.bias.data(), n * 4, stream_));
  if (k == 0) {  // empty dot products: the bias alone
    if (has_bias) return calib_broadcast_bias(dev(y), bias_.as<float>(), rows, n, stream_);
    LATHE_CUDA_TRY(cudaMemsetAsync(dev(y), 0, static_cast<size_t>(rows * n * 4), stream_));
    return Status();
  }
  LATHE_RETURN_IF_ERROR(staging_.upload(w_.buf.get(), l.w.data(), w_bytes, stream_));
  return rows_times(dev(x), w_.as<float>(), has_bias ? bias_.as<float>() : nullptr, n, k, rows,
                    dev(y));
}

Status CudaCalibOps::linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) {
  const int64_t rows = x.rows(), n = w.rows(), k = w.cols();
  if (x.cols() != k || y.rows() != rows || y.cols() != n || &y == &x || &y == &w)
    return invalid_argument(
        strformat("linear_t: x %s times w %s transposed into another tensor [%lld, %lld]; got y %s",
                  shape_text(x).c_str(), shape_text(w).c_str(), static_cast<long long>(rows),
                  static_cast<long long>(n), shape_text(y).c_str()));
  if (rows == 0 || n == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  if (k == 0) {  // empty dot products
    LATHE_CUDA_TRY(cudaMemsetAsync(dev(y), 0, static_cast<size_t>(rows * n * 4), stream_));
    return Status();
  }
  return rows_times(dev(x), dev(w), nullptr, n, k, rows, dev(y));
}

Status CudaCalibOps::mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                             CalibTensor& m) {
  const int64_t ff = gate.n, k = gate.k, rows = x.rows();
  if (up.n != ff || up.k != k || k <= 0 || bad_linear(gate) || bad_linear(up))
    return invalid_argument(strformat(
        "mlp_act: gate [%lld, %lld] (%zu weights) and up [%lld, %lld] (%zu weights) are not two "
        "linears of one MLP",
        static_cast<long long>(gate.n), static_cast<long long>(gate.k), gate.w.size(),
        static_cast<long long>(up.n), static_cast<long long>(up.k), up.w.size()));
  if (x.cols() != k || m.rows() != rows || m.cols() != ff || &x == &m)
    return invalid_argument(strformat(
        "mlp_act: an MLP of [%lld, %lld] gate and up takes x [rows, %lld] into another tensor "
        "[rows, %lld]; got x %s and m %s",
        static_cast<long long>(ff), static_cast<long long>(k), static_cast<long long>(k),
        static_cast<long long>(ff), shape_text(x).c_str(), shape_text(m).c_str()));
  if (rows == 0 || ff == 0) return Status();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  // Both weights and up's output for a piece of rows; the piece halves while they do not fit.
  const int64_t w_bytes = ff * k * 4;
  int64_t piece = std::max<int64_t>(1, plan_chunk_rows(rows, ff * 4, kLinearPieceBytes));
  for (;;) {
    const Status st = reserve({{&w_, w_bytes},
                               {&w2_, w_bytes},
                               {&bias_, gate.bias.empty() ? 0 : ff * 4},
                               {&bias2_, up.bias.empty() ? 0 : ff * 4},
                               {&y2_, piece * ff * 4}});
    if (st.is_ok()) break;
    if (st.code() != ErrorCode::kResourceExhausted) return st;
    if (piece == 1)
      return resource_exhausted(strformat(
          "an MLP of [%lld, %lld] gate and up does not fit %s beside the calibration tensors: "
          "their weights take %s and each row of up's output %s; %s. Free the GPU of other "
          "processes, or %s",
          static_cast<long long>(ff), static_cast<long long>(k), name_.c_str(),
          bytes_text(2 * w_bytes).c_str(), bytes_text(ff * 4).c_str(), memory_text().c_str(),
          kCalibMemoryAdvice));
    piece = std::max<int64_t>(1, piece / 2);
  }
  LATHE_RETURN_IF_ERROR(staging_.upload(w_.buf.get(), gate.w.data(), w_bytes, stream_));
  LATHE_RETURN_IF_ERROR(staging_.upload(w2_.buf.get(), up.w.data(), w_bytes, stream_));
  if (!gate.bias.empty())
    LATHE_RETURN_IF_ERROR(staging_.upload(bias_.buf.get(), gate.bias.data(), ff * 4, stream_));
  if (!up.bias.empty())
    LATHE_RETURN_IF_ERROR(staging_.upload(bias2_.buf.get(), up.bias.data(), ff * 4, stream_));
  float* g = dev(m);
  LATHE_RETURN_IF_ERROR(rows_times(
      dev(x), w_.as<float>(), gate.bias.empty() ? nullptr : bias_.as<float>(), ff, k, rows, g));
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const int64_t n = std::min(piece, rows - r0);
    LATHE_RETURN_IF_ERROR(rows_times(dev(x) + r0 * k, w2_.as<float>(),
                                     up.bias.empty() ? nullptr : bias2_.as<float>(), ff, k, n,
                                     y2_.as<float>()));
    LATHE_RETURN_IF_ERROR(calib_swiglu(g + r0 * ff, y2_.as<float>(), n * ff, stream_));
  }
  return Status();
}

// --- Attention, Hessian
// ----------------------------------------------------------------------------

Status CudaCalibOps::attention(const CalibLayout& layout, const CalibAttentionShape& s,
                               const CalibTensor& q, const CalibTensor& k, const CalibTensor& v,
                               CalibTensor& out) {
  const int64_t nh = s.num_heads, nkv = s.num_kv_heads, hd = s.head_dim;
  if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || hd <= 0)
    return invalid_argument(strformat(
        "attention: %lld query heads, %lld kv heads and head_dim %lld do not make a GQA shape",
        static_cast<long long>(nh), static_cast<long long>(nkv), static_cast<long long>(hd)));
  if (hd > kCalibAttentionMaxHeadDim)
    return unsupported(
        strformat("the CUDA calibration attention takes head_dim up to %lld, this model has %lld; "
                  "calibrate on the CPU (--device cpu)",
                  static_cast<long long>(kCalibAttentionMaxHeadDim), static_cast<long long>(hd)));
  const int64_t rows = layout.rows(), samples = layout.num_samples();
  bool layout_ok = layout.start.empty() || layout.start.front() == 0;
  for (int64_t i = 0; layout_ok && i < samples; ++i)
    layout_ok = layout.start[static_cast<size_t>(i)] <= layout.start[static_cast<size_t>(i) + 1];
  if (!layout_ok || q.rows() != rows || q.cols() != nh * hd || k.rows() != rows ||
      k.cols() != nkv * hd || !same_shape(k, v) || !same_shape(q, out))
    return invalid_argument(strformat(
        "attention: a layout of %lld rows in %lld samples (offsets %s) with %lld / %lld heads of "
        "%lld got q %s, k %s, v %s and out %s",
        static_cast<long long>(rows), static_cast<long long>(samples),
        layout_ok ? "ascending" : "not ascending from 0", static_cast<long long>(nh),
        static_cast<long long>(nkv), static_cast<long long>(hd), shape_text(q).c_str(),
        shape_text(k).c_str(), shape_text(v).c_str(), shape_text(out).c_str()));
  if (rows == 0) return Status();
  if (rows > std::numeric_limits<int32_t>::max())
    return unsupported(
        strformat("the CUDA calibration attention takes up to 2^31 - 1 rows, got "
                  "%lld; %s",
                  static_cast<long long>(rows), kCalibMemoryAdvice));
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  std::vector<int32_t> first(static_cast<size_t>(rows));
  for (int64_t smp = 0; smp < samples; ++smp) {
    const int64_t a = layout.start[static_cast<size_t>(smp)];
    const int64_t e = layout.start[static_cast<size_t>(smp) + 1];
    std::fill(first.begin() + a, first.begin() + e, static_cast<int32_t>(a));
  }
  LATHE_RETURN_IF_ERROR(reserve({{&first_, rows * 4}}));
  LATHE_RETURN_IF_ERROR(staging_.upload(first_.buf.get(), first.data(), rows * 4, stream_));
  CalibAttentionArgs a;
  a.q = dev(q);
  a.k = dev(k);
  a.v = dev(v);
  a.out = dev(out);
  a.sample_first = first_.as<int32_t>();
  a.rows = rows;
  a.num_heads = static_cast<int32_t>(nh);
  a.num_kv_heads = static_cast<int32_t>(nkv);
  a.head_dim = static_cast<int32_t>(hd);
  a.window = s.sliding_window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  return calib_attention(a, stream_);
}

Result<std::vector<double>> CudaCalibOps::hessian(const CalibTensor& x, int64_t n) {
  const int64_t k = x.cols();
  if (n < 0 || n > x.rows())
    return invalid_argument(strformat("hessian: the first %lld rows of x %s",
                                      static_cast<long long>(n), shape_text(x).c_str()));
  if (k <= 0) return std::vector<double>();
  if (n == 0) return std::vector<double>(static_cast<size_t>(k * k), 0.0);
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  const int64_t panel = std::min(k, kHessianPanel);
  LATHE_RETURN_IF_ERROR(reserve({{&panel_, panel * k * 4}, {&sum_, k * k * 8}, {&bad_, 8}}));
  double* sum = sum_.as<double>();
  auto* bad = bad_.as<unsigned long long>();
  LATHE_CUDA_TRY(cudaMemsetAsync(sum, 0, static_cast<size_t>(k * k * 8), stream_));
  LATHE_CUDA_TRY(cudaMemsetAsync(bad, 0xFF, 8, stream_));
  LATHE_RETURN_IF_ERROR(calib_first_non_finite(dev(x), n * k, 0, bad, stream_));
  const float one = 1.f, zero = 0.f;
  for (int64_t r0 = 0; r0 < n; r0 += kHessianChunkRows) {
    const int64_t m = std::min(kHessianChunkRows, n - r0);
    const float* chunk = dev(x) + r0 * k;
    for (int64_t a0 = 0; a0 < k; a0 += kHessianPanel) {
      const int64_t ta = std::min(kHessianPanel, k - a0), nb = a0 + ta;
      // Column-major: panel [nb, ta] = X^T[0:nb, :] (the chunk [m, k] read as [k, m]) times
      // X[:, a0:a0+ta]: panel(c, r) = sum over the chunk's rows of x[., c] x[., a0 + r].
      LATHE_CUBLAS_TRY(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(nb),
                                   static_cast<int>(ta), static_cast<int>(m), &one, chunk,
                                   static_cast<int>(k), chunk + a0, static_cast<int>(k), &zero,
                                   panel_.as<float>(), static_cast<int>(nb)));
      LATHE_RETURN_IF_ERROR(
          hessian_accumulate_panel(sum, panel_.as<float>(), k, a0, ta, nb, stream_));
    }
  }
  unsigned long long first_bad = 0;
  LATHE_CUDA_TRY(cudaMemcpyAsync(&first_bad, bad, 8, cudaMemcpyDeviceToHost, stream_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (first_bad != ~0ull)
    return invalid_argument(strformat(
        "calibration activations are not finite (row %lld, feature %lld): the source weights "
        "overflow on this text",
        static_cast<long long>(first_bad / static_cast<unsigned long long>(k)),
        static_cast<long long>(first_bad % static_cast<unsigned long long>(k))));
  LATHE_RETURN_IF_ERROR(hessian_finish(sum, k, 2.0 / static_cast<double>(n), stream_));
  std::vector<double> out(static_cast<size_t>(k * k));
  LATHE_RETURN_IF_ERROR(staging_.download(out.data(), sum, k * k * 8, stream_));
  return out;
}

// --- Small reductions ----------------------------------------------------------------------------

Result<std::vector<float>> CudaCalibOps::column_abs_mean(const CalibTensor& x, int64_t n) {
  if (n < 0 || n > x.rows())
    return invalid_argument(strformat("column_abs_mean: the first %lld rows of x %s",
                                      static_cast<long long>(n), shape_text(x).c_str()));
  const int64_t cols = x.cols();
  if (cols == 0) return std::vector<float>();
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  const int64_t parts = calib_column_abs_mean_workspace(n, cols);
  LATHE_RETURN_IF_ERROR(reserve({{&partial_, parts * 8 + cols * 4}}));
  double* partial = partial_.as<double>();
  float* means = reinterpret_cast<float*>(partial + parts);
  LATHE_RETURN_IF_ERROR(calib_column_abs_mean(dev(x), n, cols, partial, means, stream_));
  std::vector<float> out(static_cast<size_t>(cols));
  LATHE_RETURN_IF_ERROR(staging_.download(out.data(), means, cols * 4, stream_));
  return out;
}

Result<double> CudaCalibOps::squared_difference(const CalibTensor& a, const CalibTensor& b) {
  if (!same_shape(a, b))
    return invalid_argument(strformat("squared_difference: a %s and b %s differ in shape",
                                      shape_text(a).c_str(), shape_text(b).c_str()));
  if (a.size() == 0) return 0.0;
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  const int64_t blocks = calib_squared_difference_blocks(a.size());
  LATHE_RETURN_IF_ERROR(reserve({{&partial_, blocks * 8}}));
  LATHE_RETURN_IF_ERROR(
      calib_squared_difference(dev(a), dev(b), a.size(), partial_.as<double>(), stream_));
  std::vector<double> parts(static_cast<size_t>(blocks));
  LATHE_RETURN_IF_ERROR(staging_.download(parts.data(), partial_.buf.get(), blocks * 8, stream_));
  double total = 0.0;
  for (double p : parts) total += p;
  return total;
}

// --- Device memory -------------------------------------------------------------------------------

Status CudaCalibOps::upload_vec(const std::vector<float>& v) {
  const int64_t bytes = static_cast<int64_t>(v.size()) * 4;
  LATHE_RETURN_IF_ERROR(reserve({{&vec_, bytes}}));
  return staging_.upload(vec_.buf.get(), v.data(), bytes, stream_);
}

std::string CudaCalibOps::memory_text() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return "its free memory is unknown";
  }
  return strformat("%s of %s are free", bytes_text(static_cast<int64_t>(free_b)).c_str(),
                   bytes_text(static_cast<int64_t>(total_b)).c_str());
}

Status CudaCalibOps::grow(Slot& s, int64_t bytes) {
  if (s.buf.bytes() >= bytes) return Status();
  release(s);
  LATHE_RETURN_IF_ERROR(s.buf.allocate(bytes, s.what));
  note_held(s.buf.bytes());
  return Status();
}

Status CudaCalibOps::reserve(const std::vector<std::pair<Slot*, int64_t>>& needs) {
  Status st;
  const Slot* failed = nullptr;
  for (int attempt = 0; attempt < 2; ++attempt) {
    st = Status();
    for (const auto& [slot, bytes] : needs) {
      st = grow(*slot, bytes);
      if (!st.is_ok()) {
        failed = slot;
        break;
      }
    }
    if (st.is_ok()) return st;
    if (st.code() != ErrorCode::kOutOfMemory) return st;
    for (Slot* s : slots_) {
      bool needed = false;
      for (const auto& need : needs) needed |= need.first == s;
      if (!needed) release(*s);
    }
  }
  int64_t total = 0, failed_bytes = 0;
  for (const auto& need : needs) {
    total += need.second;
    if (need.first == failed) failed_bytes = need.second;
  }
  return resource_exhausted(strformat(
      "%s cannot hold this step's buffers beside the calibration tensors (%s in all, %s of them "
      "for the %s; %s). Free the GPU of other processes, or %s",
      name_.c_str(), bytes_text(total).c_str(), bytes_text(failed_bytes).c_str(),
      failed != nullptr ? failed->what : "?", memory_text().c_str(), kCalibMemoryAdvice));
}

}  // namespace cuda

Result<std::unique_ptr<CalibOps>> create_cuda_calib_ops(int32_t device) {
  std::string why;
  if (!cuda_device_usable(device, &why))
    return unsupported(
        strformat("CUDA device %d cannot run the calibration: %s", device, why.c_str()));
  auto ops = std::make_unique<cuda::CudaCalibOps>(device);
  LATHE_RETURN_IF_ERROR(ops->init());
  return std::unique_ptr<CalibOps>(std::move(ops));
}

}  // namespace lathe

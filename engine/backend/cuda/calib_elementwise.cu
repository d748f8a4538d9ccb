#include "engine/backend/cuda/calib_elementwise.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 1 << 20;
constexpr int64_t kMaxReduceBlocks = 1024;         // squared_difference's partial sums
constexpr int64_t kColumnThreadsTarget = 1 << 20;  // column_abs_mean: columns x row chunks
constexpr int64_t kColumnMinChunkRows = 32;

unsigned blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(n, per_block), 1, kMaxBlocks));
}

// Columns in x (blocks of kThreads), rows in y.
dim3 grid_rows_cols(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>(std::clamp<int64_t>(ceil_div(cols, kThreads), 1, 4096)),
              static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535)));
}

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int64_t runs,
                                int64_t width, float eps, float* out) {
  const int lane = threadIdx.x & 31;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t run = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); run < runs;
       run += step) {  // warp-uniform
    const float* xr = x + run * width;
    float* o = out + run * width;
    double ss = 0.0;
    for (int64_t e = lane; e < width; e += 32) {
      const double v = static_cast<double>(xr[e]);
      ss = __dadd_rn(ss, __dmul_rn(v, v));  // exact product, as the CPU's double(x) * double(x)
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)  // every lane ends with the same (commutative) sum
      ss = __dadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, off));
    const float inv = __double2float_rn(
        __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(ss, static_cast<double>(width)),
                                            static_cast<double>(eps)))));
    for (int64_t e = lane; e < width; e += 32) o[e] = __fmul_rn(__fmul_rn(xr[e], inv), w[e]);
  }
}

__global__ void rope_kernel(float* __restrict__ x, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, int64_t rows, int64_t heads,
                            int64_t head_dim, int64_t half, bool interleaved) {
  const int64_t total = rows * heads * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half, rh = idx / half, row = rh / heads;
    float* v = x + rh * head_dim;
    const int64_t a = interleaved ? 2 * i : i;
    const int64_t b = interleaved ? 2 * i + 1 : i + half;
    const float c = cos_t[row * half + i], s = sin_t[row * half + i];
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[b] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = __fadd_rn(x[i], y[i]);
}

__global__ void divide_columns_kernel(float* __restrict__ x, const float* __restrict__ s,
                                      int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
      x[r * cols + c] = __fdiv_rn(x[r * cols + c], s[c]);
}

// partial[chunk][j] = sum over rows chunk * per .. min(n, (chunk + 1) * per) - 1 of |x[r][j]|.
__global__ void column_abs_partial_kernel(const float* __restrict__ x, int64_t n, int64_t cols,
                                          int64_t chunks, int64_t per,
                                          double* __restrict__ partial) {
  for (int64_t ch = blockIdx.y; ch < chunks; ch += gridDim.y) {
    const int64_t r0 = ch * per, r1 = r0 + per < n ? r0 + per : n;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      double s = 0.0;
      for (int64_t r = r0; r < r1; ++r)
        s = __dadd_rn(s, static_cast<double>(fabsf(x[r * cols + j])));
      partial[ch * cols + j] = s;
    }
  }
}

__global__ void column_abs_finish_kernel(const double* __restrict__ partial, int64_t chunks,
                                         int64_t cols, double divisor, float* __restrict__ out) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0;
    for (int64_t ch = 0; ch < chunks; ++ch) s = __dadd_rn(s, partial[ch * cols + j]);
    out[j] = __double2float_rn(__ddiv_rn(s, divisor));
  }
}

__global__ void squared_difference_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          int64_t count, double* __restrict__ partial) {
  __shared__ double sums[kThreads];
  double acc = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = __dsub_rn(static_cast<double>(a[i]), static_cast<double>(b[i]));
    acc = __dadd_rn(acc, __dmul_rn(d, d));
  }
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half)
      sums[threadIdx.x] = __dadd_rn(sums[threadIdx.x], sums[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int64_t* __restrict__ rows,
                                   int64_t count, int64_t cols, float* __restrict__ out) {
  for (int64_t r = blockIdx.y; r < count; r += gridDim.y) {
    const float* src = x + rows[r] * cols;
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
      out[r * cols + c] = src[c];
  }
}

// column_abs_mean's row chunks: enough columns x chunks to fill the GPU, chunks of at least
// kColumnMinChunkRows rows; at least one chunk (n == 0: one empty chunk).
void column_chunks(int64_t n, int64_t cols, int64_t* chunks, int64_t* per) {
  const int64_t want =
      std::clamp<int64_t>(ceil_div(kColumnThreadsTarget, std::max<int64_t>(cols, 1)), 1,
                          std::max<int64_t>(1, ceil_div(n, kColumnMinChunkRows)));
  *per = std::max<int64_t>(1, ceil_div(n, want));
  *chunks = std::max<int64_t>(1, ceil_div(n, *per));
}

}  // namespace

Status calib_rms_norm(const float* x, const float* weight, int64_t runs, int64_t width, float eps,
                      float* out, cudaStream_t stream) {
  if (runs <= 0 || width <= 0) return Status();
  rms_norm_kernel<<<blocks_for(runs, kWarps), kThreads, 0, stream>>>(x, weight, runs, width, eps,
                                                                     out);
  return check_launch("rms_norm_kernel");
}

Status calib_rope(float* x, const float* cos_t, const float* sin_t, int64_t rows, int64_t heads,
                  int64_t head_dim, int64_t half, bool interleaved, cudaStream_t stream) {
  if (rows <= 0 || heads <= 0 || half <= 0) return Status();
  rope_kernel<<<blocks_for(rows * heads * half, kThreads), kThreads, 0, stream>>>(
      x, cos_t, sin_t, rows, heads, head_dim, half, interleaved);
  return check_launch("rope_kernel");
}

Status calib_add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status();
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
  return check_launch("add_kernel");
}

Status calib_divide_columns(float* x, const float* s, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status();
  divide_columns_kernel<<<grid_rows_cols(rows, cols), kThreads, 0, stream>>>(x, s, rows, cols);
  return check_launch("divide_columns_kernel");
}

int64_t calib_column_abs_mean_workspace(int64_t n, int64_t cols) {
  int64_t chunks = 0, per = 0;
  column_chunks(n, cols, &chunks, &per);
  return chunks * std::max<int64_t>(cols, 0);
}

Status calib_column_abs_mean(const float* x, int64_t n, int64_t cols, double* partial, float* out,
                             cudaStream_t stream) {
  if (cols <= 0) return Status();
  int64_t chunks = 0, per = 0;
  column_chunks(n, cols, &chunks, &per);
  column_abs_partial_kernel<<<grid_rows_cols(chunks, cols), kThreads, 0, stream>>>(
      x, std::max<int64_t>(n, 0), cols, chunks, per, partial);
  LATHE_RETURN_IF_ERROR(check_launch("column_abs_partial_kernel"));
  const double divisor = static_cast<double>(std::max<int64_t>(n, 1));
  column_abs_finish_kernel<<<blocks_for(cols, kThreads), kThreads, 0, stream>>>(partial, chunks,
                                                                                cols, divisor, out);
  return check_launch("column_abs_finish_kernel");
}

int64_t calib_squared_difference_blocks(int64_t count) {
  return std::clamp<int64_t>(ceil_div(std::max<int64_t>(count, 0), kThreads), 1, kMaxReduceBlocks);
}

Status calib_squared_difference(const float* a, const float* b, int64_t count, double* partial,
                                cudaStream_t stream) {
  const int64_t blocks = calib_squared_difference_blocks(count);
  squared_difference_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      a, b, std::max<int64_t>(count, 0), partial);
  return check_launch("squared_difference_kernel");
}

Status calib_gather_rows(const float* x, const int64_t* rows, int64_t count, int64_t cols,
                         float* out, cudaStream_t stream) {
  if (count <= 0 || cols <= 0) return Status();
  gather_rows_kernel<<<grid_rows_cols(count, cols), kThreads, 0, stream>>>(x, rows, count, cols,
                                                                           out);
  return check_launch("gather_rows_kernel");
}

}  // namespace lathe::cuda

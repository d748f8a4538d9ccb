// lathe_gpu_bounds: the two ceilings every Lathe GPU figure is reported against, measured in the
// same run (docs/gpu-notes.md, METHOD.md): device-to-device copy bandwidth (bytes read + bytes
// written per second) and the BF16 GEMM rate of a large cuBLASLt matmul on random data. Then the
// decode-shaped matmuls of a model (M = 1..8): Lathe's gemv, its decode_gemv (M <= 4, plain input,
// the better of 1 and 2 blocks per multiprocessor) and cuBLASLt, as achieved bandwidth, with
// weights rotated through a pool several times the L2 size so that no run is served from the
// cache. Each run is timed alone (events around one launch), so the figures include a launch's
// fixed cost; inside a decode step the kernels overlap their neighbours (PDL).
//
//   lathe_gpu_bounds [--device N] [--copy-gib 4] [--gemm-size 8192] [--shapes llama-3.1-8b]
// Prints "bound.<name> <value>" lines (machine-readable) and a table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/random_fill.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

[[noreturn]] void die(const Status& s) {
  std::fprintf(stderr, "lathe_gpu_bounds: %s\n", s.message().c_str());
  std::exit(1);
}
void check(const Status& s) {
  if (!s.is_ok()) die(s);
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(cuda_error(e, what));
}

// Median time in ms of `reps` runs of fn (each timed with events), after `warmup` runs.
template <typename Fn>
double median_ms(Fn&& fn, int warmup, int reps) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) fn(i);
  check(cudaDeviceSynchronize(), "warmup");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "cudaEventRecord");
    fn(warmup + i);
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Shape {
  const char* name;
  int64_t n, k;
};

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  double copy_gib = 4.0;
  int64_t gemm = 8192;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die(invalid_argument(a + " needs a value"));
      return argv[++i];
    };
    if (a == "--device")
      device = std::atoi(next());
    else if (a == "--copy-gib")
      copy_gib = std::atof(next());
    else if (a == "--gemm-size")
      gemm = std::atoll(next());
    else if (a == "--help" || a == "-h") {
      std::printf("usage: lathe_gpu_bounds [--device N] [--copy-gib G] [--gemm-size N]\n");
      return 0;
    } else {
      die(invalid_argument("unknown option " + a));
    }
  }
  std::string why;
  if (!cuda_device_usable(device, &why)) die(unsupported("no usable GPU: " + why));
  check(cudaSetDevice(device), "cudaSetDevice");
  std::printf("device: %s\n", cuda_device_description(device).c_str());
  auto props = device_props(device);
  check(props.status());

  // 1. Device-to-device copy: bytes read + bytes written.
  const int64_t bytes = static_cast<int64_t>(copy_gib * (1 << 30)) / 256 * 256;
  DeviceBuffer src, dst;
  check(src.allocate(bytes, "copy source"));
  check(dst.allocate(bytes, "copy destination"));
  check(random_fill(DType::kBF16, src.get(), bytes / 2, 0, 1.0f, 1, 0, nullptr));
  const double copy_ms = median_ms(
      [&](int) { cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice); }, 3, 20);
  const double copy_gbps = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
  src.reset();
  dst.reset();

  // 2. BF16 GEMM rate: y[M,N] = x[M,K] w[N,K]^T with M = N = K = gemm, random data.
  auto g = Gemm::create();
  check(g.status());
  DeviceBuffer x, w, y;
  check(x.allocate(gemm * gemm * 2, "GEMM A"));
  check(w.allocate(gemm * gemm * 2, "GEMM B"));
  check(y.allocate(gemm * gemm * 2, "GEMM C"));
  check(random_fill(DType::kBF16, x.get(), gemm * gemm, 0, 1.0f, 2, 0, nullptr));
  check(random_fill(DType::kBF16, w.get(), gemm * gemm, 0, 1.0f, 3, 0, nullptr));
  const double gemm_ms = median_ms(
      [&](int) {
        check(g.value()->matmul(DType::kBF16, DType::kBF16, x.get(), w.get(), y.get(), gemm, gemm,
                                gemm, nullptr));
      },
      3, 20);
  const double tflops = 2.0 * static_cast<double>(gemm) * gemm * gemm / (gemm_ms * 1e-3) / 1e12;
  x.reset();
  w.reset();
  y.reset();

  std::printf("bound.copy_bandwidth_GBps %.1f\n", copy_gbps);
  std::printf("bound.bf16_gemm_TFLOPs %.1f\n", tflops);
  std::printf("bound.copy_ms %.4f bytes %lld (read+write %lld)\n", copy_ms,
              static_cast<long long>(bytes), static_cast<long long>(2 * bytes));
  std::printf("bound.gemm_ms %.4f size %lld\n", gemm_ms, static_cast<long long>(gemm));

  // 3. Decode-shaped matmuls of Llama-3.1-8B (fused QKV and gate/up, as the runner lays them out).
  const Shape shapes[] = {{"qkv_proj", 6144, 4096},
                          {"o_proj", 4096, 4096},
                          {"gate_up_proj", 28672, 4096},
                          {"down_proj", 4096, 14336},
                          {"lm_head(f32 out)", 128256, 4096}};
  const int64_t pool_bytes = std::max<int64_t>(4 * props.value().l2_bytes, int64_t{1} << 30);
  std::printf("\n%-18s %2s %10s %10s %10s %9s %9s %9s  %s\n", "matmul", "M", "gemv_us", "dgemv_us",
              "cublas_us", "gemv_GBps", "dgemv_GBps", "cublas_GBps", "fastest");
  for (const Shape& s : shapes) {
    const bool f32 = std::strncmp(s.name, "lm_head", 7) == 0;
    const int64_t wbytes = s.n * s.k * 2;
    const int64_t copies = std::max<int64_t>(2, pool_bytes / wbytes + 1);
    DeviceBuffer pool, xin, yout;
    check(pool.allocate(copies * wbytes, "weight pool"));
    check(random_fill(DType::kBF16, pool.get(), copies * s.n * s.k, 0, 0.02f, 4, 0, nullptr));
    check(xin.allocate(kGemvMaxM * s.k * 2, "x"));
    check(random_fill(DType::kBF16, xin.get(), kGemvMaxM * s.k, 0, 1.0f, 5, 0, nullptr));
    check(yout.allocate(kGemvMaxM * s.n * 4, "y"));
    const DType out = f32 ? DType::kF32 : DType::kBF16;
    for (int64_t m = 1; m <= kGemvMaxM; ++m) {
      auto wp = [&](int i) { return static_cast<uint8_t*>(pool.get()) + (i % copies) * wbytes; };
      const double tg = median_ms(
          [&](int i) {
            check(gemv(DType::kBF16, out, xin.get(), wp(i), yout.get(), m, s.n, s.k, nullptr));
          },
          3, 30);
      const double tc = median_ms(
          [&](int i) {
            check(g.value()->matmul(DType::kBF16, out, xin.get(), wp(i), yout.get(), m, s.n, s.k,
                                    nullptr));
          },
          3, 30);
      double td = 0;
      if (m <= kDecodeGemvMaxM) {
        td = 1e30;
        for (int bps : {1, 2}) {
          DecodeGemvArgs a;
          a.dtype = DType::kBF16;
          a.n = s.n, a.k = s.k, a.m = m;
          a.x = xin.get();
          a.y = yout.get();
          a.out_dtype = out;
          a.blocks_per_sm = bps;
          td = std::min(td, median_ms(
                                [&](int i) {
                                  a.w = wp(i);
                                  check(decode_gemv(a, nullptr));
                                },
                                3, 30));
        }
      }
      const double moved = static_cast<double>(wbytes + m * s.k * 2 + m * s.n * (f32 ? 4 : 2));
      const char* fastest = tg < tc ? "gemv" : "cublas";
      if (td > 0 && td < std::min(tg, tc)) fastest = "decode_gemv";
      std::printf("%-18s %2lld %10.2f %10.2f %10.2f %9.0f %9.0f %9.0f  %s\n", s.name,
                  static_cast<long long>(m), tg * 1e3, td * 1e3, tc * 1e3,
                  moved / (tg * 1e-3) / 1e9, td > 0 ? moved / (td * 1e-3) / 1e9 : 0.0,
                  moved / (tc * 1e-3) / 1e9, fastest);
    }
  }
  return 0;
}

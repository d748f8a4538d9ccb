// W8A8 on FP8 tensor cores (linear.h's FP8 path above batch 8): the per-token activation quantizer
// bit for bit against the host's e4m3 conversion, and FP8 projections (per-tensor and per-channel
// scales, several parts, odd token counts) against a host W8A8 reference that quantizes the
// activations the same way, so that the tolerance is the accumulation order's, not the format's.
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "cuda_test_util.h"
#include "engine/backend/cuda/fp8_activations.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/linear.h"
#include "engine/quant/fp8.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// The host twin of quantize_fp8_per_token on activations already rounded to bf16.
void quantize_rows(const std::vector<float>& x, int64_t m, int64_t k, std::vector<uint8_t>* q,
                   std::vector<float>* scales) {
  q->resize(static_cast<size_t>(m * k));
  scales->resize(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    float amax = 0.0f;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x[r * k + j]));
    const float s = std::max(amax, cuda::kFp8MinAmax) / cuda::kFp8E4m3Max;
    (*scales)[r] = s;
    for (int64_t j = 0; j < k; ++j) (*q)[r * k + j] = f32_to_e4m3(x[r * k + j] / s);
  }
}

// An FP8 part on the device with its host codes and scales.
struct Fp8Part {
  cuda::QuantPart part;
  Fp8Matrix host;
  std::vector<float> channel_scales;  // what the device holds: one per row
  std::vector<Dev> buffers;
};

Fp8Part fp8_part(Fp8ScaleKind kind, int64_t n, int64_t k, uint32_t seed) {
  Fp8Part p;
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, -0.3f, 0.3f);
  p.host = quantize_fp8(w.data(), n, k, kind);
  // The upload widens a per-tensor scale to one per channel (weight_repack.cpp).
  for (int64_t r = 0; r < n; ++r)
    p.channel_scales.push_back(kind == Fp8ScaleKind::kTensor ? p.host.scales[0]
                                                             : p.host.scales[static_cast<size_t>(r)]);
  p.buffers.push_back(Dev::from(p.host.codes));
  p.buffers.push_back(Dev::from(p.channel_scales));
  p.part.format = WeightFormat::kFp8;
  p.part.fp8_scale = ScaleGranularity::kChannel;
  p.part.data = p.buffers[0].get();
  p.part.scales = p.buffers[1].get();
  p.part.n = n;
  p.part.k = k;
  return p;
}

}  // namespace

class CudaFp8GemmTest : public QObject {
  Q_OBJECT
 private slots:
  void activations_quantize_like_the_host() {
    LATHE_REQUIRE_GPU();
    for (int64_t k : {int64_t{4096}, int64_t{200}}) {  // 16-byte rows and element loads
      const int64_t m = 5;
      std::vector<float> x = round_to(DType::kBF16, random_floats(static_cast<size_t>(m * k), 3));
      for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>(2 * k + j)] = 0.0f;  // a zero row
      x[3] = 1000.0f;  // a large value: saturates nothing (the scale follows it)
      Dev d_x = Dev::from(encode16(DType::kBF16, x));
      Dev d_q = Dev::poisoned(m * k), d_s = Dev::poisoned(m * 4);
      LATHE_QVERIFY_OK(cuda::quantize_fp8_per_token(DType::kBF16, d_x.get(), m, k,
                                                    d_q.as<uint8_t>(), d_s.as<float>(), nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> q;
      std::vector<float> s;
      quantize_rows(x, m, k, &q, &s);
      QVERIFY(d_q.download<uint8_t>(static_cast<size_t>(m * k)) == q);
      QVERIFY(d_s.download<float>(static_cast<size_t>(m)) == s);
    }
    QVERIFY(!cuda::quantize_fp8_per_token(DType::kF32, nullptr, 1, 16, nullptr, nullptr, nullptr)
                 .is_ok());
  }

  // Three parts (per-tensor, per-channel, per-channel) at 9..300 tokens, bf16 and f32 outputs.
  void w8a8_matches_the_host_reference() {
    LATHE_REQUIRE_GPU();
    const int64_t k = 1024;
    Fp8Part a = fp8_part(Fp8ScaleKind::kTensor, 96, k, 1),
            b = fp8_part(Fp8ScaleKind::kChannel, 200, k, 2),
            c = fp8_part(Fp8ScaleKind::kChannel, 40, k, 3);
    cuda::DeviceLinear w;
    w.name = "test";
    w.k = k;
    w.format = WeightFormat::kFp8;
    for (Fp8Part* p : {&a, &b, &c}) {
      p->part.row_offset = w.n;
      w.parts.push_back(p->part);
      w.n += p->part.n;
    }
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    cuda::LinearDispatcher disp(gemm.value().get(), DType::kBF16, true);
    const int64_t ws_bytes = 4 << 20;
    Dev ws = Dev::poisoned(ws_bytes);
    disp.set_dequant_workspace(ws.get(), ws_bytes);
    disp.set_fp8_gemm(true);
    QVERIFY(!disp.fp8_gemm_takes(w, 8));  // decode batches keep W8A16
    for (int64_t m : {int64_t{9}, int64_t{64}, int64_t{300}}) {
      QVERIFY(disp.fp8_gemm_takes(w, m));
      const std::vector<float> x =
          round_to(DType::kBF16, random_floats(static_cast<size_t>(m * k), 10 + m));
      std::vector<uint8_t> xq;
      std::vector<float> xs;
      quantize_rows(x, m, k, &xq, &xs);
      std::vector<float> ref(static_cast<size_t>(m * w.n));
      for (int64_t r = 0; r < m; ++r)
        for (const Fp8Part* p : {&a, &b, &c})
          for (int64_t j = 0; j < p->part.n; ++j) {
            double acc = 0.0;
            for (int64_t i = 0; i < k; ++i)
              acc += static_cast<double>(e4m3_to_f32(xq[r * k + i])) *
                     e4m3_to_f32(p->host.codes[static_cast<size_t>(j * k + i)]);
            ref[static_cast<size_t>(r * w.n + p->part.row_offset + j)] =
                static_cast<float>(acc * xs[r] * p->channel_scales[static_cast<size_t>(j)]);
          }
      Dev d_x = Dev::from(encode16(DType::kBF16, x));
      for (DType out : {DType::kF32, DType::kBF16}) {
        Dev d_y = Dev::poisoned(m * w.n * 4);
        LATHE_QVERIFY_OK(disp.run(w, out, d_x.get(), d_y.get(), m, nullptr));
        LATHE_CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got =
            out == DType::kF32
                ? d_y.download<float>(static_cast<size_t>(m * w.n))
                : decode16(DType::kBF16, d_y.download<uint16_t>(static_cast<size_t>(m * w.n)));
        const double err = rel_error(got, ref), tol = out == DType::kF32 ? 1e-5 : 5e-3;
        QVERIFY2(err <= tol, qPrintable(QString("m=%1 out=%2: relative error %3 > %4")
                                            .arg(m)
                                            .arg(static_cast<int>(out))
                                            .arg(err)
                                            .arg(tol)));
      }
    }
    // Off, or block scales, or no room in the workspace: the dequantize path.
    disp.set_fp8_gemm(false);
    QVERIFY(!disp.fp8_gemm_takes(w, 64));
    disp.set_fp8_gemm(true);
    cuda::DeviceLinear blocks = w;
    blocks.parts[1].fp8_scale = ScaleGranularity::kBlock;
    QVERIFY(!disp.fp8_gemm_takes(blocks, 64));
    QVERIFY(!disp.fp8_gemm_takes(w, ws_bytes / k + 1));
  }
};

QTEST_GUILESS_MAIN(CudaFp8GemmTest)
#include "cuda_fp8_gemm_test.moc"

// W8A8 on FP8 tensor cores (linear.h's FP8 path above batch 8): the activation quantizer (one
// dynamic scale per batch) bit for bit against the host's e4m3 conversion, and FP8 projections of
// per-tensor-scaled parts (several, odd token counts) against a host W8A8 reference that quantizes
// the activations the same way, so that the tolerance is the accumulation order's, not the
// format's. Per-channel and block-scaled parts stay W8A16.
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

// The host twin of quantize_fp8_activations on activations already rounded to bf16.
float quantize_batch(const std::vector<float>& x, std::vector<uint8_t>* q) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float s = std::max(amax, cuda::kFp8MinAmax) / cuda::kFp8E4m3Max;
  q->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) (*q)[i] = f32_to_e4m3(x[i] / s);
  return s;
}

// An FP8 part on the device with its host codes and scales.
struct Fp8Part {
  cuda::QuantPart part;
  Fp8Matrix host;
  std::vector<Dev> buffers;
};

Fp8Part fp8_part(Fp8ScaleKind kind, int64_t n, int64_t k, uint32_t seed) {
  Fp8Part p;
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, -0.3f, 0.3f);
  p.host = quantize_fp8(w.data(), n, k, kind);
  p.buffers.push_back(Dev::from(p.host.codes));
  p.buffers.push_back(Dev::from(p.host.scales));
  p.part.format = WeightFormat::kFp8;
  p.part.fp8_scale =
      kind == Fp8ScaleKind::kTensor ? ScaleGranularity::kTensor : ScaleGranularity::kChannel;
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
      for (int64_t m : {int64_t{1}, int64_t{5}}) {
        std::vector<float> x = round_to(DType::kBF16, random_floats(static_cast<size_t>(m * k), 3));
        x[static_cast<size_t>(m * k - 1)] = 1000.0f;  // the batch's amax, in its last row
        Dev d_x = Dev::from(encode16(DType::kBF16, x));
        Dev d_q = Dev::poisoned(m * k), d_s = Dev::poisoned(16);
        LATHE_QVERIFY_OK(cuda::quantize_fp8_activations(DType::kBF16, d_x.get(), m, k,
                                                        d_q.as<uint8_t>(), d_s.as<float>(),
                                                        d_s.as<uint32_t>() + 1, nullptr));
        LATHE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint8_t> q;
        const float s = quantize_batch(x, &q);
        QVERIFY(d_q.download<uint8_t>(static_cast<size_t>(m * k)) == q);
        QCOMPARE(d_s.download<float>(1)[0], s);
      }
    }
    QVERIFY(!cuda::quantize_fp8_activations(DType::kF32, nullptr, 1, 16, nullptr, nullptr, nullptr,
                                            nullptr)
                 .is_ok());
  }

  // Three per-tensor-scaled parts at 2..300 tokens, bf16 and f32 outputs. f32: 1e-3 (the FP8
  // tensor cores' accumulation against a double reference: 1.1e-4 measured in run 41).
  void w8a8_matches_the_host_reference() {
    LATHE_REQUIRE_GPU();
    const int64_t k = 1024;
    Fp8Part a = fp8_part(Fp8ScaleKind::kTensor, 96, k, 1),
            b = fp8_part(Fp8ScaleKind::kTensor, 200, k, 2),
            c = fp8_part(Fp8ScaleKind::kTensor, 40, k, 3);
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
    QVERIFY(!disp.fp8_gemm_takes(w, 8));  // below the dispatcher's threshold: W8A16
    disp.set_fp8_gemm(true, 2);           // (the runner's default is 3: LATHE_CUDA_FP8_GEMM_MIN_M)
    QVERIFY(disp.fp8_gemm_takes(w, 2) && !disp.fp8_gemm_takes(w, 1));
    // LATHE_CUDA_FP8_DECODE_MAX_K: rows this short keep W8A16 to batch 4, and W8A8 above it.
    disp.set_fp8_gemm(true, 2, static_cast<int32_t>(k));
    QVERIFY(!disp.fp8_gemm_takes(w, 2) && !disp.fp8_gemm_takes(w, 4) && disp.fp8_gemm_takes(w, 5));
    disp.set_fp8_gemm(true, 2, static_cast<int32_t>(k) - 16);
    QVERIFY(disp.fp8_gemm_takes(w, 2));
    for (int64_t m : {int64_t{2}, int64_t{9}, int64_t{64}, int64_t{300}}) {
      QVERIFY(disp.fp8_gemm_takes(w, m));
      const std::vector<float> x =
          round_to(DType::kBF16, random_floats(static_cast<size_t>(m * k), 10 + m));
      std::vector<uint8_t> xq;
      const float xs = quantize_batch(x, &xq);
      std::vector<float> ref(static_cast<size_t>(m * w.n));
      for (int64_t r = 0; r < m; ++r)
        for (const Fp8Part* p : {&a, &b, &c})
          for (int64_t j = 0; j < p->part.n; ++j) {
            double acc = 0.0;
            for (int64_t i = 0; i < k; ++i)
              acc += static_cast<double>(e4m3_to_f32(xq[r * k + i])) *
                     e4m3_to_f32(p->host.codes[static_cast<size_t>(j * k + i)]);
            ref[static_cast<size_t>(r * w.n + p->part.row_offset + j)] =
                static_cast<float>(acc * xs * p->host.scales[0]);
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
        const double err = rel_error(got, ref), tol = out == DType::kF32 ? 1e-3 : 5e-3;
        QVERIFY2(err <= tol, qPrintable(QString("m=%1 out=%2: relative error %3 > %4")
                                            .arg(m)
                                            .arg(static_cast<int>(out))
                                            .arg(err)
                                            .arg(tol)));
      }
    }
    // Off, or per-channel / block scales, or no room in the workspace: the dequantize path.
    disp.set_fp8_gemm(false);
    QVERIFY(!disp.fp8_gemm_takes(w, 64));
    disp.set_fp8_gemm(true);
    for (ScaleGranularity g : {ScaleGranularity::kChannel, ScaleGranularity::kBlock}) {
      cuda::DeviceLinear other = w;
      other.parts[1].fp8_scale = g;
      QVERIFY(!disp.fp8_gemm_takes(other, 64));
    }
    QVERIFY(!disp.fp8_gemm_takes(w, ws_bytes / k + 1));
  }
};

QTEST_GUILESS_MAIN(CudaFp8GemmTest)
#include "cuda_fp8_gemm_test.moc"

// The k-quant decode kernel's decoding checked without a GPU: its per-unit arithmetic
// (quant_gemv_kquants.cuh's kq_row / kq_load_unit / kq_unit, run on the host by
// quant::kquant_rows_on_host) over parts laid out as the upload lays them out (Q4_K as stored, Q5_K
// in unit order, Q6_K split, Q4_0 as 4-bit integer rows, Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K in the
// unit layout) equals the CPU reference (dequant.h's dequantize_row, then the dot product in
// double) on random blocks: every code, scale, min and high-bit pattern, k from one super-block to
// 14336 and SmolLM2's 576 (whole 64-weight units only), one and two activation rows. Runs
// everywhere; the kernel itself against the CPU is test_cuda_gguf_quant (GPU).
#include <QtTest>

#include <cmath>

#include "engine/backend/cuda/gguf_repack.h"
#include "engine/backend/cuda/gguf_units.h"
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/model/dequant.h"
#include "engine/model/layer_weights.h"
#include "kquant_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// A part as the upload stores it, in host memory.
struct HostLaidPart {
  cuda::QuantPart part;
  int kind = -1;
  cuda::RepackedPart bytes;
  std::vector<uint8_t> blocks;
};

HostLaidPart laid_out(DType type, const std::vector<uint8_t>& blocks, int64_t n, int64_t k) {
  HostLaidPart h;
  h.blocks = blocks;
  cuda::QuantPart& p = h.part;
  p.format = WeightFormat::kGguf;
  p.gguf_type = type;
  p.n = n;
  p.k = k;
  const WeightMatrix m = plain_matrix("blk.0.ffn_up", make_view(type, {n, k}, h.blocks.data()));
  auto must = [](Result<cuda::RepackedPart> r) {
    if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
    return std::move(r).value();
  };
  using namespace cuda::quant;
  switch (type) {
    case DType::kQ4_K:
      h.kind = kQ4K;
      p.data = h.blocks.data();
      break;
    case DType::kQ5_K:
      h.kind = kQ5K;
      h.bytes = must(cuda::gguf_reorder_q5k(m));
      p.gguf_q5k_units = true;
      break;
    case DType::kQ6_K:
      h.kind = kQ6K;
      h.bytes = must(cuda::gguf_split_q6k(m));
      p.gguf_q6k_split = true;
      break;
    case DType::kQ4_0:
      h.kind = kInt4;
      h.bytes = must(cuda::gguf_repack(m));
      p.format = WeightFormat::kInt;
      p.bits = 4;
      p.group_size = 32;
      p.scale_dtype = DType::kF16;
      break;
    default:
      h.kind = type == DType::kQ4_1   ? kQ4_1
               : type == DType::kQ5_0 ? kQ5_0
               : type == DType::kQ5_1 ? kQ5_1
               : type == DType::kQ2_K ? kQ2K
                                      : kQ3K;
      h.bytes = must(cuda::gguf_to_units(m));
      p.gguf_units = true;
      break;
  }
  if (!h.bytes.data.empty()) p.data = h.bytes.data.data();
  if (!h.bytes.scales.empty()) p.scales = h.bytes.scales.data();
  if (!h.bytes.zeros.empty()) p.gguf_aux = h.bytes.zeros.data();
  return h;
}

}  // namespace

class CudaKquantHostTest : public QObject {
  Q_OBJECT
 private slots:
  void unit_arithmetic_matches_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_0, DType::kQ4_1,
                    DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K})
      for (auto [n, k] : {std::pair{7, 256}, {5, 2304}, {3, 14336}, {6, 576}}) {
        if (dtype_info(t).block_size == 256 && k % 256 != 0) continue;
        QTest::newRow(qPrintable(QString("%1 n=%2 k=%3").arg(dtype_name(t).data()).arg(n).arg(k)))
            << static_cast<int>(t) << n << k;
      }
  }
  void unit_arithmetic_matches_cpu() {
    QFETCH(int, type);
    QFETCH(int, n);
    QFETCH(int, k);
    const DType t = static_cast<DType>(type);
    std::vector<uint8_t> blocks = random_kquant_blocks(t, n, k, 97 + static_cast<uint32_t>(k));
    HostLaidPart h = laid_out(t, blocks, n, k);
    const int64_t row_bytes = k / dtype_info(t).block_size * dtype_info(t).block_bytes;
    std::vector<float> dense(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r)
      dequantize_row(t, blocks.data() + r * row_bytes, dense.data() + r * k, k);
    if (h.part.gguf_units) {
      // The generic kernels' decoding of the layout (the one-row kernel, the dequantize path):
      // the CPU's float values exactly.
      std::vector<float> w(static_cast<size_t>(n * k), NAN);
      QVERIFY(cuda::quant::gguf_units_rows_on_host(h.kind, h.part, w.data()));
      for (size_t i = 0; i < w.size(); ++i)
        if (w[i] != dense[i])
          QFAIL(qPrintable(QString("weight %1: %2, the CPU %3").arg(i).arg(w[i]).arg(dense[i])));
    }
    for (int64_t m : {1, 2}) {
      const std::vector<float> x =
          random_floats(static_cast<size_t>(m * k), 5 + static_cast<uint32_t>(m));
      std::vector<float> y(static_cast<size_t>(m * n), NAN);
      QVERIFY2(cuda::quant::kquant_rows_on_host(h.kind, h.part, x.data(), m, y.data()),
               "the kernel does not take the part");
      double err = 0, norm = 0;
      for (int64_t mi = 0; mi < m; ++mi)
        for (int64_t r = 0; r < n; ++r) {
          double ref = 0;
          for (int64_t j = 0; j < k; ++j)
            ref += static_cast<double>(dense[r * k + j]) * x[mi * k + j];
          const double d = y[mi * n + r] - ref;
          err += d * d;
          norm += ref * ref;
        }
      const double rel = std::sqrt(err / norm);
      // fp32 sums with the +128 offset removed by the sums of 16 (~2e-6); one wrong code in a row
      // of 14336 would be ~1e-2.
      QVERIFY2(rel < 1e-4, qPrintable(QString("m=%1: relative error %2").arg(m).arg(rel)));
    }
  }
};

QTEST_GUILESS_MAIN(CudaKquantHostTest)
#include "cuda_kquant_host_test.moc"

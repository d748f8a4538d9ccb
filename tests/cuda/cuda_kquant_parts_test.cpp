// The GGUF k-quant decode kernel on a projection's parts (quant_gemv_kquant_parts,
// quant_gemv_kquants.cuh): which parts and outputs it takes (host only, runs everywhere), and on
// the GPU its fused products — stores of several parts of mixed kinds, SwiGLU, RoPE/KV in both
// styles with and without bias, the residual add — against the unfused sequence they replace (one
// launch per part, then the swiglu / qkv_rope_kv kernel, or the host's add) and the RMSNorm input
// against add_rms_norm then the product, bit for bit.
#include <QtTest>

#include "cuda_test_util.h"
#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/backend/cuda/swiglu.h"
#include "kquant_test_util.h"
#include "quant_parts_test_util.h"
#include "rope_kv_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// A part's shape only (the plan never reads the data).
cuda::QuantPart shape(DType type, int64_t n, int64_t k, bool split = true) {
  cuda::QuantPart p;
  p.format = WeightFormat::kGguf;
  p.gguf_type = type;
  p.n = n;
  p.k = k;
  p.gguf_q6k_split = type == DType::kQ6_K && split;
  p.gguf_q5k_units = type == DType::kQ5_K && split;
  // Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K: the unit layout (gguf_units.h), an aux array to point at.
  alignas(16) static uint8_t aux[16];
  p.gguf_units = split && (type == DType::kQ4_1 || type == DType::kQ5_0 || type == DType::kQ5_1 ||
                           type == DType::kQ2_K || type == DType::kQ3_K);
  p.gguf_aux = p.gguf_units ? aux : nullptr;
  return p;
}

cuda::GemvRopeKv rope_of(int heads, int kv_heads, int head_dim) {
  cuda::GemvRopeKv r;
  r.num_heads = heads;
  r.num_kv_heads = kv_heads;
  r.head_dim = head_dim;
  return r;
}

// Random k-quant parts stacked into one projection.
struct Projection {
  std::vector<KquantDevicePart> parts;
  cuda::DeviceLinear w;
};
Projection projection(const std::vector<std::pair<DType, int64_t>>& parts, int64_t k,
                      uint32_t seed) {
  Projection p;
  p.w.name = "test";
  p.w.k = k;
  p.w.format = WeightFormat::kGguf;
  for (const auto& [type, n] : parts) {
    p.parts.push_back(kquant_device_part(type, random_kquant_blocks(type, n, k, seed++), n, k));
    cuda::QuantPart q = p.parts.back().part;
    q.row_offset = p.w.n;
    p.w.parts.push_back(q);
    p.w.n += n;
  }
  return p;
}

}  // namespace

class CudaKquantPartsTest : public QObject {
  Q_OBJECT
 private slots:
  // What the kernel takes: Q4_K, Q5_K and split Q6_K parts; stores at batches 1-8 with any mix of
  // kinds; the epilogues at batch 1 when each launch's rows are one kind (RoPE/KV: q and k rows
  // one kind, v rows one kind).
  void takes_what_it_can() {
    const int64_t k = 512;
    using cuda::GemvOutput;
    auto q4 = [&](int64_t n) { return shape(DType::kQ4_K, n, k); };
    auto q6 = [&](int64_t n) { return shape(DType::kQ6_K, n, k); };
    const auto qkv = stacked({q4(256), q4(128), q6(128)});
    QVERIFY(cuda::quant_kquant_parts_take(qkv, 512, 1, GemvOutput::kStore));
    QVERIFY(cuda::quant_kquant_parts_take(qkv, 512, 8, GemvOutput::kStore));
    QVERIFY(!cuda::quant_kquant_parts_take(qkv, 512, 9, GemvOutput::kStore));
    const cuda::GemvRopeKv rope = rope_of(4, 2, 64);
    QVERIFY(cuda::quant_kquant_parts_take(qkv, 512, 1, GemvOutput::kRopeKv, &rope));
    QVERIFY(!cuda::quant_kquant_parts_take(qkv, 512, 2, GemvOutput::kRopeKv, &rope));
    QVERIFY(!cuda::quant_kquant_parts_take(qkv, 512, 1, GemvOutput::kRopeKv, nullptr));
    // k rows in another kind than q rows: rotation pairs would straddle kinds.
    QVERIFY(!cuda::quant_kquant_parts_take(stacked({q4(256), q6(128), q6(128)}), 512, 1,
                                           GemvOutput::kRopeKv, &rope));
    QVERIFY(cuda::quant_kquant_parts_take(stacked({q4(64), q4(64)}), 128, 1, GemvOutput::kSwiglu));
    QVERIFY(!cuda::quant_kquant_parts_take(stacked({q4(64), q6(64)}), 128, 1, GemvOutput::kSwiglu));
    QVERIFY(cuda::quant_kquant_parts_take(stacked({q6(96)}), 96, 1, GemvOutput::kResidualAdd));
    // Not k-quant kernel parts: Q6_K in file blocks, the one-row switch, Q4_0, a k that is not
    // whole super-blocks, parts out of order.
    QVERIFY(!cuda::quant_kquant_parts_take({shape(DType::kQ6_K, 16, k, false)}, 16, 1,
                                           GemvOutput::kStore));
    cuda::QuantPart one_row = q4(16);
    one_row.one_row_gemv = true;
    QVERIFY(!cuda::quant_kquant_parts_take({one_row}, 16, 1, GemvOutput::kStore));
    QVERIFY(
        !cuda::quant_kquant_parts_take({shape(DType::kQ4_0, 16, k)}, 16, 1, GemvOutput::kStore));
    QVERIFY(
        !cuda::quant_kquant_parts_take({shape(DType::kQ4_K, 16, 320)}, 16, 1, GemvOutput::kStore));
    // 4-bit integer rows of group 32, symmetric, f16 scales (GGUF Q4_0 after the upload's repack).
    cuda::QuantPart i4;
    i4.format = WeightFormat::kInt;
    i4.bits = 4;
    i4.group_size = 32;
    i4.scale_dtype = DType::kF16;
    i4.n = 64;
    i4.k = k;
    QVERIFY(cuda::quant_kquant_parts_take(stacked({i4, i4}), 128, 1, GemvOutput::kSwiglu));
    cuda::QuantPart i4g128 = i4;
    i4g128.group_size = 128;
    QVERIFY(!cuda::quant_kquant_parts_take({i4g128}, 64, 1, GemvOutput::kStore));
    // The unit layout's kinds: stores of mixed kinds, epilogues on one kind; not in file blocks.
    for (DType t : {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K}) {
      const QString what = dtype_name(t).data();
      QVERIFY2(cuda::quant_kquant_parts_take(stacked({shape(t, 64, k), q6(32)}), 96, 8,
                                             GemvOutput::kStore),
               qPrintable(what));
      QVERIFY2(cuda::quant_kquant_parts_take(stacked({shape(t, 64, k), shape(t, 64, k)}), 128, 1,
                                             GemvOutput::kSwiglu),
               qPrintable(what));
      QVERIFY2(!cuda::quant_kquant_parts_take({shape(t, 16, k, false)}, 16, 1, GemvOutput::kStore),
               qPrintable(what));
    }
    // More runs of kinds than a plan holds (6 launches): not taken (one launch per part instead).
    auto runs = stacked({q4(16), q6(16), shape(DType::kQ5_K, 16, k), shape(DType::kQ3_K, 16, k),
                         shape(DType::kQ2_K, 16, k), shape(DType::kQ4_1, 16, k),
                         shape(DType::kQ5_0, 16, k)});
    QVERIFY(!cuda::quant_kquant_parts_take(runs, 112, 1, GemvOutput::kStore));
    runs.pop_back();
    QVERIFY(cuda::quant_kquant_parts_take(runs, 96, 1, GemvOutput::kStore));
    auto swapped = stacked({q4(32), q4(32)});
    std::swap(swapped[0].row_offset, swapped[1].row_offset);
    QVERIFY(!cuda::quant_kquant_parts_take(swapped, 64, 1, GemvOutput::kStore));
  }

  void fused_outputs_match_unfused() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 1024, inter = 48, hq = 4, hkv = 2, block_size = 16, num_blocks = 8;
    for (DType t : {DType::kBF16, DType::kF16}) {
      cuda::LinearDispatcher disp(gemm.value().get(), t, true);
      const QString what = QString("dtype=%1").arg(static_cast<int>(t));
      // Stores of several parts of mixed kinds (odd row counts: a task's second row in the next
      // part), f32 and the activation type, batches 1-8.
      // Two projections: 6 runs of kinds (the most a plan holds) and the 32-weight kinds.
      Projection mixes[] = {
          projection({{DType::kQ4_K, 33},
                      {DType::kQ4_K, 16},
                      {DType::kQ6_K, 17},
                      {DType::kQ5_K, 9},
                      {DType::kQ3_K, 7},
                      {DType::kQ2_K, 8},
                      {DType::kQ4_1, 5}},
                     k, 1),
          projection({{DType::kQ5_0, 3}, {DType::kQ5_1, 6}, {DType::kQ4_1, 5}}, k, 61)};
      for (const Projection& mixed : mixes) {
        QVERIFY(
            cuda::quant_kquant_parts_take(mixed.w.parts, mixed.w.n, 8, cuda::GemvOutput::kStore));
        for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{8}}) {
          Dev d_x = Dev::from(encode16(t, random_floats(m * k, 40 + static_cast<uint32_t>(m))));
          for (DType out : {DType::kF32, t}) {
            const int64_t n = mixed.w.n, bytes = out == DType::kF32 ? 4 : 2;
            Dev y_ref = Dev::poisoned(m * n * bytes), y = Dev::poisoned(m * n * bytes);
            LATHE_QVERIFY_OK(per_part(mixed.w, t, d_x.get(), out, y_ref.get(), m, st));
            LATHE_QVERIFY_OK(disp.run(mixed.w, out, d_x.get(), y.get(), m, st));
            LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
            QVERIFY2(y.download<uint8_t>(m * n * bytes) == y_ref.download<uint8_t>(m * n * bytes),
                     qPrintable(what + QString(" store m=%1").arg(m)));
          }
        }
      }
      const int64_t m = 1;
      Dev d_x = Dev::from(encode16(t, random_floats(k, 50)));
      // SwiGLU on two parts and on one, in each kind.
      for (DType kind : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_1, DType::kQ5_0,
                         DType::kQ5_1, DType::kQ2_K, DType::kQ3_K}) {
        for (int variant = 0; variant < 2; ++variant) {
          Projection gu = variant == 0 ? projection({{kind, inter}, {kind, inter}}, k, 3)
                                       : projection({{kind, 2 * inter}}, k, 5);
          QVERIFY(disp.takes_epilogue(gu.w, m, cuda::GemvOutput::kSwiglu));
          Dev d_gu = Dev::poisoned(2 * inter * 2), d_ref = Dev::poisoned(inter * 2),
              d_act = Dev::poisoned(inter * 2);
          LATHE_QVERIFY_OK(per_part(gu.w, t, d_x.get(), t, d_gu.get(), m, st));
          LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_ref.get(), m, inter, st));
          LATHE_QVERIFY_OK(
              disp.run(gu.w, t, d_x.get(), d_act.get(), m, st, cuda::GemvOutput::kSwiglu));
          LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
          QVERIFY2(d_act.download<uint16_t>(inter) == d_ref.download<uint16_t>(inter),
                   qPrintable(
                       what +
                       QString(" swiglu %1 variant %2").arg(dtype_name(kind).data()).arg(variant)));
        }
      }
      // RoPE/KV on q|k|v as a Q4_K_M file has them (q4_k, q4_k, q6_k: two launches) and all q4_k
      // (one launch).
      for (int64_t d : {int64_t{64}, int64_t{128}}) {
        for (bool q6_v : {true, false}) {
          Projection qkv = projection({{DType::kQ4_K, hq * d},
                                       {DType::kQ4_K, hkv * d},
                                       {q6_v ? DType::kQ6_K : DType::kQ4_K, hkv * d}},
                                      k, 7);
          const int64_t n = qkv.w.n, cache_elems = num_blocks * block_size * hkv * d;
          const RopeKvShape rshape{hq, hkv, d, static_cast<int32_t>(block_size), num_blocks};
          const RopeKvDeviceInputs in = rope_kv_device_inputs(rshape, m);
          for (RopeStyle rs : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
            for (bool bias : {false, true}) {
              RopeKvCaches c = rope_kv_caches(t, cache_elems);
              Dev y_ref = Dev::poisoned(n * 2), y = Dev::poisoned(n * 2);
              LATHE_QVERIFY_OK(per_part(qkv.w, t, d_x.get(), t, y_ref.get(), m, st));
              const cuda::QkvRopeKvArgs rk = qkv_rope_kv_args(y_ref.get(), m, rshape, in, rs, bias,
                                                              c.k_ref.get(), c.v_ref.get(), t);
              LATHE_QVERIFY_OK(cuda::qkv_rope_kv(rk, st));
              const cuda::GemvRopeKv rp = gemv_rope_kv_like(rk, c.k.get(), c.v.get());
              QVERIFY(disp.takes_epilogue(qkv.w, m, cuda::GemvOutput::kRopeKv, &rp));
              LATHE_QVERIFY_OK(
                  disp.run(qkv.w, t, d_x.get(), y.get(), m, st, cuda::GemvOutput::kRopeKv, rp));
              LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
              const QString rw = what + QString(" d=%1 q6 v=%2 style=%3 bias=%4")
                                            .arg(d)
                                            .arg(q6_v)
                                            .arg(static_cast<int>(rs))
                                            .arg(bias);
              const QString diff = rope_kv_bit_difference(y, y_ref, n, c, cache_elems);
              QVERIFY2(diff.isEmpty(), qPrintable(rw + diff));
            }
          }
        }
      }
      // Residual add: residual += float(round(product)), one part (down) and two of mixed kinds.
      for (int variant = 0; variant < 2; ++variant) {
        Projection dn = variant == 0 ? projection({{DType::kQ6_K, 96}}, k, 9)
                                     : projection({{DType::kQ4_K, 64}, {DType::kQ6_K, 32}}, k, 11);
        QVERIFY(disp.takes_epilogue(dn.w, m, cuda::GemvOutput::kResidualAdd));
        Dev d_y = Dev::poisoned(dn.w.n * 2);
        const std::vector<float> r0 = random_floats(static_cast<size_t>(dn.w.n), 16);
        Dev d_r = Dev::from(r0);
        LATHE_QVERIFY_OK(per_part(dn.w, t, d_x.get(), t, d_y.get(), m, st));
        LATHE_QVERIFY_OK(
            disp.run(dn.w, t, d_x.get(), d_r.get(), m, st, cuda::GemvOutput::kResidualAdd));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        const std::vector<float> y = decode16(t, d_y.download<uint16_t>(dn.w.n));
        std::vector<float> want = r0;
        for (size_t i = 0; i < want.size(); ++i) want[i] += y[i];
        QVERIFY2(d_r.download<float>(dn.w.n) == want,
                 qPrintable(what + QString(" residual add variant %1").arg(variant)));
      }
    }
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // The RMSNorm input (batch 1): each block normalizes the f32 residual row itself; the products
  // (stored q|k|v of mixed kinds, SwiGLU, RoPE/KV) equal add_rms_norm's output then the product.
  void norm_input_matches_unfused() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 2304, inter = 40;
    Dev d_w = Dev::from(random_floats(static_cast<size_t>(k), 21, 0.5f, 1.5f));
    for (DType t : {DType::kBF16, DType::kF16}) {
      cuda::LinearDispatcher disp(gemm.value().get(), t, true);
      const QString what = QString("dtype=%1").arg(static_cast<int>(t));
      const std::vector<float> res = random_floats(static_cast<size_t>(k), 22, -3.f, 3.f);
      Dev d_res = Dev::from(res), d_xn = Dev::poisoned(k * 2);
      cuda::AddRmsNormArgs na;
      na.residual = d_res.as<float>();
      na.weight = d_w.as<float>();
      na.out = d_xn.get();
      na.rows = 1;
      na.dim = k;
      na.eps = 1e-6f;
      na.dtype = t;
      LATHE_QVERIFY_OK(cuda::add_rms_norm(na, st));
      const cuda::TileNormInput ni{d_res.as<float>(), d_w.as<float>(), 1e-6f};
      Projection qkv =
          projection({{DType::kQ4_K, 64}, {DType::kQ5_K, 32}, {DType::kQ6_K, 33}}, k, 23);
      Projection gu = projection({{DType::kQ4_K, inter}, {DType::kQ4_K, inter}}, k, 27);
      // Off unless the parts say so (CudaSwitches::kquant_norm, LATHE_CUDA_KQUANT_NORM=1).
      QVERIFY(!disp.takes_norm_input(gu.w, 1, cuda::GemvOutput::kSwiglu));
      for (Projection* p : {&qkv, &gu})
        for (cuda::QuantPart& q : p->w.parts) q.kquant_norm = true;
      QVERIFY(disp.takes_norm_input(qkv.w, 1, cuda::GemvOutput::kStore));
      QVERIFY(disp.takes_norm_input(gu.w, 1, cuda::GemvOutput::kSwiglu));
      QVERIFY(!disp.takes_norm_input(qkv.w, 2, cuda::GemvOutput::kStore));
      for (DType out : {DType::kF32, t}) {
        const int64_t n = qkv.w.n, bytes = out == DType::kF32 ? 4 : 2;
        Dev y_ref = Dev::poisoned(n * bytes), y = Dev::poisoned(n * bytes);
        LATHE_QVERIFY_OK(per_part(qkv.w, t, d_xn.get(), out, y_ref.get(), 1, st));
        LATHE_QVERIFY_OK(
            disp.run(qkv.w, out, nullptr, y.get(), 1, st, cuda::GemvOutput::kStore, {}, &ni));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        QVERIFY2(y.download<uint8_t>(n * bytes) == y_ref.download<uint8_t>(n * bytes),
                 qPrintable(what + " stored"));
      }
      Dev d_gu = Dev::poisoned(2 * inter * 2), d_ref = Dev::poisoned(inter * 2),
          d_act = Dev::poisoned(inter * 2);
      LATHE_QVERIFY_OK(per_part(gu.w, t, d_xn.get(), t, d_gu.get(), 1, st));
      LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_ref.get(), 1, inter, st));
      LATHE_QVERIFY_OK(
          disp.run(gu.w, t, nullptr, d_act.get(), 1, st, cuda::GemvOutput::kSwiglu, {}, &ni));
      LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
      QVERIFY2(d_act.download<uint16_t>(inter) == d_ref.download<uint16_t>(inter),
               qPrintable(what + " swiglu"));
      // The residual add never takes the norm input.
      Projection dn = projection({{DType::kQ6_K, 16}}, k, 29);
      QVERIFY(!disp.takes_norm_input(dn.w, 1, cuda::GemvOutput::kResidualAdd));
    }
    // A misaligned residual is refused with a message.
    Projection gu = projection({{DType::kQ4_K, 32}, {DType::kQ4_K, 32}}, k, 31);
    for (cuda::QuantPart& q : gu.w.parts) q.kquant_norm = true;
    Dev d_y = Dev::poisoned(64 * 2);
    const cuda::TileNormInput bad{d_w.as<float>() + 1, d_w.as<float>(), 1e-6f};
    const Status s =
        cuda::quant_gemv_kquant_parts(gu.w.parts, DType::kBF16, nullptr, DType::kBF16, d_y.get(),
                                      64, 1, cuda::GemvOutput::kSwiglu, {}, nullptr, &bad);
    QVERIFY2(!s.is_ok() && s.message().find("16-byte aligned") != std::string::npos,
             s.message().c_str());
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // Bad calls are refused with a message, nothing launched: an epilogue at batch 2, RoPE/KV rows
  // that are not the heads', an output type other than the activations' for an epilogue.
  void refuses_bad_calls() {
    LATHE_REQUIRE_GPU();
    Projection gu = projection({{DType::kQ4_K, 32}, {DType::kQ4_K, 32}}, 512, 13);
    Dev d_x = Dev::from(encode16(DType::kBF16, random_floats(2 * 512, 14)));
    Dev d_y = Dev::poisoned(2 * 64 * 4);
    auto s =
        cuda::quant_gemv_kquant_parts(gu.w.parts, DType::kBF16, d_x.get(), DType::kBF16, d_y.get(),
                                      64, 2, cuda::GemvOutput::kSwiglu, {}, nullptr);
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY2(s.message().find("batch 1") != std::string::npos, s.message().c_str());
    s = cuda::quant_gemv_kquant_parts(gu.w.parts, DType::kBF16, d_x.get(), DType::kF32, d_y.get(),
                                      64, 1, cuda::GemvOutput::kSwiglu, {}, nullptr);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    QVERIFY2(s.message().find("activation type") != std::string::npos, s.message().c_str());
    s = cuda::quant_gemv_kquant_parts(gu.w.parts, DType::kBF16, d_x.get(), DType::kBF16, d_y.get(),
                                      64, 1, cuda::GemvOutput::kRopeKv, rope_of(1, 1, 16), nullptr);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

QTEST_GUILESS_MAIN(CudaKquantPartsTest)
#include "cuda_kquant_parts_test.moc"

// FP8 and 8-bit integer projections on the fused decode kernel (quant_gemv_w8_parts, decode_gemv.h
// with 8-bit parts): which parts and outputs it takes (host only, runs everywhere); on the GPU its
// stores against the CPU reference for every scale layout (FP8 per tensor / channel / 128 x 128
// block; integers per channel, in groups of 32 / 64 / 128, with and without zero points, f16 and
// f32 scales), parts of odd row counts, batches 1-4, both activation types; its epilogues (RMSNorm
// input, SwiGLU, RoPE/KV in both styles with and without bias, the residual add) against its own
// store followed by the unfused kernels, bit for bit; activations far outside f16's range; and bad
// calls refused with a message.
// W8A8 (FP8 per tensor from LATHE_CUDA_FP8_GEMM_MIN_M) is off in these dispatchers.
#include <QtTest>

#include "cuda_test_util.h"
#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/swiglu.h"
#include "quant_host_parts.h"
#include "quant_parts_test_util.h"
#include "rope_kv_test_util.h"

using namespace lathe;
using namespace lathe::test;

namespace {

using cuda::GemvOutput;

// The parts stacked into one projection (row offsets set), with the dense weights they stand for.
struct Projection {
  std::vector<HostPart> parts;
  cuda::DeviceLinear w;
  std::vector<float> dense;  // [n, k]
};
Projection stack(std::vector<HostPart> parts) {
  Projection p;
  p.parts = std::move(parts);
  p.w.name = "test";
  p.w.k = p.parts[0].part.k;
  for (HostPart& h : p.parts) {
    h.part.row_offset = p.w.n;
    p.w.parts.push_back(h.part);
    p.w.n += h.part.n;
    p.dense.insert(p.dense.end(), h.dense.begin(), h.dense.end());
  }
  p.w.format = p.parts[0].part.format;
  return p;
}

// An 8-bit integer part with its scales widened to f32 (as the upload keeps non-f16 scales).
HostPart with_f32_scales(HostPart h) {
  const int64_t count = h.part.n * (h.part.k / h.part.group_size);
  const std::vector<uint16_t> s16 = h.buffers[1].download<uint16_t>(static_cast<size_t>(count));
  std::vector<float> s32(s16.size());
  for (size_t i = 0; i < s16.size(); ++i) s32[i] = f16_to_f32(s16[i]);
  h.buffers.push_back(Dev::from(s32));
  h.part.scales = h.buffers.back().get();
  h.part.scale_dtype = DType::kF32;
  return h;
}

// The scale layouts under test, each a projection of three parts with odd row counts (a task's
// two rows in different parts).
enum class Layout {
  kFp8Tensor,
  kFp8Channel,
  kFp8Block,
  kIntChannel,
  kIntG128Zeros,
  kIntG32F32,
  kIntG64Zeros
};
constexpr Layout kLayouts[] = {Layout::kFp8Tensor,  Layout::kFp8Channel,   Layout::kFp8Block,
                               Layout::kIntChannel, Layout::kIntG128Zeros, Layout::kIntG32F32,
                               Layout::kIntG64Zeros};
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kFp8Tensor:
      return "fp8 tensor";
    case Layout::kFp8Channel:
      return "fp8 channel";
    case Layout::kFp8Block:
      return "fp8 block";
    case Layout::kIntChannel:
      return "int8 channel";
    case Layout::kIntG128Zeros:
      return "int8 g128 zeros";
    case Layout::kIntG32F32:
      return "int8 g32 f32 scales";
    case Layout::kIntG64Zeros:
      return "int8 g64 zeros";
  }
  return "?";
}
HostPart part_of(Layout l, int64_t n, int64_t k, uint32_t seed) {
  switch (l) {
    case Layout::kFp8Tensor:
      return fp8_part(Fp8ScaleKind::kTensor, n, k, seed);
    case Layout::kFp8Channel:
      return fp8_part(Fp8ScaleKind::kChannel, n, k, seed);
    case Layout::kFp8Block:
      return fp8_part(Fp8ScaleKind::kBlock, n, k, seed);
    case Layout::kIntChannel:
      return int_part(8, n, k, static_cast<int>(k), false, false, seed);
    case Layout::kIntG128Zeros:
      return int_part(8, n, k, 128, true, false, seed);
    case Layout::kIntG32F32:
      return with_f32_scales(int_part(8, n, k, 32, false, false, seed));
    case Layout::kIntG64Zeros:
      return int_part(8, n, k, 64, true, false, seed);
  }
  return {};
}
Projection projection(Layout l, const std::vector<int64_t>& rows, int64_t k, uint32_t seed) {
  std::vector<HostPart> parts;
  for (int64_t n : rows) parts.push_back(part_of(l, n, k, seed++));
  return stack(std::move(parts));
}

// The CPU reference's product of m rows of x [m, k] with the projection's dense weights: [m, n].
std::vector<float> cpu_product(const Projection& p, const std::vector<float>& x, int64_t m) {
  std::vector<float> y(static_cast<size_t>(m * p.w.n));
  const TensorView wv = make_view(DType::kF32, {p.w.n, p.w.k}, p.dense.data());
  cpu::linear(x.data(), m, wv, nullptr, y.data(), ThreadPool::global());
  return y;
}

// A part's shape only (takes() never reads the data).
cuda::QuantPart shape(WeightFormat f, int64_t n, int64_t k, int group = 0) {
  alignas(16) static uint8_t bytes[16];
  cuda::QuantPart p;
  p.format = f;
  p.bits = f == WeightFormat::kInt ? 8 : 0;
  p.group_size = group;
  p.data = bytes;
  p.scales = bytes;
  p.n = n;
  p.k = k;
  return p;
}
}  // namespace

class CudaW8DecodeTest : public QObject {
  Q_OBJECT
 private slots:
  // What it takes: FP8 or 8-bit integer parts of one format and scale layout, rows in order, at
  // most three, batches 1 to w8_decode_max_m (4); SwiGLU and RoPE/KV with the RMSNorm input only,
  // the residual add with a plain one. Everything else is left to the other kernels.
  void takes_what_it_can() {
    const int64_t k = 512;
    const cuda::GemvRopeKv rope{4, 2, 32};  // n = (4 + 2 * 2) * 32 = 256
    const auto fp8 = [&](int64_t n) { return shape(WeightFormat::kFp8, n, k); };
    const auto i8 = [&](int64_t n, int g) { return shape(WeightFormat::kInt, n, k, g); };
    const auto qkv = stacked({fp8(128), fp8(64), fp8(64)});
    for (int64_t m = 1; m <= 4; ++m)
      QVERIFY(cuda::quant_w8_parts_take(qkv, 256, m, GemvOutput::kStore));
    QVERIFY(!cuda::quant_w8_parts_take(qkv, 256, 5, GemvOutput::kStore));
    QVERIFY(cuda::quant_w8_parts_take(qkv, 256, 1, GemvOutput::kStore, nullptr, true));
    QVERIFY(cuda::quant_w8_parts_take(qkv, 256, 2, GemvOutput::kRopeKv, &rope, true));
    QVERIFY(!cuda::quant_w8_parts_take(qkv, 256, 1, GemvOutput::kRopeKv, &rope, false));
    QVERIFY(!cuda::quant_w8_parts_take(qkv, 256, 1, GemvOutput::kRopeKv, nullptr, true));
    const auto gu = stacked({i8(64, 128), i8(64, 128)});
    QVERIFY(cuda::quant_w8_parts_take(gu, 128, 4, GemvOutput::kSwiglu, nullptr, true));
    QVERIFY(!cuda::quant_w8_parts_take(gu, 128, 1, GemvOutput::kSwiglu, nullptr, false));
    QVERIFY(cuda::quant_w8_parts_take({i8(96, 512)}, 96, 3, GemvOutput::kResidualAdd));
    QVERIFY(
        !cuda::quant_w8_parts_take({i8(96, 512)}, 96, 1, GemvOutput::kResidualAdd, nullptr, true));
    // Groups of 32 and 64 at every batch (GGUF Q8_0 at batch 1 too since run 103); per channel; a
    // group that is not a power of two is refused.
    QVERIFY(cuda::quant_w8_parts_take({i8(16, 32)}, 16, 1, GemvOutput::kStore));
    QVERIFY(cuda::quant_w8_parts_take({i8(16, 32)}, 16, 2, GemvOutput::kStore));
    QVERIFY(cuda::quant_w8_parts_take({i8(16, 64)}, 16, 4, GemvOutput::kStore));
    QVERIFY(cuda::quant_w8_parts_take({i8(16, 512)}, 16, 1, GemvOutput::kStore));
    cuda::QuantPart g96 = shape(WeightFormat::kInt, 16, 384, 96);
    std::string why;
    QVERIFY(!cuda::quant_w8_parts_take({g96}, 16, 1, GemvOutput::kStore, nullptr, false, &why));
    QVERIFY2(why.find("power of two") != std::string::npos, why.c_str());
    // Mixed formats, mixed scale layouts, act-order, 4-bit codes, four parts, rows out of order,
    // rows that are not n, the switch at 0 or 2.
    QVERIFY(!cuda::quant_w8_parts_take(stacked({fp8(16), i8(16, 128)}), 32, 1, GemvOutput::kStore));
    QVERIFY(!cuda::quant_w8_parts_take(stacked({i8(16, 128), i8(16, 64)}), 32, 1,
                                       GemvOutput::kStore, nullptr, false, &why));
    QVERIFY2(why.find("laid out differently") != std::string::npos, why.c_str());
    cuda::QuantPart act_order = i8(16, 128);
    alignas(16) static int32_t g_idx[512];
    act_order.g_idx = g_idx;
    QVERIFY(!cuda::quant_w8_parts_take({act_order}, 16, 1, GemvOutput::kStore));
    cuda::QuantPart four_bit = i8(16, 128);
    four_bit.bits = 4;
    QVERIFY(!cuda::quant_w8_parts_take({four_bit}, 16, 1, GemvOutput::kStore));
    QVERIFY(!cuda::quant_w8_parts_take(stacked({fp8(8), fp8(8), fp8(8), fp8(8)}), 32, 1,
                                       GemvOutput::kStore));
    auto swapped = stacked({fp8(16), fp8(16)});
    std::swap(swapped[0].row_offset, swapped[1].row_offset);
    QVERIFY(!cuda::quant_w8_parts_take(swapped, 32, 1, GemvOutput::kStore));
    QVERIFY(!cuda::quant_w8_parts_take(stacked({fp8(16)}), 32, 1, GemvOutput::kStore));
    cuda::QuantPart off = fp8(16);
    off.w8_decode_max_m = 0;
    QVERIFY(!cuda::quant_w8_parts_take({off}, 16, 1, GemvOutput::kStore));
    off.w8_decode_max_m = 2;
    QVERIFY(cuda::quant_w8_parts_take({off}, 16, 2, GemvOutput::kStore));
    QVERIFY(!cuda::quant_w8_parts_take({off}, 16, 3, GemvOutput::kStore, nullptr, false, &why));
    QVERIFY2(why.find("LATHE_CUDA_W8_DECODE_MAX_M") != std::string::npos, why.c_str());
  }

  // Stores (f32 and the activation type) of every scale layout at batches 1-4 against the CPU
  // reference on the same activations, through the dispatcher as the runner calls it.
  void stores_match_cpu() {
    LATHE_REQUIRE_GPU();
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    uint32_t seed = 1;
    // k = 5120: two whole chunks of a warp's 2048 8-bit weights a row and half of a third, so the
    // loads' row pointers advance over chunks and the last chunk stops short.
    for (const int64_t k : {int64_t{1024}, int64_t{5120}})
      for (Layout l : kLayouts) {
        const Projection p = projection(l, {33, 16, 17}, k, seed += 3);
        for (DType t : {DType::kBF16, DType::kF16}) {
          cuda::LinearDispatcher disp(gemm.value().get(), t, true);
          for (int64_t m = 1; m <= 4; ++m) {
            const QString what = QString("%1 k=%2 dtype=%3 m=%4")
                                     .arg(layout_name(l))
                                     .arg(k)
                                     .arg(dtype_name(t).data())
                                     .arg(m);
            QVERIFY2(cuda::quant_w8_parts_take(p.w.parts, p.w.n, m, GemvOutput::kStore),
                     qPrintable(what));
            const std::vector<float> x = round_to(
                t, random_floats(static_cast<size_t>(m * k), 70 + static_cast<uint32_t>(m)));
            const std::vector<float> ref = cpu_product(p, x, m);
            Dev dx = Dev::from(encode16(t, x));
            Dev y32 = Dev::poisoned(m * p.w.n * 4), y16 = Dev::poisoned(m * p.w.n * 2);
            LATHE_QVERIFY_OK(disp.run(p.w, DType::kF32, dx.get(), y32.get(), m, nullptr));
            LATHE_QVERIFY_OK(disp.run(p.w, t, dx.get(), y16.get(), m, nullptr));
            LATHE_CUDA_CHECK(cudaDeviceSynchronize());
            const size_t count = static_cast<size_t>(m * p.w.n);
            const double e32 = rel_error(y32.download<float>(count), ref);
            // The decode kernel sums each vector's 8 products per f16 half in f16 (x scaled into
            // [4, 8), 2^-11 per rounding): ~5e-4 relative for these weights (a numpy model of it,
            // k = 1024, gave 4.7-4.9e-4).
            QVERIFY2(e32 <= 2e-3, qPrintable(what + QString(" f32: relative error %1").arg(e32)));
            const double e16 = rel_error(decode16(t, y16.download<uint16_t>(count)), ref);
            QVERIFY2(e16 <= 4e-3,
                     qPrintable(what + QString(" 16-bit: relative error %1").arg(e16)));
          }
        }
      }
  }

  // Activations far outside f16's range (the kernel stages x in f16, scaled per token by a power
  // of two): rows of bf16 x times 2^40 and 2^-40 match the CPU to the same relative error as rows
  // near 1, and a row of zeros gives zeros (no overflow to infinity, no NaN, no flush to zero).
  void activations_of_any_range() {
    LATHE_REQUIRE_GPU();
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 1024, m = 4;
    cuda::LinearDispatcher disp(gemm.value().get(), DType::kBF16, true);
    const float row_scale[m] = {0x1p40f, 1.f, 0.f, 0x1p-40f};
    for (Layout l : {Layout::kFp8Tensor, Layout::kIntG128Zeros}) {
      const Projection p = projection(l, {33, 16, 17}, k, 91);
      QVERIFY(cuda::quant_w8_parts_take(p.w.parts, p.w.n, m, GemvOutput::kStore));
      std::vector<float> x = random_floats(static_cast<size_t>(m * k), 93);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t i = 0; i < k; ++i) x[r * k + i] *= row_scale[r];
      x = round_to(DType::kBF16, x);
      const std::vector<float> ref = cpu_product(p, x, m);
      Dev dx = Dev::from(encode16(DType::kBF16, x));
      Dev y32 = Dev::poisoned(m * p.w.n * 4);
      LATHE_QVERIFY_OK(disp.run(p.w, DType::kF32, dx.get(), y32.get(), m, nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> y = y32.download<float>(static_cast<size_t>(m * p.w.n));
      for (int64_t r = 0; r < m; ++r) {
        const std::vector<float> yr(y.begin() + r * p.w.n, y.begin() + (r + 1) * p.w.n),
            rr(ref.begin() + r * p.w.n, ref.begin() + (r + 1) * p.w.n);
        const QString what = QString("%1 row scale %2").arg(layout_name(l)).arg(row_scale[r]);
        if (row_scale[r] == 0.f) {
          QVERIFY2(yr == std::vector<float>(yr.size(), 0.f), qPrintable(what));
          continue;
        }
        const double e = rel_error(yr, rr);
        QVERIFY2(e <= 2e-3, qPrintable(what + QString(": relative error %1").arg(e)));
      }
    }
  }

  // The epilogues against the kernel's own store followed by the unfused kernels, bit for bit:
  // the RMSNorm input (add_rms_norm, then the product), SwiGLU, RoPE/KV and the residual add.
  void epilogues_match_store_then_kernels() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 2048, inter = 40, hq = 4, hkv = 2, d = 64, block_size = 16, num_blocks = 8;
    Dev d_nw = Dev::from(random_floats(static_cast<size_t>(k), 21, 0.5f, 1.5f));
    for (Layout l : {Layout::kFp8Channel, Layout::kIntG128Zeros, Layout::kFp8Block}) {
      for (DType t : {DType::kBF16, DType::kF16}) {
        cuda::LinearDispatcher disp(gemm.value().get(), t, true);
        for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{4}}) {
          const QString what =
              QString("%1 dtype=%2 m=%3").arg(layout_name(l)).arg(dtype_name(t).data()).arg(m);
          // The normalized input, as the unfused path computes it.
          Dev d_res = Dev::from(random_floats(static_cast<size_t>(m * k), 22, -3.f, 3.f));
          Dev d_xn = Dev::poisoned(m * k * 2);
          cuda::AddRmsNormArgs na;
          na.residual = d_res.as<float>();
          na.weight = d_nw.as<float>();
          na.out = d_xn.get();
          na.rows = static_cast<int32_t>(m);
          na.dim = k;
          na.eps = 1e-6f;
          na.dtype = t;
          LATHE_QVERIFY_OK(cuda::add_rms_norm(na, st));
          const cuda::TileNormInput ni{d_res.as<float>(), d_nw.as<float>(), 1e-6f};

          // Stored q|k|v with the norm input.
          const Projection qkv = projection(l, {hq * d, hkv * d, hkv * d}, k, 5);
          const int64_t n = qkv.w.n;
          QVERIFY(disp.takes_norm_input(qkv.w, m, GemvOutput::kStore));
          for (DType out : {DType::kF32, t}) {
            const int64_t bytes = out == DType::kF32 ? 4 : 2;
            Dev y_ref = Dev::poisoned(m * n * bytes), y = Dev::poisoned(m * n * bytes);
            LATHE_QVERIFY_OK(disp.run(qkv.w, out, d_xn.get(), y_ref.get(), m, st));
            LATHE_QVERIFY_OK(
                disp.run(qkv.w, out, nullptr, y.get(), m, st, GemvOutput::kStore, {}, &ni));
            LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
            QVERIFY2(y.download<uint8_t>(static_cast<size_t>(m * n * bytes)) ==
                         y_ref.download<uint8_t>(static_cast<size_t>(m * n * bytes)),
                     qPrintable(what + " norm store"));
          }

          // RoPE/KV, both styles, with and without bias.
          const int64_t cache_elems = num_blocks * block_size * hkv * d;
          const RopeKvShape rshape{hq, hkv, d, static_cast<int32_t>(block_size), num_blocks};
          const RopeKvDeviceInputs in = rope_kv_device_inputs(rshape, m);
          for (RopeStyle rs : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
            for (bool bias : {false, true}) {
              RopeKvCaches c = rope_kv_caches(t, cache_elems);
              Dev y_ref = Dev::poisoned(m * n * 2), y = Dev::poisoned(m * n * 2);
              LATHE_QVERIFY_OK(disp.run(qkv.w, t, d_xn.get(), y_ref.get(), m, st));
              const cuda::QkvRopeKvArgs rk = qkv_rope_kv_args(y_ref.get(), m, rshape, in, rs, bias,
                                                              c.k_ref.get(), c.v_ref.get(), t);
              LATHE_QVERIFY_OK(cuda::qkv_rope_kv(rk, st));
              const cuda::GemvRopeKv rp = gemv_rope_kv_like(rk, c.k.get(), c.v.get());
              QVERIFY(disp.takes_norm_input(qkv.w, m, GemvOutput::kRopeKv, &rp));
              LATHE_QVERIFY_OK(
                  disp.run(qkv.w, t, nullptr, y.get(), m, st, GemvOutput::kRopeKv, rp, &ni));
              LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
              const QString diff = rope_kv_bit_difference(y, y_ref, m * n, c, cache_elems);
              QVERIFY2(
                  diff.isEmpty(),
                  qPrintable(what +
                             QString(" rope style=%1 bias=%2").arg(static_cast<int>(rs)).arg(bias) +
                             diff));
            }
          }

          // SwiGLU on gate and up parts.
          const Projection gu = projection(l, {inter, inter}, k, 9);
          QVERIFY(disp.takes_norm_input(gu.w, m, GemvOutput::kSwiglu));
          QVERIFY(!disp.takes_epilogue(gu.w, m, GemvOutput::kSwiglu));
          Dev d_gu = Dev::poisoned(m * 2 * inter * 2), d_ref = Dev::poisoned(m * inter * 2),
              d_act = Dev::poisoned(m * inter * 2);
          LATHE_QVERIFY_OK(disp.run(gu.w, t, d_xn.get(), d_gu.get(), m, st));
          LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_ref.get(), m, inter, st));
          LATHE_QVERIFY_OK(
              disp.run(gu.w, t, nullptr, d_act.get(), m, st, GemvOutput::kSwiglu, {}, &ni));
          LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
          QVERIFY2(d_act.download<uint16_t>(static_cast<size_t>(m * inter)) ==
                       d_ref.download<uint16_t>(static_cast<size_t>(m * inter)),
                   qPrintable(what + " swiglu"));

          // The residual add (down): residual += float(round(product)).
          const Projection dn = projection(l, {96}, k, 13);
          QVERIFY(disp.takes_epilogue(dn.w, m, GemvOutput::kResidualAdd));
          Dev d_y = Dev::poisoned(m * 96 * 2);
          const std::vector<float> r0 = random_floats(static_cast<size_t>(m * 96), 16);
          Dev d_r = Dev::from(r0);
          LATHE_QVERIFY_OK(disp.run(dn.w, t, d_xn.get(), d_y.get(), m, st));
          LATHE_QVERIFY_OK(
              disp.run(dn.w, t, d_xn.get(), d_r.get(), m, st, GemvOutput::kResidualAdd));
          LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
          const std::vector<float> y =
              decode16(t, d_y.download<uint16_t>(static_cast<size_t>(m * 96)));
          std::vector<float> want = r0;
          for (size_t i = 0; i < want.size(); ++i) want[i] += y[i];
          QVERIFY2(d_r.download<float>(static_cast<size_t>(m * 96)) == want,
                   qPrintable(what + " residual add"));
        }
      }
    }
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // Bad calls are refused with a message, nothing launched: an epilogue's output in f32, codes
  // that are not 16-byte aligned, parts whose rows are not the product's, an unknown batch.
  void refuses_bad_calls() {
    LATHE_REQUIRE_GPU();
    const int64_t k = 512;
    const Projection gu = projection(Layout::kFp8Channel, {32, 32}, k, 31);
    Dev d_res = Dev::from(random_floats(static_cast<size_t>(k), 14));
    Dev d_nw = Dev::from(random_floats(static_cast<size_t>(k), 15, 0.5f, 1.5f));
    const cuda::TileNormInput ni{d_res.as<float>(), d_nw.as<float>(), 1e-6f};
    Dev d_y = Dev::poisoned(64 * 4);
    Status s = cuda::quant_gemv_w8_parts(gu.w.parts, DType::kBF16, nullptr, DType::kF32, d_y.get(),
                                         64, 1, GemvOutput::kSwiglu, {}, nullptr, &ni);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    QVERIFY2(s.message().find("activation type") != std::string::npos, s.message().c_str());
    s = cuda::quant_gemv_w8_parts(gu.w.parts, DType::kBF16, nullptr, DType::kBF16, d_y.get(), 64, 5,
                                  GemvOutput::kStore, {}, nullptr, &ni);
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY2(s.message().find("batches of 1 to 4") != std::string::npos, s.message().c_str());
    s = cuda::quant_gemv_w8_parts(gu.w.parts, DType::kBF16, nullptr, DType::kBF16, d_y.get(), 48, 1,
                                  GemvOutput::kStore, {}, nullptr, &ni);
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY2(s.message().find("rows") != std::string::npos, s.message().c_str());
    // decode_gemv itself: misaligned codes, parts out of order, a bad scale layout.
    cuda::DecodeGemvArgs a;
    a.weights = cuda::GemvWeights::kFp8;
    a.n = 64;
    a.k = k;
    a.m = 1;
    a.input = cuda::GemvInput::kRmsNorm;
    a.residual = d_res.as<float>();
    a.norm_weight = d_nw.as<float>();
    a.y = d_y.get();
    a.w8.nparts = 2;
    a.w8.parts[0].codes = static_cast<const uint8_t*>(gu.w.parts[0].data) + 1;
    a.w8.parts[0].scales = gu.w.parts[0].scales;
    a.w8.parts[1].codes = static_cast<const uint8_t*>(gu.w.parts[1].data);
    a.w8.parts[1].scales = gu.w.parts[1].scales;
    a.w8.parts[1].row_begin = 32;
    s = cuda::decode_gemv(a, nullptr);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    QVERIFY2(s.message().find("aligned") != std::string::npos, s.message().c_str());
    a.w8.parts[0].codes = static_cast<const uint8_t*>(gu.w.parts[0].data);
    a.w8.parts[1].row_begin = 64;
    s = cuda::decode_gemv(a, nullptr);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    QVERIFY2(s.message().find("in order") != std::string::npos, s.message().c_str());
    a.w8.parts[1].row_begin = 32;
    a.w8.scales.group_shift = 2;
    s = cuda::decode_gemv(a, nullptr);
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    a.w8.scales.group_shift = 31;
    a.w8.scales.row_stride = 1;
    LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

QTEST_GUILESS_MAIN(CudaW8DecodeTest)
#include "cuda_w8_decode_test.moc"

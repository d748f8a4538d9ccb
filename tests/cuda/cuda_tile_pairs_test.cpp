// The 4-bit tile kernel's one-launch-per-projection mode (quant_tile_plan.h, quant_gemv_tiles.cuh):
// the plan for real projection shapes and what it refuses (host only, runs everywhere), and on the
// GPU the fused products (stores of several parts, SwiGLU, RoPE/KV) against the unfused sequence
// they replace (one launch per part, then the swiglu / qkv_rope_kv kernel), bit for bit.
#include <QtTest>

#include <cmath>
#include <random>

#include "cuda_test_util.h"
#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/backend/cuda/quant_tile_plan.h"
#include "engine/backend/cuda/swiglu.h"
#include "quant_parts_test_util.h"
#include "rope_kv_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// A part's shape only (the plan never reads the data).
cuda::QuantPart shape(int64_t n, int64_t k, int64_t row_offset, int group = 128) {
  cuda::QuantPart p;
  p.format = WeightFormat::kInt;
  p.bits = 4;
  p.group_size = group;
  p.n = n;
  p.k = k;
  p.row_offset = row_offset;
  p.int4_tiles = true;
  return p;
}

cuda::GemvRopeKv rope_of(int heads, int kv_heads, int head_dim, RopeStyle style) {
  cuda::GemvRopeKv r;
  r.num_heads = heads;
  r.num_kv_heads = kv_heads;
  r.head_dim = head_dim;
  r.style = style;
  return r;
}

// Random codes in the tile layout (any 32-bit word is a valid set of eight codes), scales and zero
// points, on the device.
struct TiledPart {
  cuda::QuantPart part;
  std::vector<Dev> buffers;
};

TiledPart random_tiled(int64_t n, int64_t k, int group, bool zeros, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> words(static_cast<size_t>(n * k / 8));
  for (uint32_t& w : words) w = static_cast<uint32_t>(rng());
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  std::vector<uint16_t> scales(static_cast<size_t>(n * (k / group)));
  std::vector<uint8_t> zp(scales.size());
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = f32_to_f16(sc(rng));
    zp[i] = static_cast<uint8_t>(rng() % 16);
  }
  TiledPart t;
  t.buffers.push_back(Dev::from(words));
  t.buffers.push_back(Dev::from(scales));
  t.buffers.push_back(Dev::from(zp));
  t.part = shape(n, k, 0, group);
  t.part.data = t.buffers[0].get();
  t.part.scales = t.buffers[1].get();
  t.part.zeros = zeros ? t.buffers[2].as<uint8_t>() : nullptr;
  t.part.int4_norm_max_m = 8;  // every batch the kernel takes (the default stops at 1)
  return t;
}

// A projection of parts stacked by rows.
cuda::DeviceLinear stack(std::vector<TiledPart*> parts, int64_t k) {
  cuda::DeviceLinear w;
  w.name = "test";
  w.k = k;
  w.format = WeightFormat::kInt;
  for (TiledPart* t : parts) {
    t->part.row_offset = w.n;
    w.parts.push_back(t->part);
    w.n += t->part.n;
  }
  return w;
}

}  // namespace

class CudaTilePairsTest : public QObject {
  Q_OBJECT
 private slots:
  // Llama-3.1-8B's projections: q/k halves of heads, v adjacent tiles, gate and up across parts.
  void plans_cover_the_projections() {
    const int64_t h = 4096, qs = 4096, kvs = 1024, inter = 14336;
    const std::vector<cuda::QuantPart> qkv = {shape(qs, h, 0), shape(kvs, h, qs),
                                              shape(kvs, h, qs + kvs)};
    const cuda::GemvRopeKv neox = rope_of(32, 8, 128, RopeStyle::kNeox);
    auto plan = cuda::plan_tile_pairs(qkv, qs + 2 * kvs, cuda::GemvOutput::kRopeKv, &neox);
    LATHE_QVERIFY_OK(plan.status());
    QCOMPARE(plan.value().tasks(), 128 + 32 + 32);
    QCOMPARE(plan.value().tiles_per_head, 8);
    QVERIFY(plan.value().pairing[0] == cuda::TilePairing::kHeadHalves);
    QVERIFY(plan.value().pairing[1] == cuda::TilePairing::kHeadHalves);
    QVERIFY(plan.value().pairing[2] == cuda::TilePairing::kAdjacent);
    QCOMPARE(plan.value().tiles_per_task(), 2);
    const cuda::GemvRopeKv inter_style = rope_of(32, 8, 128, RopeStyle::kInterleaved);
    plan = cuda::plan_tile_pairs(qkv, qs + 2 * kvs, cuda::GemvOutput::kRopeKv, &inter_style);
    LATHE_QVERIFY_OK(plan.status());
    for (int i = 0; i < 3; ++i) QVERIFY(plan.value().pairing[i] == cuda::TilePairing::kAdjacent);
    plan = cuda::plan_tile_pairs(qkv, qs + 2 * kvs, cuda::GemvOutput::kStore, nullptr);
    LATHE_QVERIFY_OK(plan.status());
    QCOMPARE(plan.value().tasks(), 192);

    const std::vector<cuda::QuantPart> gu = {shape(inter, h, 0), shape(inter, h, inter)};
    plan = cuda::plan_tile_pairs(gu, 2 * inter, cuda::GemvOutput::kSwiglu, nullptr);
    LATHE_QVERIFY_OK(plan.status());
    QCOMPARE(plan.value().tasks(), 896);
    QVERIFY(plan.value().pairing[0] == cuda::TilePairing::kAcrossParts);
    // One gate|up part: gate row t pairs with up row inter + t.
    plan = cuda::plan_tile_pairs({shape(2 * inter, h, 0)}, 2 * inter, cuda::GemvOutput::kSwiglu,
                                 nullptr);
    LATHE_QVERIFY_OK(plan.status());
    QCOMPARE(plan.value().tiles_per_head, 2 * 896);
    QCOMPARE(plan.value().tasks(), 896);

    const cuda::TilePlan single = cuda::single_tile_plan(shape(h, inter, 0));
    QCOMPARE(single.tasks(), 256);
    QCOMPARE(single.tiles_per_task(), 1);
  }

  // Each refusal names what does not fit (the caller then runs the unfused sequence).
  void plans_refuse_what_does_not_fit() {
    const cuda::GemvRopeKv neox = rope_of(4, 2, 128, RopeStyle::kNeox);
    auto refused = [](const Result<cuda::TilePlan>& r, const char* words) {
      return !r.is_ok() && r.status().message().find(words) != std::string::npos;
    };
    QVERIFY(
        refused(cuda::plan_tile_pairs({shape(48, 256, 0)}, 48, cuda::GemvOutput::kStore, nullptr),
                "odd number"));
    // A head size whose halves are not whole tiles (80 / 2 = 40 rows).
    const cuda::GemvRopeKv odd = rope_of(4, 2, 80, RopeStyle::kNeox);
    QVERIFY(refused(
        cuda::plan_tile_pairs({shape(320, 256, 0), shape(160, 256, 320), shape(160, 256, 480)}, 640,
                              cuda::GemvOutput::kRopeKv, &odd),
        "heads"));
    // One part over the k and v rows.
    QVERIFY(refused(cuda::plan_tile_pairs({shape(512, 256, 0), shape(512, 256, 512)}, 1024,
                                          cuda::GemvOutput::kRopeKv, &neox),
                    "spans k and v"));
    QVERIFY(
        refused(cuda::plan_tile_pairs({shape(512, 256, 0)}, 1000, cuda::GemvOutput::kRopeKv, &neox),
                "not the q, k and v heads"));
    QVERIFY(refused(
        cuda::plan_tile_pairs({shape(512, 256, 0)}, 1024, cuda::GemvOutput::kRopeKv, nullptr),
        "without its parameters"));
    cuda::QuantPart rows = shape(64, 256, 0);
    rows.int4_tiles = false;
    QVERIFY(refused(cuda::plan_tile_pairs({rows}, 64, cuda::GemvOutput::kStore, nullptr),
                    "tile layout"));
    cuda::QuantPart off = shape(64, 256, 0);
    off.int4_tile_pairs = false;
    QVERIFY(refused(cuda::plan_tile_pairs({off}, 64, cuda::GemvOutput::kStore, nullptr),
                    "LATHE_CUDA_INT4_TILE_PAIRS=0"));
    QVERIFY(refused(cuda::plan_tile_pairs({shape(64, 256, 0), shape(64, 512, 64)}, 128,
                                          cuda::GemvOutput::kStore, nullptr),
                    "input width or group size"));
    QVERIFY(refused(cuda::plan_tile_pairs({shape(64, 256, 0), shape(32, 256, 64)}, 96,
                                          cuda::GemvOutput::kSwiglu, nullptr),
                    "SwiGLU needs"));
    QVERIFY(refused(cuda::plan_tile_pairs({shape(32, 256, 0), shape(32, 256, 32),
                                           shape(32, 256, 64), shape(32, 256, 96)},
                                          128, cuda::GemvOutput::kStore, nullptr),
                    "1 to 3 parts"));
    QVERIFY(refused(
        cuda::plan_tile_pairs({shape(64, 256, 0)}, 64, cuda::GemvOutput::kResidualAdd, nullptr),
        "no such epilogue"));
    // One part's adjacent pairs (the streaming kernel's stores and residual adds): whole pairs
    // only.
    cuda::TilePlan plan;
    QVERIFY(!cuda::adjacent_tile_plan(shape(48, 256, 0), &plan));
    QVERIFY(cuda::adjacent_tile_plan(shape(4096, 14336, 0), &plan));
    QCOMPARE(plan.nparts, 1);
    QVERIFY(plan.pairing[0] == cuda::TilePairing::kAdjacent);
    QCOMPARE(plan.tasks(), 128);
  }

  // Stores of several parts (f32 and the activation type), SwiGLU over a gate and an up part and
  // over one gate|up part, RoPE/KV in both styles with and without bias and a skipped slot: equal
  // to the unfused sequence bit for bit, for M = 1, 3, 8, both activation types, with and without
  // zero points; through LinearDispatcher as the forward pass calls it.
  void tile_pairs_match_unfused() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 512, inter = 48, hq = 4, hkv = 2, block_size = 16, num_blocks = 8;
    for (DType t : {DType::kBF16, DType::kF16}) {
      cuda::LinearDispatcher disp(gemm.value().get(), t, true);
      for (bool zeros : {false, true}) {
        TiledPart gate = random_tiled(inter, k, 128, zeros, 1),
                  up = random_tiled(inter, k, 128, zeros, 2);
        TiledPart gu1 = random_tiled(2 * inter, k, 64, zeros, 3);
        for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}}) {
          Dev d_x = Dev::from(encode16(t, random_floats(m * k, 40 + static_cast<uint32_t>(m))));
          const QString what =
              QString("dtype=%1 zeros=%2 m=%3").arg(static_cast<int>(t)).arg(zeros).arg(m);
          // SwiGLU, on two parts and on one.
          for (int variant = 0; variant < 2; ++variant) {
            const cuda::DeviceLinear w = variant == 0 ? stack({&gate, &up}, k) : stack({&gu1}, k);
            QVERIFY(disp.takes_epilogue(w, m, cuda::GemvOutput::kSwiglu));
            Dev d_gu = Dev::poisoned(m * 2 * inter * 2), d_ref = Dev::poisoned(m * inter * 2),
                d_act = Dev::poisoned(m * inter * 2);
            LATHE_QVERIFY_OK(per_part(w, t, d_x.get(), t, d_gu.get(), m, st));
            LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_ref.get(), m, inter, st));
            LATHE_QVERIFY_OK(
                disp.run(w, t, d_x.get(), d_act.get(), m, st, cuda::GemvOutput::kSwiglu));
            LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
            QVERIFY2(d_act.download<uint16_t>(m * inter) == d_ref.download<uint16_t>(m * inter),
                     qPrintable(what + QString(" swiglu variant %1").arg(variant)));
          }
          for (int64_t d : {int64_t{64}, int64_t{128}}) {
            TiledPart q = random_tiled(hq * d, k, 128, zeros, 4),
                      kp = random_tiled(hkv * d, k, 128, zeros, 5),
                      v = random_tiled(hkv * d, k, 128, zeros, 6);
            const cuda::DeviceLinear w = stack({&q, &kp, &v}, k);
            const int64_t n = w.n, cache_elems = num_blocks * block_size * hkv * d;
            // Stores of the three parts in one launch, f32 and the activation type.
            for (DType out : {DType::kF32, t}) {
              const int64_t bytes = out == DType::kF32 ? 4 : 2;
              Dev y_ref = Dev::poisoned(m * n * bytes), y = Dev::poisoned(m * n * bytes);
              LATHE_QVERIFY_OK(per_part(w, t, d_x.get(), out, y_ref.get(), m, st));
              LATHE_QVERIFY_OK(disp.run(w, out, d_x.get(), y.get(), m, st));
              LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
              QVERIFY2(y.download<uint8_t>(m * n * bytes) == y_ref.download<uint8_t>(m * n * bytes),
                       qPrintable(what + " store"));
            }
            const RopeKvShape shape{hq, hkv, d, static_cast<int32_t>(block_size), num_blocks};
            const RopeKvDeviceInputs in = rope_kv_device_inputs(shape, m);
            for (RopeStyle rs : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
              for (bool bias : {false, true}) {
                RopeKvCaches c = rope_kv_caches(t, cache_elems);
                Dev y_ref = Dev::poisoned(m * n * 2), y = Dev::poisoned(m * n * 2);
                LATHE_QVERIFY_OK(per_part(w, t, d_x.get(), t, y_ref.get(), m, st));
                const cuda::QkvRopeKvArgs rk = qkv_rope_kv_args(y_ref.get(), m, shape, in, rs, bias,
                                                                c.k_ref.get(), c.v_ref.get(), t);
                LATHE_QVERIFY_OK(cuda::qkv_rope_kv(rk, st));
                const cuda::GemvRopeKv rp = gemv_rope_kv_like(rk, c.k.get(), c.v.get());
                QVERIFY(disp.takes_epilogue(w, m, cuda::GemvOutput::kRopeKv, &rp));
                LATHE_QVERIFY_OK(
                    disp.run(w, t, d_x.get(), y.get(), m, st, cuda::GemvOutput::kRopeKv, rp));
                LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
                const QString rw =
                    what +
                    QString(" d=%1 style=%2 bias=%3").arg(d).arg(static_cast<int>(rs)).arg(bias);
                const QString diff = rope_kv_bit_difference(y, y_ref, m * n, c, cache_elems);
                QVERIFY2(diff.isEmpty(), qPrintable(rw + diff));
              }
            }
          }
        }
      }
    }
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // The RMSNorm input (the kernel normalizes the residual itself) against add_rms_norm followed by
  // the same product, and the residual-add epilogue against the stored product added on the host:
  // bit for bit, M = 1, 2, 5, 8, both activation types.
  void norm_input_and_residual_add_match_unfused() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto gemm = cuda::Gemm::create();
    QVERIFY(gemm.is_ok());
    const int64_t k = 1024, inter = 64, hidden = 96;
    for (DType t : {DType::kBF16, DType::kF16}) {
      cuda::LinearDispatcher disp(gemm.value().get(), t, true);
      TiledPart gate = random_tiled(inter, k, 128, true, 11),
                up = random_tiled(inter, k, 128, true, 12);
      const cuda::DeviceLinear gu = stack({&gate, &up}, k);
      TiledPart down = random_tiled(hidden, k, 128, false, 13);
      const cuda::DeviceLinear dn = stack({&down}, k);
      Dev d_w = Dev::from(random_floats(static_cast<size_t>(k), 14, 0.5f, 1.5f));
      for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{8}}) {
        const QString what = QString("dtype=%1 m=%2").arg(static_cast<int>(t)).arg(m);
        const std::vector<float> res = random_floats(static_cast<size_t>(m * k), 15, -3.f, 3.f);
        Dev d_res = Dev::from(res);
        // Unfused: the norm kernel, then the SwiGLU product on its output.
        Dev d_xn = Dev::poisoned(m * k * 2), d_ref = Dev::poisoned(m * inter * 2),
            d_act = Dev::poisoned(m * inter * 2);
        cuda::AddRmsNormArgs na;
        na.residual = d_res.as<float>();
        na.weight = d_w.as<float>();
        na.out = d_xn.get();
        na.rows = m;
        na.dim = k;
        na.eps = 1e-6f;
        na.dtype = t;
        LATHE_QVERIFY_OK(cuda::add_rms_norm(na, st));
        LATHE_QVERIFY_OK(
            disp.run(gu, t, d_xn.get(), d_ref.get(), m, st, cuda::GemvOutput::kSwiglu));
        QVERIFY(disp.takes_norm_input(gu, m, cuda::GemvOutput::kSwiglu));
        const cuda::TileNormInput ni{d_res.as<float>(), d_w.as<float>(), 1e-6f};
        LATHE_QVERIFY_OK(
            disp.run(gu, t, nullptr, d_act.get(), m, st, cuda::GemvOutput::kSwiglu, {}, &ni));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        QVERIFY2(d_act.download<uint16_t>(m * inter) == d_ref.download<uint16_t>(m * inter),
                 qPrintable(what + " norm input"));
        // Residual add: residual += float(round(down(x))).
        QVERIFY(disp.takes_epilogue(dn, m, cuda::GemvOutput::kResidualAdd));
        Dev d_y = Dev::poisoned(m * hidden * 2);
        const std::vector<float> r0 = random_floats(static_cast<size_t>(m * hidden), 16);
        Dev d_r = Dev::from(r0);
        LATHE_QVERIFY_OK(disp.run(dn, t, d_xn.get(), d_y.get(), m, st));
        LATHE_QVERIFY_OK(
            disp.run(dn, t, d_xn.get(), d_r.get(), m, st, cuda::GemvOutput::kResidualAdd));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        const std::vector<float> y = decode16(t, d_y.download<uint16_t>(m * hidden));
        std::vector<float> want = r0;
        for (size_t i = 0; i < want.size(); ++i) want[i] += y[i];
        QVERIFY2(d_r.download<float>(m * hidden) == want, qPrintable(what + " residual add"));
      }
      // Above batch 8 neither is offered (the caller runs the norm and stores the product), nor the
      // norm input above the parts' int4_norm_max_m.
      QVERIFY(!disp.takes_norm_input(gu, 9, cuda::GemvOutput::kSwiglu));
      cuda::DeviceLinear gu2 = gu;
      for (cuda::QuantPart& p : gu2.parts) p.int4_norm_max_m = 2;
      QVERIFY(disp.takes_norm_input(gu2, 2, cuda::GemvOutput::kSwiglu));
      QVERIFY(!disp.takes_norm_input(gu2, 3, cuda::GemvOutput::kSwiglu));
      QVERIFY(!disp.takes_epilogue(dn, 9, cuda::GemvOutput::kResidualAdd));
    }
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // The streaming kernel (quant_gemv_stream.cu) against the tile kernel it replaces, bit for bit:
  // a persistent grid with several tasks per block, rings that wrap inside a task (k 14336: 14
  // stages per task) and across tasks, warps with no chunks (k 576), 1 to 8 stages, 1 to 4 blocks
  // per multiprocessor, f16 and f32 scales, with and without zero points; stored in f32 and bf16,
  // and added to a residual.
  void stream_kernel_matches_tile_kernel() {
    LATHE_REQUIRE_GPU();
    if (cuda::current_device_limits().major < 9) QSKIP("the streaming kernel needs sm_90 or later");
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    struct Shape {
      int64_t n, k;
      int group;
      bool zeros, f32_scales;
    };
    const Shape shapes[] = {{9600, 4096, 128, true, false},
                            {512, 14336, 128, false, false},
                            {1024, 1024, 64, true, true},
                            {96, 576, 64, false, false}};
    const DType t = DType::kBF16;
    uint32_t seed = 20;
    for (const Shape& sh : shapes) {
      TiledPart tp = random_tiled(sh.n, sh.k, sh.group, sh.zeros, ++seed);
      Dev f32_scales;
      if (sh.f32_scales) {
        const std::vector<uint16_t> h = tp.buffers[1].download<uint16_t>(sh.n * (sh.k / sh.group));
        std::vector<float> f(h.size());
        for (size_t i = 0; i < h.size(); ++i) f[i] = f16_to_f32(h[i]);
        f32_scales = Dev::from(f);
        tp.part.scales = f32_scales.get();
        tp.part.scale_dtype = DType::kF32;
      }
      cuda::QuantPart tiles = tp.part;
      tiles.int4_stream_max_m = 0;  // the tile kernel: the reference
      for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}}) {
        Dev d_x = Dev::from(encode16(t, random_floats(m * sh.k, ++seed)));
        const std::vector<float> r0 = random_floats(static_cast<size_t>(m * sh.n), ++seed);
        Dev y_ref = Dev::poisoned(m * sh.n * 4), r_ref = Dev::from(r0);
        LATHE_QVERIFY_OK(
            cuda::quant_gemv(tiles, t, d_x.get(), DType::kF32, y_ref.get(), sh.n, m, st));
        LATHE_QVERIFY_OK(
            cuda::quant_gemv_residual_add(tiles, t, d_x.get(), r_ref.as<float>(), sh.n, m, st));
        Dev yb_ref = Dev::poisoned(m * sh.n * 2);
        LATHE_QVERIFY_OK(cuda::quant_gemv(tiles, t, d_x.get(), t, yb_ref.get(), sh.n, m, st));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        const std::vector<uint8_t> want = y_ref.download<uint8_t>(m * sh.n * 4),
                                   want_b = yb_ref.download<uint8_t>(m * sh.n * 2),
                                   want_r = r_ref.download<uint8_t>(m * sh.n * 4);
        for (auto [stages, blocks] :
             {std::pair{4, 1}, std::pair{1, 1}, std::pair{3, 2}, std::pair{8, 4}}) {
          cuda::QuantPart p = tp.part;
          p.int4_stream_max_m = 8;  // every batch the kernel takes (the default stops at 2)
          p.int4_stream_stages = stages;
          p.int4_stream_blocks = blocks;
          const QString what = QString("n=%1 k=%2 m=%3 stages=%4 blocks=%5")
                                   .arg(sh.n)
                                   .arg(sh.k)
                                   .arg(m)
                                   .arg(stages)
                                   .arg(blocks);
          Dev y = Dev::poisoned(m * sh.n * 4), yb = Dev::poisoned(m * sh.n * 2), r = Dev::from(r0);
          LATHE_QVERIFY_OK(cuda::quant_gemv(p, t, d_x.get(), DType::kF32, y.get(), sh.n, m, st));
          LATHE_QVERIFY_OK(cuda::quant_gemv(p, t, d_x.get(), t, yb.get(), sh.n, m, st));
          LATHE_QVERIFY_OK(
              cuda::quant_gemv_residual_add(p, t, d_x.get(), r.as<float>(), sh.n, m, st));
          LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
          QVERIFY2(y.download<uint8_t>(m * sh.n * 4) == want, qPrintable(what + " f32 store"));
          QVERIFY2(yb.download<uint8_t>(m * sh.n * 2) == want_b, qPrintable(what + " bf16 store"));
          QVERIFY2(r.download<uint8_t>(m * sh.n * 4) == want_r, qPrintable(what + " residual add"));
        }
      }
    }
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  // What quant_gemv_tile_pairs refuses, each with a message naming it.
  void tile_pairs_refuse_bad_calls() {
    LATHE_REQUIRE_GPU();
    const int64_t k = 256, inter = 32;
    TiledPart gate = random_tiled(inter, k, 128, false, 7),
              up = random_tiled(inter, k, 128, false, 8);
    const cuda::DeviceLinear w = stack({&gate, &up}, k);
    Dev d_x = Dev::from(encode16(DType::kBF16, random_floats(9 * k, 9)));
    Dev d_y = Dev::poisoned(9 * 2 * inter * 4);
    auto refused = [&](DType out, int64_t m, cuda::GemvOutput o, const char* words) {
      const Status s = cuda::quant_gemv_tile_pairs(w.parts, DType::kBF16, d_x.get(), out, d_y.get(),
                                                   w.n, m, o, cuda::GemvRopeKv{}, nullptr);
      return !s.is_ok() && s.message().find(words) != std::string::npos;
    };
    QVERIFY(refused(DType::kBF16, 9, cuda::GemvOutput::kSwiglu, "batches of 1 to 8"));
    QVERIFY(refused(DType::kF32, 1, cuda::GemvOutput::kSwiglu, "activation type"));
    QVERIFY(refused(DType::kBF16, 1, cuda::GemvOutput::kRopeKv, "RoPE/KV output needs"));
    QVERIFY(refused(DType::kF16, 1, cuda::GemvOutput::kStore, "output of that type or f32"));
    const cuda::TileNormInput unaligned{d_y.as<float>() + 1, d_y.as<float>(), 1e-6f};
    const Status s = cuda::quant_gemv_tile_pairs(w.parts, DType::kBF16, nullptr, DType::kBF16,
                                                 d_y.get(), w.n, 1, cuda::GemvOutput::kSwiglu,
                                                 cuda::GemvRopeKv{}, nullptr, &unaligned);
    QVERIFY2(!s.is_ok() && s.message().find("16-byte aligned") != std::string::npos,
             s.message().c_str());
  }
};

QTEST_GUILESS_MAIN(CudaTilePairsTest)
#include "cuda_tile_pairs_test.moc"

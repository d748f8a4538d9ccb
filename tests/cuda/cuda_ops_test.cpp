// Parity of the CUDA element-wise and matmul ops with the CPU reference
// (engine/backend/cpu/cpu_ops.h) on random inputs, for bf16 and f16. Tolerances are relative L2
// errors ||gpu - cpu|| / ||cpu||:
//   exact (0): embedding, cast, random weights, the residual of add_rms_norm (same float
//   operations); one rounding of the output to the 16-bit type: bf16 <= 8e-3 (2^-9 per element,
//   typically ~3e-3), f16 <= 1e-3; float32 outputs of matmuls over 16-bit inputs: <= 1e-5
//   (summation order only); float32 outputs of decode_gemv over a normalized input: <= 1e-4 (the
//   16-bit rounding of the normalized x may differ where the inverse RMS differs in its last bit).
// Outputs are poisoned (NaN) before each run, so an unwritten element fails the comparison.
#include <QtTest>

#include <numeric>
#include <random>

#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_dummy_weights.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cast.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/backend/cuda/swiglu.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_config.h"
#include "rope_kv_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

double out_tol(DType t) {
  return t == DType::kBF16 ? 8e-3 : 1e-3;
}

std::vector<float> download16(DType t, const Dev& d, size_t n) {
  return decode16(t, d.download<uint16_t>(n));
}

// The q and k heads of `tokens` rows of a QKV output ([tokens, (hq + 2 hkv) * d]), each packed.
std::pair<std::vector<float>, std::vector<float>> split_qk(const std::vector<float>& qkv,
                                                           int64_t tokens, int64_t hq, int64_t hkv,
                                                           int64_t d) {
  const int64_t row = (hq + 2 * hkv) * d;
  std::vector<float> q(tokens * hq * d), k(tokens * hkv * d);
  for (int64_t i = 0; i < tokens; ++i) {
    std::copy(qkv.begin() + i * row, qkv.begin() + i * row + hq * d, q.begin() + i * hq * d);
    std::copy(qkv.begin() + i * row + hq * d, qkv.begin() + i * row + (hq + hkv) * d,
              k.begin() + i * hkv * d);
  }
  return {q, k};
}

}  // namespace

class CudaOpsTest : public QObject {
  Q_OBJECT
 private slots:
  void embedding_matches_cpu() {
    LATHE_REQUIRE_GPU();
    for (DType t : {DType::kBF16, DType::kF16}) {
      const int64_t vocab = 1000, dim = 576, n = 37;
      const std::vector<float> table = round_to(t, random_floats(vocab * dim, 1));
      std::vector<int32_t> ids(n);
      std::mt19937 rng(2);
      for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
      const std::vector<uint16_t> enc = encode16(t, table);
      Dev d_table = Dev::from(enc), d_ids = Dev::from(ids), d_out = Dev::poisoned(n * dim * 4);
      LATHE_QVERIFY_OK(cuda::embedding(t, d_table.get(), vocab, dim, d_ids.as<int32_t>(), n,
                                       d_out.as<float>(), nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> ref(n * dim);
      cpu::embedding(make_view(t, {vocab, dim}, enc.data()), ids.data(), n, ref.data());
      QCOMPARE(rel_error(d_out.download<float>(n * dim), ref), 0.0);
    }
  }

  void add_rms_norm_matches_cpu() {
    LATHE_REQUIRE_GPU();
    for (DType t : {DType::kBF16, DType::kF16}) {
      for (int64_t dim : {64, 576, 4096}) {
        const int64_t rows = 13;
        const float eps = 1e-5f;
        const std::vector<float> res0 = random_floats(rows * dim, 3, -4.f, 4.f);
        const std::vector<float> x = round_to(t, random_floats(rows * dim, 4));
        const std::vector<float> w = random_floats(dim, 5, 0.5f, 1.5f);
        // Fused add + norm.
        Dev d_res = Dev::from(res0), d_x = Dev::from(encode16(t, x)), d_w = Dev::from(w),
            d_out = Dev::poisoned(rows * dim * 2);
        cuda::AddRmsNormArgs a;
        a.residual = d_res.as<float>();
        a.x = d_x.get();
        a.weight = d_w.as<float>();
        a.out = d_out.get();
        a.rows = rows;
        a.dim = dim;
        a.eps = eps;
        a.dtype = t;
        LATHE_QVERIFY_OK(cuda::add_rms_norm(a, nullptr));
        LATHE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> res = res0, ref(rows * dim);
        cpu::add_rms_norm(res.data(), x.data(), w.data(), rows, dim, eps, ref.data());
        QCOMPARE(rel_error(d_res.download<float>(rows * dim), res), 0.0);
        LATHE_QVERIFY_REL(download16(t, d_out, rows * dim), ref, out_tol(t));

        // Plain norm (x = null) of the residual.
        Dev d_out2 = Dev::poisoned(rows * dim * 2);
        a.x = nullptr;
        a.out = d_out2.get();
        LATHE_QVERIFY_OK(cuda::add_rms_norm(a, nullptr));
        std::vector<float> ref2(rows * dim);
        cpu::rms_norm(res.data(), w.data(), rows, dim, eps, ref2.data());
        LATHE_QVERIFY_REL(download16(t, d_out2, rows * dim), ref2, out_tol(t));

        // Gathered rows (the final norm of the sampled tokens): residual untouched.
        const std::vector<int32_t> pick = {12, 0, 7};
        Dev d_pick = Dev::from(pick), d_res3 = Dev::from(res0), d_out3 = Dev::poisoned(3 * dim * 2);
        a.residual = d_res3.as<float>();
        a.x = d_x.get();
        a.out = d_out3.get();
        a.row_index = d_pick.as<int32_t>();
        a.rows = 3;
        LATHE_QVERIFY_OK(cuda::add_rms_norm(a, nullptr));
        std::vector<float> gathered_res, gathered_x, ref3(3 * dim);
        for (int32_t r : pick) {
          gathered_res.insert(gathered_res.end(), res0.begin() + r * dim,
                              res0.begin() + (r + 1) * dim);
          gathered_x.insert(gathered_x.end(), x.begin() + r * dim, x.begin() + (r + 1) * dim);
        }
        cpu::add_rms_norm(gathered_res.data(), gathered_x.data(), w.data(), 3, dim, eps,
                          ref3.data());
        LATHE_QVERIFY_REL(download16(t, d_out3, 3 * dim), ref3, out_tol(t));
        QCOMPARE(rel_error(d_res3.download<float>(rows * dim), res0), 0.0);
      }
    }
  }

  void qkv_rope_kv_matches_cpu_data() {
    QTest::addColumn<int>("style");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("qk_norm");
    QTest::addColumn<bool>("llama3");
    QTest::newRow("neox-128") << int(RopeStyle::kNeox) << 128 << false << false << true;
    QTest::newRow("interleaved-128")
        << int(RopeStyle::kInterleaved) << 128 << false << false << true;
    QTest::newRow("neox-64-bias(qwen2)") << int(RopeStyle::kNeox) << 64 << true << false << false;
    QTest::newRow("neox-128-qknorm(qwen3)")
        << int(RopeStyle::kNeox) << 128 << false << true << false;
    QTest::newRow("interleaved-64")
        << int(RopeStyle::kInterleaved) << 64 << false << false << false;
  }
  void qkv_rope_kv_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, style);
    QFETCH(int, head_dim);
    QFETCH(bool, bias);
    QFETCH(bool, qk_norm);
    QFETCH(bool, llama3);
    ModelConfig cfg;
    cfg.head_dim = head_dim;
    cfg.rope_theta = 500000.0;
    if (llama3) {
      cfg.rope_scaling.type = RopeScalingType::kLlama3;
      cfg.rope_scaling.factor = 8.0;
    }
    const std::vector<float> inv = rope_inverse_frequencies(cfg);
    const RopeStyle rs = static_cast<RopeStyle>(style);
    for (DType t : {DType::kBF16, DType::kF16}) {
      const int64_t n = 19, hq = 8, hkv = 2, d = head_dim, row = (hq + 2 * hkv) * d;
      const int32_t block_size = 16, num_blocks = 8;
      const std::vector<float> qkv = round_to(t, random_floats(n * row, 6, -2.f, 2.f));
      std::vector<int32_t> pos(n);
      std::mt19937 rng(7);
      for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 32768);
      // Shuffled distinct slot_ids, two tokens skipped (slot -1).
      std::vector<int64_t> slot_ids(num_blocks * block_size);
      std::iota(slot_ids.begin(), slot_ids.end(), 0);
      std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
      slot_ids.resize(n);
      slot_ids[3] = -1;
      slot_ids[11] = -1;
      const std::vector<float> qb = random_floats(hq * d, 8), kb = random_floats(hkv * d, 9),
                               vb = random_floats(hkv * d, 10);
      const std::vector<float> qn = random_floats(d, 11, 0.5f, 1.5f),
                               kn = random_floats(d, 12, 0.5f, 1.5f);

      const int64_t cache_elems = int64_t{num_blocks} * block_size * hkv * d;
      Dev d_qkv = Dev::from(encode16(t, qkv)), d_pos = Dev::from(pos),
          d_slots = Dev::from(slot_ids), d_inv = Dev::from(inv);
      Dev d_qb = Dev::from(qb), d_kb = Dev::from(kb), d_vb = Dev::from(vb), d_qn = Dev::from(qn),
          d_kn = Dev::from(kn);
      Dev d_kc = Dev::from(encode16(t, std::vector<float>(cache_elems, 0.25f)));
      Dev d_vc = Dev::from(encode16(t, std::vector<float>(cache_elems, 0.25f)));
      cuda::QkvRopeKvArgs a;
      a.qkv = d_qkv.get();
      a.num_tokens = n;
      a.num_heads = hq;
      a.num_kv_heads = hkv;
      a.head_dim = d;
      a.positions = d_pos.as<int32_t>();
      a.inv_freq = d_inv.as<float>();
      a.style = rs;
      if (bias)
        a.q_bias = d_qb.as<float>(), a.k_bias = d_kb.as<float>(), a.v_bias = d_vb.as<float>();
      if (qk_norm) a.q_norm = d_qn.as<float>(), a.k_norm = d_kn.as<float>();
      a.eps = 1e-6f;
      a.k_cache = d_kc.get();
      a.v_cache = d_vc.get();
      a.slot_mapping = d_slots.as<int64_t>();
      a.dtype = t;
      a.kv_dtype = t;
      LATHE_QVERIFY_OK(cuda::qkv_rope_kv(a, nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());

      // CPU: split, bias, per-head norm, rope, write_kv (the CPU runner's order).
      const RopeKvShape shape{hq, hkv, d, block_size, num_blocks};
      RopeKvHostExtras extras;
      if (bias) extras.q_bias = qb, extras.k_bias = kb, extras.v_bias = vb;
      if (qk_norm) extras.q_norm = qn, extras.k_norm = kn;
      extras.eps = 1e-6f;
      const RopeKvReference ref = cpu_qkv_rope_kv(qkv, n, shape, extras, inv, rs, pos, slot_ids);

      const auto [gq, gk] = split_qk(download16(t, d_qkv, n * row), n, hq, hkv, d);
      LATHE_QVERIFY_REL(gq, ref.q, out_tol(t));
      LATHE_QVERIFY_REL(gk, ref.k, out_tol(t));
      LATHE_QVERIFY_REL(download16(t, d_kc, cache_elems), ref.k_cache, out_tol(t));
      LATHE_QVERIFY_REL(download16(t, d_vc, cache_elems), ref.v_cache, out_tol(t));
    }
  }

  void swiglu_matches_cpu() {
    LATHE_REQUIRE_GPU();
    for (DType t : {DType::kBF16, DType::kF16}) {
      for (int64_t inter : {96, 1536, 1000}) {
        const int64_t n = 9;
        const std::vector<float> gu = round_to(t, random_floats(n * 2 * inter, 13, -6.f, 6.f));
        Dev d_gu = Dev::from(encode16(t, gu)), d_out = Dev::poisoned(n * inter * 2);
        LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_out.get(), n, inter, nullptr));
        LATHE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> g(n * inter), u(n * inter), ref(n * inter);
        for (int64_t i = 0; i < n; ++i) {
          std::copy(gu.begin() + i * 2 * inter, gu.begin() + i * 2 * inter + inter,
                    g.begin() + i * inter);
          std::copy(gu.begin() + i * 2 * inter + inter, gu.begin() + (i + 1) * 2 * inter,
                    u.begin() + i * inter);
        }
        cpu::swiglu(g.data(), u.data(), ref.data(), n * inter);
        LATHE_QVERIFY_REL(download16(t, d_out, n * inter), ref, out_tol(t));
      }
    }
  }

  // The autotune keeps gemv on a near tie at M <= 2 (linear.h): cuBLASLt must be clearly faster
  // there; above, the faster wins.
  void linear_autotune_keeps_gemv_on_a_tie() {
    QVERIFY(cuda::gemv_wins(1, 10.4, 10.3));  // the o_proj tie seen on the H200
    QVERIFY(cuda::gemv_wins(2, 10.0, 10.0));
    QVERIFY(cuda::gemv_wins(1, 10.0, 9.01));
    QVERIFY(!cuda::gemv_wins(1, 10.0, 8.9));
    QVERIFY(cuda::gemv_wins(1, 14.1, 16.9));
    QVERIFY(!cuda::gemv_wins(4, 10.4, 10.3));
    QVERIFY(!cuda::gemv_wins(8, 26.3, 16.1));  // qkv_proj at M = 8
    QVERIFY(cuda::gemv_wins(8, 16.0, 16.1));
  }

  // gemv for M = 1..8 and cuBLASLt for small and large M, against cpu::linear with the same
  // (16-bit) weights; float32 and 16-bit outputs.
  void linear_matches_cpu() {
    LATHE_REQUIRE_GPU();
    auto gemm = cuda::Gemm::create();
    LATHE_QVERIFY_RESULT(gemm);
    for (DType t : {DType::kBF16, DType::kF16}) {
      // k = 8200 takes gemv's wide shape at M <= 2 (rows longer than 4096), with a half-empty
      // last block (129 rows: 65 tasks).
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1000, 576}, {257, 4096}, {129, 8200}}) {
        const std::vector<float> w = round_to(t, random_floats(n * k, 14, -0.05f, 0.05f));
        const std::vector<uint16_t> w16 = encode16(t, w);
        Dev d_w = Dev::from(w16);
        const TensorView wv = make_view(t, {n, k}, w16.data());
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 64, 300}) {
          const std::vector<float> x =
              round_to(t, random_floats(m * k, 15 + static_cast<uint32_t>(m)));
          Dev d_x = Dev::from(encode16(t, x));
          std::vector<float> ref(m * n);
          cpu::linear(x.data(), m, wv, nullptr, ref.data(), ThreadPool::global());
          for (DType out : {DType::kF32, t}) {
            const int64_t eb = out == DType::kF32 ? 4 : 2;
            const double tol = out == DType::kF32 ? 1e-5 : out_tol(t);
            auto got = [&](const Dev& d) {
              return out == DType::kF32 ? d.download<float>(m * n) : download16(t, d, m * n);
            };
            if (m <= cuda::kGemvMaxM) {
              Dev d_y = Dev::poisoned(m * n * eb);
              LATHE_QVERIFY_OK(
                  cuda::gemv(t, out, d_x.get(), d_w.get(), d_y.get(), m, n, k, nullptr));
              LATHE_CUDA_CHECK(cudaDeviceSynchronize());
              LATHE_QVERIFY_REL(got(d_y), ref, tol);
            }
            Dev d_y = Dev::poisoned(m * n * eb);
            LATHE_QVERIFY_OK(
                gemm.value()->matmul(t, out, d_x.get(), d_w.get(), d_y.get(), m, n, k, nullptr));
            LATHE_CUDA_CHECK(cudaDeviceSynchronize());
            LATHE_QVERIFY_REL(got(d_y), ref, tol);
          }
        }
      }
    }
  }

  // The fused decode product (decode_gemv.h) for M = 1..4 against the CPU ops composed as the
  // unfused path composes them: plain input (f32 and 16-bit outputs), residual add, RMSNorm input
  // with a row gather, SwiGLU output; 1 and 2 blocks per multiprocessor; an odd row count and k
  // that is not a multiple of the 1024-element chunk.
  void decode_gemv_matches_cpu() {
    LATHE_REQUIRE_GPU();
    int smem = 0;
    cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    for (DType t : {DType::kBF16, DType::kF16}) {
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1000, 576}, {257, 4096}, {96, 1544}}) {
        const std::vector<float> w = round_to(t, random_floats(n * k, 21, -0.05f, 0.05f));
        const std::vector<uint16_t> w16 = encode16(t, w);
        Dev d_w = Dev::from(w16);
        const TensorView wv = make_view(t, {n, k}, w16.data());
        for (int64_t m = 1; m <= cuda::kDecodeGemvMaxM; ++m) {
          QVERIFY(cuda::decode_gemv_fits(m, k, smem));
          const std::vector<float> x = round_to(t, random_floats(m * k, 22 + uint32_t(m)));
          Dev d_x = Dev::from(encode16(t, x));
          std::vector<float> ref(m * n);
          cpu::linear(x.data(), m, wv, nullptr, ref.data(), ThreadPool::global());
          // Normalized input: rows gathered from 6 residual rows.
          const int64_t res_rows = 6;
          const std::vector<float> res = random_floats(res_rows * k, 23, -4.f, 4.f);
          const std::vector<float> nw = random_floats(k, 24, 0.5f, 1.5f);
          const std::vector<int32_t> pick = {5, 0, 3, 2};
          std::vector<float> xn(m * k);
          for (int64_t i = 0; i < m; ++i)
            cpu::rms_norm(res.data() + pick[i] * k, nw.data(), 1, k, 1e-5f, xn.data() + i * k);
          xn = round_to(t, xn);
          std::vector<float> ref_n(m * n);
          cpu::linear(xn.data(), m, wv, nullptr, ref_n.data(), ThreadPool::global());
          Dev d_res = Dev::from(res), d_nw = Dev::from(nw), d_pick = Dev::from(pick);

          for (int bps : {1, 2}) {
            cuda::DecodeGemvArgs a;
            a.dtype = t;
            a.w = d_w.get();
            a.n = n, a.k = k, a.m = m;
            a.x = d_x.get();
            a.blocks_per_sm = bps;
            // Plain input, stored in f32 and in the 16-bit type.
            for (DType out : {DType::kF32, t}) {
              const bool f32 = out == DType::kF32;
              Dev d_y = Dev::poisoned(m * n * 4);
              a.y = d_y.get();
              a.out_dtype = out;
              LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
              LATHE_CUDA_CHECK(cudaDeviceSynchronize());
              LATHE_QVERIFY_REL(f32 ? d_y.download<float>(m * n) : download16(t, d_y, m * n), ref,
                                f32 ? 1e-5 : out_tol(t));
            }
            // Residual add: residual += round(y).
            const std::vector<float> r0 = random_floats(m * n, 25, -4.f, 4.f);
            Dev d_r = Dev::from(r0);
            a.output = cuda::GemvOutput::kResidualAdd;
            a.residual_out = d_r.as<float>();
            LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
            LATHE_CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<float> added = d_r.download<float>(m * n);
            for (int64_t i = 0; i < m * n; ++i) added[i] -= r0[i];
            LATHE_QVERIFY_REL(added, round_to(t, ref), out_tol(t));
            // RMSNorm input with the row gather, f32 output (the LM head's call).
            a.input = cuda::GemvInput::kRmsNorm;
            a.residual = d_res.as<float>();
            a.norm_weight = d_nw.as<float>();
            a.row_index = d_pick.as<int32_t>();
            a.eps = 1e-5f;
            a.output = cuda::GemvOutput::kStore;
            a.out_dtype = DType::kF32;
            Dev d_yn = Dev::poisoned(m * n * 4);
            a.y = d_yn.get();
            LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
            LATHE_CUDA_CHECK(cudaDeviceSynchronize());
            LATHE_QVERIFY_REL(d_yn.download<float>(m * n), ref_n, 1e-4);
            // RMSNorm input, SwiGLU output: y[i] = silu(round(g)) * round(u), rounded.
            if (n % 2 == 0) {
              const int64_t inter = n / 2;
              std::vector<float> g(m * inter), u(m * inter), want(m * inter);
              const std::vector<float> rn = round_to(t, ref_n);
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < inter; ++j) {
                  g[i * inter + j] = rn[i * n + j];
                  u[i * inter + j] = rn[i * n + inter + j];
                }
              cpu::swiglu(g.data(), u.data(), want.data(), m * inter);
              Dev d_act = Dev::poisoned(m * inter * 2);
              a.output = cuda::GemvOutput::kSwiglu;
              a.y = d_act.get();
              a.out_dtype = t;
              LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
              LATHE_CUDA_CHECK(cudaDeviceSynchronize());
              LATHE_QVERIFY_REL(download16(t, d_act, m * inter), round_to(t, want), 2 * out_tol(t));
            }
          }
        }
      }
    }
  }

  // decode_gemv's RoPE/KV epilogue (the fused QKV projection) against the unfused sequence on the
  // CPU: norm, projection rounded to the 16-bit type, + bias, RoPE, KV write. Neox and interleaved
  // pairs, with and without bias (Qwen2), head dims 64 and 128, M = 1..4, shuffled slots with a
  // skipped token (slot -1).
  void decode_gemv_rope_matches_cpu_data() {
    QTest::addColumn<int>("style");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<bool>("bias");
    QTest::newRow("neox-128") << int(RopeStyle::kNeox) << 128 << false;
    QTest::newRow("interleaved-128") << int(RopeStyle::kInterleaved) << 128 << false;
    QTest::newRow("neox-64-bias") << int(RopeStyle::kNeox) << 64 << true;
    QTest::newRow("interleaved-64-bias") << int(RopeStyle::kInterleaved) << 64 << true;
  }
  void decode_gemv_rope_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, style);
    QFETCH(int, head_dim);
    QFETCH(bool, bias);
    ModelConfig cfg;
    cfg.head_dim = head_dim;
    cfg.rope_theta = 500000.0;
    cfg.rope_scaling.type = RopeScalingType::kLlama3;
    cfg.rope_scaling.factor = 8.0;
    const std::vector<float> inv = rope_inverse_frequencies(cfg);
    const RopeStyle rs = static_cast<RopeStyle>(style);
    const int64_t hq = 8, hkv = 2, d = head_dim, n = (hq + 2 * hkv) * d, k = 576;
    const int32_t block_size = 16, num_blocks = 4;
    const int64_t cache_elems = int64_t{num_blocks} * block_size * hkv * d;
    for (DType t : {DType::kBF16, DType::kF16}) {
      const std::vector<float> w = round_to(t, random_floats(n * k, 31, -0.08f, 0.08f));
      const std::vector<uint16_t> w16 = encode16(t, w);
      const TensorView wv = make_view(t, {n, k}, w16.data());
      const std::vector<float> res = random_floats(4 * k, 32, -3.f, 3.f);
      const std::vector<float> nw = random_floats(k, 33, 0.5f, 1.5f);
      const std::vector<float> qb = random_floats(hq * d, 34), kb = random_floats(hkv * d, 35),
                               vb = random_floats(hkv * d, 36);
      Dev d_w = Dev::from(w16), d_res = Dev::from(res), d_nw = Dev::from(nw),
          d_inv = Dev::from(inv);
      Dev d_qb = Dev::from(qb), d_kb = Dev::from(kb), d_vb = Dev::from(vb);
      for (int64_t m = 1; m <= cuda::kDecodeGemvMaxM; ++m) {
        std::vector<int32_t> pos(m);
        std::mt19937 rng(37 + static_cast<uint32_t>(m));
        for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 32768);
        std::vector<int64_t> slot_ids(num_blocks * block_size);
        std::iota(slot_ids.begin(), slot_ids.end(), 0);
        std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
        slot_ids.resize(m);
        if (m > 1) slot_ids[1] = -1;
        // CPU: norm -> projection (rounded, as the unfused path stores it) -> bias -> RoPE -> KV.
        std::vector<float> x(m * k), qkv(m * n);
        cpu::rms_norm(res.data(), nw.data(), m, k, 1e-5f, x.data());
        x = round_to(t, x);
        cpu::linear(x.data(), m, wv, nullptr, qkv.data(), ThreadPool::global());
        qkv = round_to(t, qkv);
        RopeKvHostExtras extras;
        if (bias) extras.q_bias = qb, extras.k_bias = kb, extras.v_bias = vb;
        const RopeKvReference ref = cpu_qkv_rope_kv(qkv, m, {hq, hkv, d, block_size, num_blocks},
                                                    extras, inv, rs, pos, slot_ids);

        Dev d_pos = Dev::from(pos), d_slot_ids = Dev::from(slot_ids),
            d_y = Dev::poisoned(m * n * 2);
        Dev d_kc = Dev::from(encode16(t, std::vector<float>(cache_elems, 0.25f)));
        Dev d_vc = Dev::from(encode16(t, std::vector<float>(cache_elems, 0.25f)));
        cuda::DecodeGemvArgs a;
        a.dtype = t;
        a.w = d_w.get();
        a.n = n, a.k = k, a.m = m;
        a.input = cuda::GemvInput::kRmsNorm;
        a.residual = d_res.as<float>();
        a.norm_weight = d_nw.as<float>();
        a.eps = 1e-5f;
        a.output = cuda::GemvOutput::kRopeKv;
        a.y = d_y.get();
        cuda::GemvRopeKv& rp = a.rope;
        rp.num_heads = hq, rp.num_kv_heads = hkv, rp.head_dim = d;
        rp.positions = d_pos.as<int32_t>();
        rp.inv_freq = d_inv.as<float>();
        rp.style = rs;
        if (bias)
          rp.q_bias = d_qb.as<float>(), rp.k_bias = d_kb.as<float>(), rp.v_bias = d_vb.as<float>();
        rp.k_cache = d_kc.get();
        rp.v_cache = d_vc.get();
        rp.slot_mapping = d_slot_ids.as<int64_t>();
        rp.kv_dtype = t;
        LATHE_QVERIFY_OK(cuda::decode_gemv(a, nullptr));
        LATHE_CUDA_CHECK(cudaDeviceSynchronize());
        const auto [gq, gk] = split_qk(download16(t, d_y, m * n), m, hq, hkv, d);
        LATHE_QVERIFY_REL(gq, ref.q, out_tol(t));
        LATHE_QVERIFY_REL(gk, ref.k, out_tol(t));
        LATHE_QVERIFY_REL(download16(t, d_kc, cache_elems), ref.k_cache, out_tol(t));
        LATHE_QVERIFY_REL(download16(t, d_vc, cache_elems), ref.v_cache, out_tol(t));
      }
    }
  }

  // gemv's SwiGLU and RoPE/KV epilogues (gemv.h) against the unfused sequence they replace (gemv
  // storing the projection, then swiglu / qkv_rope_kv), bit for bit: outputs and both caches, for
  // M = 1..4, both dtypes and RoPE styles, with and without bias, a skipped (negative) slot; on a
  // stream, as the runner launches them. Then the arguments they refuse.
  void gemv_epilogues_match_unfused() {
    LATHE_REQUIRE_GPU();
    cudaStream_t st = nullptr;
    LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int64_t k = 576, inter = 999, hq = 4, hkv = 2, block_size = 16, num_blocks = 8;
    const int64_t cache_elems = num_blocks * block_size * hkv * 128;
    for (DType t : {DType::kBF16, DType::kF16}) {
      Dev d_wg = Dev::from(encode16(t, random_floats(2 * inter * k, 41, -0.05f, 0.05f)));
      for (int64_t m = 1; m <= cuda::kGemvEpilogueMaxM; ++m) {
        Dev d_x = Dev::from(encode16(t, random_floats(m * k, 42 + static_cast<uint32_t>(m))));
        // SwiGLU.
        Dev d_gu = Dev::poisoned(m * 2 * inter * 2), d_ref = Dev::poisoned(m * inter * 2),
            d_act = Dev::poisoned(m * inter * 2);
        LATHE_QVERIFY_OK(cuda::gemv(t, t, d_x.get(), d_wg.get(), d_gu.get(), m, 2 * inter, k, st));
        LATHE_QVERIFY_OK(cuda::swiglu(t, d_gu.get(), d_ref.get(), m, inter, st));
        LATHE_QVERIFY_OK(cuda::gemv(t, t, d_x.get(), d_wg.get(), d_act.get(), m, 2 * inter, k, st,
                                    cuda::GemvOutput::kSwiglu));
        LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
        QVERIFY(d_act.download<uint16_t>(m * inter) == d_ref.download<uint16_t>(m * inter));
        // RoPE/KV.
        for (int64_t d : {int64_t{64}, int64_t{128}}) {
          const int64_t n = (hq + 2 * hkv) * d;
          Dev d_w = Dev::from(encode16(t, random_floats(n * k, 43, -0.05f, 0.05f)));
          const RopeKvShape shape{hq, hkv, d, static_cast<int32_t>(block_size), num_blocks};
          const RopeKvDeviceInputs in = rope_kv_device_inputs(shape, m);
          for (RopeStyle rs : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
            for (bool bias : {false, true}) {
              RopeKvCaches c = rope_kv_caches(t, cache_elems);
              Dev y_ref = Dev::poisoned(m * n * 2), y = Dev::poisoned(m * n * 2);
              LATHE_QVERIFY_OK(cuda::gemv(t, t, d_x.get(), d_w.get(), y_ref.get(), m, n, k, st));
              const cuda::QkvRopeKvArgs rk = qkv_rope_kv_args(y_ref.get(), m, shape, in, rs, bias,
                                                              c.k_ref.get(), c.v_ref.get(), t);
              LATHE_QVERIFY_OK(cuda::qkv_rope_kv(rk, st));
              const cuda::GemvRopeKv rp = gemv_rope_kv_like(rk, c.k.get(), c.v.get());
              LATHE_QVERIFY_OK(cuda::gemv(t, t, d_x.get(), d_w.get(), y.get(), m, n, k, st,
                                          cuda::GemvOutput::kRopeKv, rp));
              LATHE_CUDA_CHECK(cudaStreamSynchronize(st));
              const QString what = QString("m=%1 d=%2 style=%3 bias=%4")
                                       .arg(m)
                                       .arg(d)
                                       .arg(static_cast<int>(rs))
                                       .arg(bias);
              const QString diff = rope_kv_bit_difference(y, y_ref, m * n, c, cache_elems);
              QVERIFY2(diff.isEmpty(), qPrintable(what + diff));
            }
          }
        }
      }
    }
    // Refused: each with a message naming what is wrong.
    Dev d_x = Dev::from(encode16(DType::kBF16, random_floats(5 * k, 47)));
    Dev d_w = Dev::from(encode16(DType::kBF16, random_floats(2 * inter * k, 48)));
    Dev d_y = Dev::poisoned(5 * 2 * inter * 4);
    auto refused = [&](DType out, int64_t m, int64_t n, cuda::GemvOutput o, const char* words) {
      const Status s = cuda::gemv(DType::kBF16, out, d_x.get(), d_w.get(), d_y.get(), m, n, k, st,
                                  o, cuda::GemvRopeKv{});
      return !s.is_ok() && s.message().find(words) != std::string::npos;
    };
    QVERIFY(refused(DType::kBF16, 5, 2 * inter, cuda::GemvOutput::kSwiglu, "M <= 4"));
    QVERIFY(refused(DType::kF32, 1, 2 * inter, cuda::GemvOutput::kSwiglu, "16-bit output"));
    QVERIFY(refused(DType::kBF16, 1, 2 * inter - 1, cuda::GemvOutput::kSwiglu, "even n"));
    QVERIFY(refused(DType::kBF16, 1, 2 * inter, cuda::GemvOutput::kRopeKv, "RoPE/KV output needs"));
    QVERIFY(refused(DType::kBF16, 1, 2 * inter, cuda::GemvOutput::kResidualAdd, "residual-add"));
    LATHE_CUDA_CHECK(cudaStreamDestroy(st));
  }

  void cast_rounds_like_the_host() {
    LATHE_REQUIRE_GPU();
    const std::vector<float> src = random_floats(10007, 16, -70000.f, 70000.f);
    Dev d_src = Dev::from(src);
    for (DType t : {DType::kBF16, DType::kF16}) {
      Dev d_dst = Dev::poisoned(src.size() * 2);
      LATHE_QVERIFY_OK(cuda::cast(DType::kF32, d_src.get(), t, d_dst.get(),
                                  static_cast<int64_t>(src.size()), nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      QVERIFY(d_dst.download<uint16_t>(src.size()) == encode16(t, src));
    }
  }

  // Dummy weights on the GPU are the CPU backend's dummy weights, bit for bit.
  void random_fill_matches_cpu_dummy_weights() {
    LATHE_REQUIRE_GPU();
    const int64_t rows = 123, cols = 77;
    std::vector<std::unique_ptr<uint8_t[]>> owned;
    const TensorView ref = cpu::make_random_matrix(DType::kBF16, rows, cols, 0.02f, 42, 5, owned,
                                                   ThreadPool::global());
    std::vector<uint16_t> want(static_cast<size_t>(rows * cols));
    std::memcpy(want.data(), ref.data, want.size() * 2);
    Dev d = Dev::poisoned(rows * cols * 2);
    LATHE_QVERIFY_OK(
        cuda::random_fill(DType::kBF16, d.get(), rows * cols, 0, 0.02f, 42, 5, nullptr));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
    QVERIFY(d.download<uint16_t>(want.size()) == want);
    // A part of the stream at an offset that is not a multiple of 4.
    Dev part = Dev::poisoned(1000 * 2);
    LATHE_QVERIFY_OK(
        cuda::random_fill(DType::kBF16, part.get(), 1000, 4097, 0.02f, 42, 5, nullptr));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
    QVERIFY(std::equal(want.begin() + 4097, want.begin() + 5097,
                       part.download<uint16_t>(1000).begin()));
  }
};

QTEST_GUILESS_MAIN(CudaOpsTest)
#include "cuda_ops_test.moc"

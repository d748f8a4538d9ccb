// Paged attention on the GPU against cpu::paged_attention: Lathe's split-KV kernel (decode, and the
// prefill fallback), the tensor-core decode kernel (decode_attention.h: GQA groups packed into mma
// rows, in-kernel split merge) and FlashInfer's FA2 prefill (when built in). Random K/V fill every
// block of a cache whose blocks are handed out in shuffled order; sequences have odd lengths; GQA
// ratios 1, 4 and 8; head dims 64 and 128; contexts up to 32k; chunked prefill (queries after a
// cached prefix) and mixed prefill/decode batches; a sliding window for the split-KV kernel.
// Tolerances (relative L2 error of the output):
//   split-KV kernel: float32 softmax and accumulation, one rounding of the output:
//     bf16 <= 8e-3, f16 <= 1e-3;
//   decode kernel: the same (its probabilities enter the P.V product as two 16-bit parts, ~16
//     bits), and the split-merge counters must be back at zero after every launch;
//   FlashInfer: the probabilities are rounded to the 16-bit type before the P·V tensor-core
//   product:
//     bf16 <= 1.5e-2, f16 <= 3e-3.
#include <QtTest>

#include <algorithm>
#include <numeric>
#include <random>

#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/prefill_attention.h"
#include "engine/core/thread_pool.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

struct SeqSpec {
  int32_t context;  // seq_len after the step
  int32_t queries;  // tokens computed this step (the last `queries` positions)
};

// One attention problem, its CPU reference, and device copies.
struct Problem {
  DType dtype = DType::kBF16;
  int32_t hq = 0, hkv = 0, d = 0, block_size = 16, num_blocks = 0, max_blocks = 0, num_tokens = 0;
  int64_t q_stride = 0;
  int32_t window = 0;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> query_start, seq_lens, block_tables, kv_indptr, kv_indices, last_page_len;
  std::vector<float> q, k_cache, v_cache, ref;
  Dev d_q, d_k, d_v, d_qs, d_sl, d_indptr, d_indices, d_last;

  void build(uint32_t seed) {
    std::mt19937 rng(seed);
    num_tokens = 0;
    int32_t total_blocks = 0;
    max_blocks = 1;
    for (const SeqSpec& s : seqs) {
      const int32_t b = (s.context + block_size - 1) / block_size;
      total_blocks += b;
      max_blocks = std::max(max_blocks, b);
      num_tokens += s.queries;
    }
    num_blocks = total_blocks + 3;  // a few blocks nobody uses
    std::vector<int32_t> pool(num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    query_start = {0};
    kv_indptr = {0};
    block_tables.assign(seqs.size() * max_blocks, 0);
    size_t next = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t b = (seqs[i].context + block_size - 1) / block_size;
      for (int32_t j = 0; j < b; ++j) {
        block_tables[i * max_blocks + j] = pool[next++];
        kv_indices.push_back(block_tables[i * max_blocks + j]);
      }
      kv_indptr.push_back(static_cast<int32_t>(kv_indices.size()));
      last_page_len.push_back(seqs[i].context - (b - 1) * block_size);
      query_start.push_back(query_start.back() + seqs[i].queries);
      seq_lens.push_back(seqs[i].context);
    }
    const int64_t cache = int64_t{num_blocks} * block_size * hkv * d;
    k_cache = round_to(dtype, random_floats(cache, seed + 1));
    v_cache = round_to(dtype, random_floats(cache, seed + 2));
    // q rows live inside wider rows (the fused QKV buffer's layout): q_stride > hq * d.
    q_stride = int64_t{hq + 2 * hkv} * d;
    std::vector<float> q_wide =
        round_to(dtype, random_floats(num_tokens * q_stride, seed + 3, -2.f, 2.f));
    q.assign(int64_t{num_tokens} * hq * d, 0.f);
    for (int32_t t = 0; t < num_tokens; ++t)
      std::copy(q_wide.begin() + t * q_stride, q_wide.begin() + t * q_stride + hq * d,
                q.begin() + int64_t{t} * hq * d);

    ref.assign(q.size(), 0.f);
    cpu::PagedAttentionArgs a;
    a.q = q.data();
    a.out = ref.data();
    a.query_start = query_start.data();
    a.seq_lens = seq_lens.data();
    a.block_tables = block_tables.data();
    a.num_seqs = static_cast<int32_t>(seqs.size());
    a.max_blocks_per_seq = max_blocks;
    a.num_heads = hq;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    a.sliding_window = window;
    cpu::KvLayerView view;
    view.k = k_cache.data();
    view.v = v_cache.data();
    view.block_size = block_size;
    view.num_kv_heads = hkv;
    view.head_dim = d;
    cpu::paged_attention(a, view, ThreadPool::global());

    d_q = Dev::from(encode16(dtype, q_wide));
    d_k = Dev::from(encode16(dtype, k_cache));
    d_v = Dev::from(encode16(dtype, v_cache));
    d_qs = Dev::from(query_start);
    d_sl = Dev::from(seq_lens);
    d_indptr = Dev::from(kv_indptr);
    d_indices = Dev::from(kv_indices);
    d_last = Dev::from(last_page_len);
  }

  // The argument fields every attention kernel shares, then those of Lathe's two kernels.
  template <typename Args>
  void fill_common(Args& a, void* out) const {
    a.q = d_q.get();
    a.q_stride = q_stride;
    a.out = out;
    a.k_cache = d_k.get();
    a.v_cache = d_v.get();
    a.kv_indptr = d_indptr.as<int32_t>();
    a.kv_indices = d_indices.as<int32_t>();
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  }
  template <typename Args>
  void fill_lathe(Args& a, void* out, int32_t splits, const Dev& ws) const {
    fill_common(a, out);
    a.seq_lens = d_sl.as<int32_t>();
    a.num_seqs = static_cast<int32_t>(seqs.size());
    a.num_heads = hq;
    a.num_kv_heads = hkv;
    a.head_dim = d;
    a.block_size = block_size;
    a.sliding_window = window;
    a.max_splits = splits;
    a.workspace = ws.as<float>();
    a.dtype = dtype;
    a.kv_dtype = dtype;
  }

  std::vector<float> run_split_kv(int32_t splits) const {
    Dev out = Dev::poisoned(int64_t{num_tokens} * hq * d * 2);
    const int64_t ws_bytes = cuda::paged_attention_workspace_bytes(num_tokens, hq, d, splits);
    Dev ws = Dev::poisoned(std::max<int64_t>(ws_bytes, 16));
    cuda::PagedAttentionArgs a;
    fill_lathe(a, out.get(), splits, ws);
    a.query_start = d_qs.as<int32_t>();
    a.num_tokens = num_tokens;
    const Status s = cuda::paged_attention(a, nullptr);
    if (!s.is_ok()) qWarning("%s", s.message().c_str());
    if (cudaDeviceSynchronize() != cudaSuccess) return {};
    return decode16(dtype, out.download<uint16_t>(static_cast<size_t>(num_tokens) * hq * d));
  }

  // Decode steps only (one query per sequence). `counters_zero` reports whether the split-merge
  // counters were left at zero.
  std::vector<float> run_decode(int32_t splits, bool* counters_zero,
                                int32_t min_split_tokens = cuda::kDecodeAttentionMinSplitTokens,
                                Status* status = nullptr, bool cluster_merge = true) const {
    const int32_t num_seqs = static_cast<int32_t>(seqs.size());
    Dev out = Dev::poisoned(int64_t{num_seqs} * hq * d * 2);
    const int64_t ws_bytes = cuda::decode_attention_workspace_bytes(num_seqs, hq, d, splits);
    Dev ws = Dev::poisoned(std::max<int64_t>(ws_bytes, 16));
    Dev counters = Dev::from(std::vector<int32_t>(static_cast<size_t>(num_seqs) * hkv, 0));
    cuda::DecodeAttentionArgs a;
    fill_lathe(a, out.get(), splits, ws);
    a.min_split_tokens = min_split_tokens;
    a.counters = counters.as<int32_t>();
    a.cluster_merge = cluster_merge;
    const Status s = cuda::decode_attention(a, nullptr);
    if (status != nullptr) *status = s;
    if (!s.is_ok() && status == nullptr) qWarning("%s", s.message().c_str());
    if (!s.is_ok() || cudaDeviceSynchronize() != cudaSuccess) return {};
    const std::vector<int32_t> left =
        counters.download<int32_t>(static_cast<size_t>(num_seqs) * hkv);
    *counters_zero = std::all_of(left.begin(), left.end(), [](int32_t c) { return c == 0; });
    return decode16(dtype, out.download<uint16_t>(static_cast<size_t>(num_seqs) * hq * d));
  }

  std::vector<float> run_flashinfer() const {
    auto p = cuda::PrefillAttention::create(dtype, hq, hkv, d, block_size, num_tokens,
                                            static_cast<int32_t>(seqs.size()));
    if (!p.is_ok()) {
      qWarning("%s", p.status().message().c_str());
      return {};
    }
    Dev out = Dev::poisoned(int64_t{num_tokens} * hq * d * 2);
    Status s = p.value()->plan(query_start.data(), kv_indptr.data(),
                               static_cast<int32_t>(seqs.size()), nullptr);
    cuda::PrefillRunArgs a;
    fill_common(a, out.get());
    a.qo_indptr = d_qs.as<int32_t>();
    a.kv_last_page_len = d_last.as<int32_t>();
    if (s.is_ok()) s = p.value()->run(a, nullptr);
    if (!s.is_ok()) qWarning("%s", s.message().c_str());
    if (cudaDeviceSynchronize() != cudaSuccess) return {};
    return decode16(dtype, out.download<uint16_t>(static_cast<size_t>(num_tokens) * hq * d));
  }
};

std::vector<SeqSpec> scenario(const QString& name) {
  if (name == "decode") return {{1, 1}, {17, 1}, {300, 1}, {1025, 1}, {4097, 1}};
  if (name == "prefill") return {{33, 33}, {130, 130}, {517, 517}};
  if (name == "chunked+mixed") return {{700, 123}, {64, 64}, {200, 1}, {45, 1}};
  if (name == "long-decode") return {{32768, 1}, {20001, 1}};
  return {{32768, 16}};  // long chunk after a 32k prefix
}

}  // namespace

class CudaAttentionTest : public QObject {
  Q_OBJECT
 private slots:
  void attention_matches_cpu_data() {
    QTest::addColumn<QString>("scenario");
    QTest::addColumn<int>("hq");
    QTest::addColumn<int>("hkv");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("dtype");
    const int bf16 = int(DType::kBF16), f16 = int(DType::kF16);
    for (const char* sc : {"decode", "prefill", "chunked+mixed"}) {
      for (auto [hq, hkv] : {std::pair<int, int>{8, 8}, {16, 4}, {32, 4}}) {
        for (int hd : {64, 128}) {
          QTest::newRow(qPrintable(QString("%1 gqa%2 d%3 bf16").arg(sc).arg(hq / hkv).arg(hd)))
              << QString(sc) << hq << hkv << hd << bf16;
        }
      }
      QTest::newRow(qPrintable(QString("%1 gqa4 d128 f16").arg(sc)))
          << QString(sc) << 16 << 4 << 128 << f16;
    }
    QTest::newRow("long-decode gqa4 d128 bf16") << QString("long-decode") << 32 << 8 << 128 << bf16;
    QTest::newRow("long-chunk gqa8 d128 bf16") << QString("long-chunk") << 8 << 1 << 128 << bf16;
  }
  void attention_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, scenario);
    QFETCH(int, hq);
    QFETCH(int, hkv);
    QFETCH(int, head_dim);
    QFETCH(int, dtype);
    Problem p;
    p.dtype = static_cast<DType>(dtype);
    p.hq = hq;
    p.hkv = hkv;
    p.d = head_dim;
    p.seqs = ::scenario(scenario);
    p.build(static_cast<uint32_t>(qHash(scenario) + hq * 131 + head_dim));
    const double own_tol = p.dtype == DType::kBF16 ? 8e-3 : 1e-3;
    const double fi_tol = p.dtype == DType::kBF16 ? 1.5e-2 : 3e-3;

    int sm = 0;
    cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
    // The split count the runner would use, no split, and an odd forced split count.
    QString errors;
    for (int32_t splits : {cuda::paged_attention_splits_for(p.num_tokens, hkv, sm), 1, 7, 32}) {
      const std::vector<float> out = p.run_split_kv(splits);
      const double err = rel_error(out, p.ref);
      errors += QString(" split-KV/%1: %2").arg(splits).arg(err, 0, 'g', 3);
      QVERIFY2(err <= own_tol,
               qPrintable(QString("split-KV (%1 splits): relative error %2").arg(splits).arg(err)));
    }
    if (cuda::PrefillAttention::supports(p.dtype, head_dim, 0)) {
      const double err = rel_error(p.run_flashinfer(), p.ref);
      errors += QString(" FlashInfer: %1").arg(err, 0, 'g', 3);
      QVERIFY2(err <= fi_tol, qPrintable(QString("FlashInfer: relative error %1").arg(err)));
    }
    qInfo("relative errors:%s", qPrintable(errors));
  }

  // The tensor-core decode kernel: GQA groups 1, 4, 8, 5, 7 and 16, head dims 64 and 128, odd
  // lengths, contexts up to 32k, a sliding window, padding rows (seq_len 0) between real ones; the
  // runner's split count, no split, odd forced splits and the maximum.
  void decode_attention_matches_cpu_data() {
    QTest::addColumn<QString>("scenario");
    QTest::addColumn<int>("hq");
    QTest::addColumn<int>("hkv");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("window");
    const int bf16 = int(DType::kBF16), f16 = int(DType::kF16);
    for (const char* sc : {"decode", "padded-decode"})
      for (auto [hq, hkv] :
           {std::pair<int, int>{8, 8}, {32, 8}, {32, 4}, {20, 4}, {28, 4}, {16, 1}})
        for (int hd : {64, 128})
          QTest::newRow(qPrintable(QString("%1 gqa%2 d%3 bf16").arg(sc).arg(hq / hkv).arg(hd)))
              << QString(sc) << hq << hkv << hd << bf16 << 0;
    QTest::newRow("decode gqa4 d128 f16") << QString("decode") << 32 << 8 << 128 << f16 << 0;
    QTest::newRow("decode gqa7 d64 f16") << QString("decode") << 28 << 4 << 64 << f16 << 0;
    QTest::newRow("long-decode gqa4 d128 bf16")
        << QString("long-decode") << 32 << 8 << 128 << bf16 << 0;
    QTest::newRow("long-decode gqa8 d64 bf16")
        << QString("long-decode") << 32 << 4 << 64 << bf16 << 0;
    QTest::newRow("window-decode gqa4 d128 bf16")
        << QString("window-decode") << 16 << 4 << 128 << bf16 << 100;
  }
  void decode_attention_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, scenario);
    QFETCH(int, hq);
    QFETCH(int, hkv);
    QFETCH(int, head_dim);
    QFETCH(int, dtype);
    QFETCH(int, window);
    QVERIFY(cuda::decode_attention_supports(head_dim, hq, hkv));
    Problem p;
    p.dtype = static_cast<DType>(dtype);
    p.hq = hq;
    p.hkv = hkv;
    p.d = head_dim;
    p.window = window;
    if (scenario == "long-decode") {
      p.seqs = ::scenario(scenario);
    } else if (scenario == "window-decode") {
      p.seqs = {{300, 1}, {257, 1}, {64, 1}, {1, 1}, {101, 1}};
    } else {
      p.seqs = {{1, 1}, {17, 1}, {300, 1}, {1025, 1}, {4097, 1}, {130, 1}};
    }
    p.build(static_cast<uint32_t>(qHash(scenario) + hq * 131 + hkv * 7 + head_dim));
    if (scenario == "padded-decode") {
      // Rows 1 and 4 become padding rows of a graph bucket: no context, output zero.
      for (int row : {1, 4}) {
        p.seq_lens[row] = 0;
        std::fill(p.ref.begin() + int64_t{row} * hq * head_dim,
                  p.ref.begin() + int64_t{row + 1} * hq * head_dim, 0.f);
      }
      p.d_sl = Dev::from(p.seq_lens);
    }
    const double tol = p.dtype == DType::kBF16 ? 8e-3 : 1e-3;
    int sm = 0;
    cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
    const int32_t num_seqs = static_cast<int32_t>(p.seqs.size());
    // On Hopper, with sm_90 code in this build, splits up to 8 (16 where allowed) merge in
    // thread-block clusters; the other merge runs with cluster_merge off, and above the limit.
    const int32_t cluster_limit = cuda::decode_attention_cluster_splits(p.dtype, head_dim);
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (major == 9 && QString(LATHE_TEST_CUDA_ARCHS).contains("90"))
      QVERIFY2(cluster_limit >= 8, "no cluster merge on a Hopper GPU with sm_90 code");
    QString errors = QString(" (cluster merge up to %1 splits)").arg(cluster_limit);
    // Split counts, and split lengths from the default down to one tile (shorter splits make
    // more blocks; warps without a tile join the merge empty).
    for (bool cluster : {true, false})
      for (int32_t min_split : {cuda::kDecodeAttentionMinSplitTokens, 64, 32, 16})
        for (int32_t splits :
             {cuda::decode_attention_splits_for(num_seqs, hkv, sm), 1, 3, 7,
              cuda::kDecodeAttentionMaxClusterSplits, cuda::kDecodeAttentionMaxSplits}) {
          if (min_split != cuda::kDecodeAttentionMinSplitTokens && splits < 7) continue;
          bool zero = false;
          const std::vector<float> out = p.run_decode(splits, &zero, min_split, nullptr, cluster);
          const double err = rel_error(out, p.ref);
          const bool in_cluster = cluster && splits > 1 && splits <= cluster_limit;
          errors += QString(" %1x%2%3: %4")
                        .arg(splits)
                        .arg(min_split)
                        .arg(in_cluster ? "c" : "")
                        .arg(err, 0, 'g', 3);
          QVERIFY2(err <= tol, qPrintable(QString("decode kernel (%1 splits of >= %2, %3 merge): "
                                                  "relative error %4")
                                              .arg(splits)
                                              .arg(min_split)
                                              .arg(in_cluster ? "cluster" : "workspace")
                                              .arg(err)));
          QVERIFY2(zero, "the split-merge counters were not left at zero");
        }
    qInfo("relative errors:%s", qPrintable(errors));
  }

  // A split length that is not a positive multiple of 16 is refused with a message.
  // The split policy (decode_attention.h), a host function: no GPU needed. 132 multiprocessors,
  // 8 KV heads (Llama-3.1-8B on an H200).
  void decode_split_policy() {
    const int sms = 132;
    // Batch 1: 8 (sequence, KV head) pairs, many splits of 64 positions.
    QCOMPARE(cuda::decode_attention_splits_for(1, 8, sms), cuda::kDecodeAttentionMaxSplits);
    QCOMPARE(cuda::decode_attention_min_split_tokens(1, 8, sms), 64);
    QCOMPARE(cuda::decode_attention_min_split_tokens(2, 8, sms), 64);
    // Batch 8: up to 8 splits of >= 128 positions (4 blocks per SM over 64 pairs).
    QCOMPARE(cuda::decode_attention_splits_for(8, 8, sms), 8);
    QCOMPARE(cuda::decode_attention_min_split_tokens(8, 8, sms), 128);
    // Cluster merges in the same latency regime only.
    QVERIFY(cuda::decode_attention_cluster_pays(1, 8, sms));
    QVERIFY(cuda::decode_attention_cluster_pays(2, 8, sms));
    QVERIFY(!cuda::decode_attention_cluster_pays(4, 8, sms));
    QVERIFY(!cuda::decode_attention_cluster_pays(8, 8, sms));
    // The whole plan: clusters cap the splits at batch 1; batch 8 keeps the workspace merge.
    const cuda::DecodeSplitPlan b1 = cuda::decode_attention_split_plan(1, 8, sms, 16);
    QCOMPARE(b1.max_splits, 16);
    QCOMPARE(b1.min_split_tokens, 64);
    QVERIFY(b1.cluster_merge);
    QVERIFY(!cuda::decode_attention_split_plan(1, 8, sms, 0).cluster_merge);
    QCOMPARE(cuda::decode_attention_split_plan(1, 8, sms, 0).max_splits, 32);
    const cuda::DecodeSplitPlan b8 = cuda::decode_attention_split_plan(8, 8, sms, 16);
    QCOMPARE(b8.max_splits, 8);
    QCOMPARE(b8.min_split_tokens, 128);
    QVERIFY(!b8.cluster_merge);
    // Batch 64 and more: the pairs alone fill the GPU, no split.
    QCOMPARE(cuda::decode_attention_splits_for(64, 8, sms), 1);
    QCOMPARE(cuda::decode_attention_splits_for(256, 8, sms), 1);
    // The block budget is a parameter (the A/B switch), and never gives less than one split.
    QCOMPARE(cuda::decode_attention_splits_for(64, 8, sms, 12), 3);
    QCOMPARE(cuda::decode_attention_splits_for(100000, 64, sms), 1);
  }

  void decode_attention_refuses_bad_split_length() {
    LATHE_REQUIRE_GPU();
    Problem p;
    p.hq = 8;
    p.hkv = 2;
    p.d = 128;
    p.seqs = {{40, 1}};
    p.build(7);
    for (int32_t bad : {0, -16, 8, 24}) {
      bool zero = false;
      Status s;
      const std::vector<float> out = p.run_decode(4, &zero, bad, &s);
      QVERIFY(out.empty());
      QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
      QVERIFY2(s.message().find("min_split_tokens") != std::string::npos, s.message().c_str());
    }
  }

  void sliding_window_matches_cpu() {
    LATHE_REQUIRE_GPU();
    Problem p;
    p.hq = 8;
    p.hkv = 2;
    p.d = 128;
    p.window = 100;
    p.seqs = {{300, 1}, {257, 40}, {64, 64}};
    p.build(99);
    for (int32_t splits : {1, 3}) LATHE_QVERIFY_REL(p.run_split_kv(splits), p.ref, 8e-3);
  }

  // Padding rows of a CUDA-graph bucket (seq_len 0, no pages) produce zeros, not NaN.
  // The KV cache's dtype is its own (kv_cache.h): a kernel given a cache of another dtype than its
  // activations refuses it with an error naming both, before any launch (host check: no GPU
  // needed).
  void kv_cache_of_another_dtype_is_refused() {
    cuda::DecodeAttentionArgs d;
    d.num_seqs = 1, d.num_heads = 8, d.num_kv_heads = 2, d.head_dim = 128, d.q_stride = 1536;
    d.dtype = DType::kBF16;
    d.kv_dtype = DType::kF16;
    Status s = cuda::decode_attention(d, nullptr);
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY2(s.message().find("bf16") != std::string::npos &&
                 s.message().find("f16") != std::string::npos,
             s.message().c_str());
    cuda::PagedAttentionArgs p;
    p.num_tokens = 1, p.num_seqs = 1, p.num_heads = 8, p.num_kv_heads = 2, p.head_dim = 128;
    p.q_stride = 1536;
    p.dtype = DType::kF16;
    p.kv_dtype = DType::kBF16;
    QCOMPARE(cuda::paged_attention(p, nullptr).code(), ErrorCode::kUnsupported);
  }

  void empty_context_gives_zeros() {
    LATHE_REQUIRE_GPU();
    Problem p;
    p.hq = 4;
    p.hkv = 4;
    p.d = 64;
    p.seqs = {{5, 1}};
    p.build(5);
    p.seq_lens = {0};
    p.kv_indptr = {0, 0};
    p.d_sl = Dev::from(p.seq_lens);
    p.d_indptr = Dev::from(p.kv_indptr);
    const std::vector<float> out = p.run_split_kv(4);
    QVERIFY(!out.empty());
    for (float v : out) QCOMPARE(v, 0.0f);
    bool zero = false;
    const std::vector<float> dec = p.run_decode(4, &zero);
    QVERIFY(!dec.empty() && zero);
    for (float v : dec) QCOMPARE(v, 0.0f);
  }
};

QTEST_GUILESS_MAIN(CudaAttentionTest)
#include "cuda_attention_test.moc"

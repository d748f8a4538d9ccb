// paged_attention(): causal, grouped-query attention that reads K/V through block tables.
//
// Work items are (sequence, KV head, run of query rows): all query heads that share the KV head and
// all rows of the run form a query set that streams each block of keys and values through L1 once.
// Each query is computed two-pass — scores, then exp / sum / weighted sum of V — in float32 with
// the fixed per-element order stated in cpu_ops.h, so results do not depend on the batch, the split
// into work items, the thread count or the instruction set.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cpu/cpu_simd.h"
#include "engine/core/thread_pool.h"

namespace lathe::cpu {
namespace {

constexpr int32_t kMaxQueryRows = 16;         // rows of one sequence per work item
constexpr int64_t kMaxScoreFloats = 1 << 20;  // scores scratch per work item (4 MiB)
constexpr int32_t kValueBlock = 32;           // keys per pass of the weighted sum

struct Task {
  int32_t seq;
  int32_t kv_head;
  int32_t row_begin;  // query rows of the sequence's chunk, [row_begin, row_end)
  int32_t row_end;
};

// One query of a work item: its vectors, and the key positions [lo, pos] it attends to.
struct Query {
  const float* q;
  float* out;
  int32_t lo;
  int32_t pos;
};

// Address of K (or V) of position p of a sequence for one KV head.
inline const float* kv_at(const float* base, const int32_t* table, int32_t p, const KvLayerView& c,
                          int64_t kv_head) {
  const int64_t block = table[p / c.block_size];
  const int64_t slot = block * c.block_size + p % c.block_size;
  return base + (slot * c.num_kv_heads + kv_head) * c.head_dim;
}

// ---- scalar path: one query at a time ----------------------------------------------------------

void attend_scalar(const Query& qr, const float* const* ks, const float* const* vs, float scale,
                   int64_t hd, float* scores) {
  const int32_t n = qr.pos - qr.lo + 1;
  ks += qr.lo;
  vs += qr.lo;
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) {
    scores[i] = detail::dot_scalar(qr.q, ks[i], hd) * scale;
    mx = std::max(mx, scores[i]);
  }
  float sum = 0.f;
  for (int32_t i = 0; i < n; ++i) {
    scores[i] = detail::exp_scalar(scores[i] - mx);
    sum += scores[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < hd; ++d) {
    float acc = 0.f;
    for (int32_t i = 0; i < n; ++i) acc = std::fma(scores[i], vs[i][d], acc);
    qr.out[d] = acc * inv;
  }
}

// ---- AVX2 path: the query set shares each block of keys ----------------------------------------
#if LATHE_CPU_X86

// Scores of eight keys for one query: eight independent accumulator chains, each the canonical dot.
LATHE_AVX2 void scores8_avx2(const float* q, const float* const* ks, int64_t hd, float scale,
                             float* out) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(ks[j] + d), acc[j]);
  }
  if (d < hd) {
    const __m256i mask = detail::lane_mask_avx2(hd - d);
    const __m256 qv = _mm256_maskload_ps(q + d, mask);
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(ks[j] + d, mask), acc[j]);
  }
  for (int j = 0; j < 8; ++j) out[j] = detail::reduce_avx2(acc[j]) * scale;
}

// acc[d0 .. d0 + 8 NV) += sum over keys i of e[i] * v_i[...], sequential in i (acc lives in memory
// between calls; storing and reloading a float does not change it).
template <int NV>
LATHE_AVX2 void accumulate_v_avx2(const float* e, const float* const* vs, int32_t n, int64_t d0,
                                  float* acc_mem) {
  __m256 acc[NV];
  for (int j = 0; j < NV; ++j) acc[j] = _mm256_loadu_ps(acc_mem + d0 + 8 * j);
  for (int32_t i = 0; i < n; ++i) {
    const __m256 w = _mm256_set1_ps(e[i]);
    const float* v = vs[i] + d0;
    for (int j = 0; j < NV; ++j) acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * j), acc[j]);
  }
  for (int j = 0; j < NV; ++j) _mm256_storeu_ps(acc_mem + d0 + 8 * j, acc[j]);
}

LATHE_AVX2 void accumulate_v_any_avx2(const float* e, const float* const* vs, int32_t n, int64_t hd,
                                      float* acc) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) accumulate_v_avx2<8>(e, vs, n, d, acc);
  switch ((hd - d) / 8) {
    case 7:
      accumulate_v_avx2<7>(e, vs, n, d, acc);
      break;
    case 6:
      accumulate_v_avx2<6>(e, vs, n, d, acc);
      break;
    case 5:
      accumulate_v_avx2<5>(e, vs, n, d, acc);
      break;
    case 4:
      accumulate_v_avx2<4>(e, vs, n, d, acc);
      break;
    case 3:
      accumulate_v_avx2<3>(e, vs, n, d, acc);
      break;
    case 2:
      accumulate_v_avx2<2>(e, vs, n, d, acc);
      break;
    case 1:
      accumulate_v_avx2<1>(e, vs, n, d, acc);
      break;
    default:
      break;
  }
  for (d += (hd - d) / 8 * 8; d < hd; ++d)  // head_dim not a multiple of 8
    for (int32_t i = 0; i < n; ++i) acc[d] = std::fma(e[i], vs[i][d], acc[d]);
}

// Queries qs[0, nq) with key positions inside [first, last]; `scores` holds nq rows of `stride`
// floats, column = position - first.
LATHE_AVX2 void attend_set_avx2(const Query* qs, int nq, const float* const* ks,
                                const float* const* vs, int32_t first, int32_t last, float scale,
                                int64_t hd, float* scores, int64_t stride) {
  // Pass 1: scores, keys in blocks of eight, every query of the set against the block.
  for (int32_t p0 = first; p0 <= last; p0 += 8) {
    for (int i = 0; i < nq; ++i) {
      const Query& qr = qs[i];
      float* row = scores + i * stride;
      if (p0 >= qr.lo && p0 + 7 <= qr.pos) {
        scores8_avx2(qr.q, ks + p0, hd, scale, row + (p0 - first));
      } else {
        for (int32_t p = std::max(p0, qr.lo); p <= std::min(p0 + 7, qr.pos); ++p)
          row[p - first] = detail::dot_avx2(qr.q, ks[p], hd) * scale;
      }
    }
  }
  // Softmax numerators and sums per query; the accumulators start at zero in `out`.
  thread_local std::vector<float> inv;  // reused: no allocation per task and layer
  inv.resize(static_cast<size_t>(nq));
  for (int i = 0; i < nq; ++i) {
    const Query& qr = qs[i];
    float* row = scores + i * stride + (qr.lo - first);  // row[j]: position qr.lo + j
    const int32_t n = qr.pos - qr.lo + 1;
    float mx = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
    const __m256 vmx = _mm256_set1_ps(mx);
    int32_t j = 0;
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(row + j, detail::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), vmx)));
    for (; j < n; ++j) row[j] = detail::exp_scalar(row[j] - mx);
    float sum = 0.f;
    for (j = 0; j < n; ++j) sum += row[j];
    inv[i] = 1.0f / sum;
    std::fill(qr.out, qr.out + hd, 0.f);
  }
  // Pass 2: weighted sums of V, keys in blocks, every query of the set against the block.
  for (int32_t p0 = first; p0 <= last; p0 += kValueBlock) {
    for (int i = 0; i < nq; ++i) {
      const Query& qr = qs[i];
      const int32_t lo = std::max(p0, qr.lo), hi = std::min(p0 + kValueBlock - 1, qr.pos);
      if (lo <= hi)
        accumulate_v_any_avx2(scores + i * stride + (lo - first), vs + lo, hi - lo + 1, hd, qr.out);
    }
  }
  for (int i = 0; i < nq; ++i) {
    const __m256 iv = _mm256_set1_ps(inv[i]);
    float* out = qs[i].out;
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8)
      _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), iv));
    for (; d < hd; ++d) out[d] *= inv[i];
  }
}
#endif

void run_task(const PagedAttentionArgs& a, const KvLayerView& c, const Task& task, bool avx2) {
  const int64_t hd = c.head_dim;
  const int64_t group = a.num_heads / c.num_kv_heads;
  const int32_t s = task.seq;
  const int32_t q0 = a.query_start[s];
  const int32_t first_pos =
      a.seq_lens[s] - (a.query_start[s + 1] - q0);  // position of the chunk's first query
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;

  thread_local std::vector<Query> queries;
  queries.clear();
  for (int32_t r = task.row_begin; r < task.row_end; ++r) {
    const int32_t pos = first_pos + r;
    const int32_t lo = a.sliding_window > 0 ? std::max(0, pos - a.sliding_window + 1) : 0;
    for (int64_t g = 0; g < group; ++g) {
      const int64_t row = (static_cast<int64_t>(q0) + r) * a.num_heads + task.kv_head * group + g;
      queries.push_back({a.q + row * hd, a.out + row * hd, lo, pos});
    }
  }
  const int32_t first = queries.front().lo, last = queries.back().pos;

  // Pointers to K and V of every position the set reads, resolved through the block table once.
  thread_local std::vector<const float*> ks, vs;
  thread_local std::vector<float> scores;
  if (ks.size() < static_cast<size_t>(last + 1)) {
    ks.resize(static_cast<size_t>(last + 1));
    vs.resize(static_cast<size_t>(last + 1));
  }
  for (int32_t p = first; p <= last; ++p) {
    ks[p] = kv_at(c.k, table, p, c, task.kv_head);
    vs[p] = kv_at(c.v, table, p, c, task.kv_head);
  }
  const int64_t stride = last - first + 8;
#if LATHE_CPU_X86
  if (avx2) {
    const size_t need = queries.size() * static_cast<size_t>(stride);
    if (scores.size() < need) scores.resize(need);
    attend_set_avx2(queries.data(), static_cast<int>(queries.size()), ks.data(), vs.data(), first,
                    last, a.scale, hd, scores.data(), stride);
    return;
  }
#endif
  if (scores.size() < static_cast<size_t>(stride)) scores.resize(static_cast<size_t>(stride));
  for (const Query& qr : queries)
    attend_scalar(qr, ks.data(), vs.data(), a.scale, hd, scores.data());
}

}  // namespace

void paged_attention(const PagedAttentionArgs& args, const KvLayerView& cache, ThreadPool& pool) {
  const int64_t group = args.num_heads / cache.num_kv_heads;
  // The caller's list, reused every layer. A named reference: the worker threads must see this
  // thread's vector, not their own thread_local one.
  thread_local std::vector<Task> reused;
  std::vector<Task>& tasks = reused;
  tasks.clear();
  for (int32_t s = 0; s < args.num_seqs; ++s) {
    const int32_t rows = args.query_start[s + 1] - args.query_start[s];
    // Fewer rows per item for long contexts, so the scores scratch stays bounded.
    const int64_t span = std::max<int64_t>(1, args.seq_lens[s]) * group;
    const int32_t per_item =
        static_cast<int32_t>(std::clamp<int64_t>(kMaxScoreFloats / span, 1, kMaxQueryRows));
    for (int32_t h = 0; h < cache.num_kv_heads; ++h)
      for (int32_t r = 0; r < rows; r += per_item)
        tasks.push_back({s, h, r, std::min(rows, r + per_item)});
  }
  const bool avx2 = cpu_isa() == CpuIsa::kAvx2;
  pool.parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) run_task(args, cache, tasks[t], avx2);
  });
}

}  // namespace lathe::cpu

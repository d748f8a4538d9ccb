// The CPU reference implementation of every op of the Llama-family forward pass. Activations are
// float32, row-major. These functions are the numerical ground truth: every CUDA kernel has a
// parity test against the function of the same name here. Each op computes every output element
// with a fixed order of floating-point operations that depends only on that element's inputs, never
// on the batch size or the thread count, so results are batch-invariant and reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/tensor_view.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_matrix.h"

namespace lathe {
class ThreadPool;
}

namespace lathe::cpu {

// The instruction set the ops run with. Both paths compute bit-identical results (cpu_simd.h); the
// scalar one exists for CPUs without AVX2/FMA/F16C and for tests. Default: AVX2 when the CPU has
// it, unless the environment sets LATHE_CPU_ISA=scalar.
enum class CpuIsa { kScalar, kAvx2 };
CpuIsa cpu_isa();
// Selects the path for the whole process (tests, benchmarks). kAvx2 on a CPU without it selects
// kScalar.
void set_cpu_isa(CpuIsa isa);
const char* cpu_isa_name(CpuIsa isa);  // "scalar", "avx2"

// Whether linear() and embedding() accept weights of this type (f32, f16, bf16, every GGUF block
// type).
bool is_supported_weight_type(DType type);
// Whether linear() runs this matrix: dense and GGUF matrices of a supported type, and every
// quantized format weight_dequant.h decodes (validated matrices: int GPTQ / AWQ /
// compressed-tensors / int8 rows, fp8 per tensor / channel / block).
bool is_supported_matrix(const WeightMatrix& w);

// out[i, :] = table[ids[i], :] dequantized. table: [vocab, dim] of any supported dtype.
void embedding(const TensorView& table, const int32_t* ids, int64_t num_tokens, float* out);

// out[r, :] = (x[r, :] * inv) * weight with inv = float(1 / sqrt(mean(x[r, :]^2) + eps)), the sum
// of squares in double. x, out: [rows, dim]; may alias.
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
              float* out);

// Fused residual + norm (the CUDA kernel's contract): residual += x; out = rms_norm(residual).
void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* out);

// y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]). W may be f32, f16, bf16 or any GGUF block type;
// quantized rows are dequantized block by block (f32 accumulation). Parallel over N.
// Numerics: w is dequantized exactly as ggml's reference dequantize_row_* does (float32 products
// and sums, no fused multiply-add), then y[m, n] = dot(x[m, :], w[n, :]) + bias[n] with the
// canonical eight-lane fused-multiply-add order of cpu_simd.h. Independent of M and of the thread
// count. x and y must not alias.
// Quantized formats (int, fp8; weight_matrix.h) run the same way: each tile of W is dequantized
// into float32 rows exactly as weight_dequant.h's reference decoder defines them (w = s * (q - z),
// w = e4m3 * s: one float32 product per weight), then the same canonical dot products. Activations
// stay float32: static input scales and dynamic activation quantization (W8A8 on the GPU) are not
// applied, so the result is the product with the dequantized weights.
void linear(const float* x, int64_t m, const TensorView& w, const float* bias, float* y,
            ThreadPool& pool);
void linear(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y,
            ThreadPool& pool);

// Several linears that read the same x [M, K] (q/k/v, gate/up) in one parallel dispatch (up to
// kMaxLinearGroup at a time); each item's result equals linear(x, m, *w, bias, y).
struct LinearGroupItem {
  const WeightMatrix* w = nullptr;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [M, N]
};
constexpr int kMaxLinearGroup = 4;
void linear_group(const float* x, int64_t m, const LinearGroupItem* items, int num_items,
                  ThreadPool& pool);

// Inverse frequencies of the rotary embedding, [rotary_dim / 2], including llama3 / linear scaling.
std::vector<float> rope_inv_freq(const ModelConfig& config);

// Rotates x [num_tokens, num_heads, head_dim] in place at positions[num_tokens].
// kNeox pairs (i, i + head_dim/2); kInterleaved pairs (2i, 2i+1). For pair (a, b) with frequency
// i: angle = float(position) * inv_freq[i] (float32, as transformers), c = cos(angle),
// s = sin(angle) rounded to float; a' = a*c - b*s, b' = b*c + a*s.
void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
          int64_t head_dim, const std::vector<float>& inv_freq, RopeStyle style);
// The same in two parts, so a step computes its angles once for every layer and for q and k:
// rope_table() fills cos/sin [num_tokens, inv_freq.size()] (the rounding above), and the rope()
// overload rotates with them.
void rope_table(const int32_t* positions, int64_t num_tokens, const std::vector<float>& inv_freq,
                float* cos_out, float* sin_out);
void rope(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, const float* cos_t,
          const float* sin_t, RopeStyle style);

// Paged KV cache of one layer: [num_blocks, block_size, num_kv_heads, head_dim] float32 each for K
// and V.
struct KvLayerView {
  float* k = nullptr;
  float* v = nullptr;
  int32_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// k, v: [num_tokens, num_kv_heads, head_dim]; writes token t to slot slot_mapping[t]
// (block = slot / block_size, offset = slot % block_size). Negative slots are skipped (padding).
void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int64_t num_tokens,
              const KvLayerView& cache);

// Causal attention through block tables, grouped-query (num_heads % num_kv_heads == 0).
//   q:   [num_tokens, num_heads, head_dim]; the tokens of sequence s are rows
//        [query_start[s], query_start[s+1]). Query token j of sequence s (0-based within its chunk)
//        sits at position seq_lens[s] - (query_start[s+1] - query_start[s]) + j and attends to
//        positions [0, that position] (or its sliding window). Query head h reads KV head
//        h / (num_heads / num_kv_heads).
//   block_tables: [num_seqs, max_blocks_per_seq]. out: [num_tokens, num_heads, head_dim].
//   scale: usually 1/sqrt(head_dim).
// Numerics, per query and head over its positions p in ascending order, float32:
//   s_p = dot(q, k_p) * scale (the canonical dot of cpu_simd.h); m = max s_p;
//   e_p = exp(s_p - m) (cpu_simd.h's exp); S = e_0 + e_1 + ... (sequential);
//   out[d] = (fma chain over p of e_p * v_p[d], starting at 0) * (1 / S).
// Parallel over (sequence, KV head, runs of query rows).
struct PagedAttentionArgs {
  const float* q = nullptr;
  float* out = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_tables = nullptr;
  int32_t num_seqs = 0;
  int32_t max_blocks_per_seq = 0;
  int64_t num_heads = 0;
  float scale = 1.0f;
  // > 0: the query at position p attends only to positions (p - sliding_window, p] (Mistral's
  // sliding window, as transformers masks it). 0: full causal attention.
  int32_t sliding_window = 0;
};
void paged_attention(const PagedAttentionArgs& args, const KvLayerView& cache, ThreadPool& pool);

// out[i] = silu(gate[i]) * up[i] for i in [0, n), computed as gate / (1 + exp(-gate)) * up with
// cpu_simd.h's exp. out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace lathe::cpu

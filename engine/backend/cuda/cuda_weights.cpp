#include "engine/backend/cuda/cuda_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/backend/cuda/cast.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {
namespace {

constexpr int64_t kAlign = 256;
constexpr int64_t kStagingBytes = int64_t{64} << 20;
// The CPU backend's dummy weights (cpu::make_random_matrix): standard deviation 0.02.
constexpr float kDummyStd = 0.02f;

int64_t align_up(int64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// Where each tensor goes inside the single allocation.
struct Layout {
  int64_t bytes = 0;
  int64_t add(int64_t n) {
    const int64_t off = bytes;
    bytes += align_up(n);
    return off;
  }
};

// A part of a destination tensor: rows [row_offset, row_offset + rows) of a [*, cols] matrix.
struct Target {
  void* base = nullptr;  // the destination tensor
  DType dtype = DType::kBF16;
  int64_t row_offset = 0;
  int64_t cols = 0;
};

// Double-buffered host-to-device staging: pinned host buffers, device buffers for conversions.
class Uploader {
 public:
  Status init(cudaStream_t stream) {
    stream_ = stream;
    for (int i = 0; i < 2; ++i) {
      LATHE_RETURN_IF_ERROR(host_[i].allocate(kStagingBytes, "weight upload staging"));
      LATHE_RETURN_IF_ERROR(dev_[i].allocate(kStagingBytes, "weight conversion staging"));
      LATHE_CUDA_TRY(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
    return Status();
  }
  ~Uploader() {
    for (cudaEvent_t e : done_)
      if (e != nullptr) cudaEventDestroy(e);
  }

  // Copies the host tensor `src` ([rows, cols] of any dequantizable type) into `dst`.
  Status upload(const std::string& name, const TensorView& src, const Target& dst) {
    if (src.memory != MemoryKind::kHost) return invalid_argument(name + ": expected a host tensor");
    if (!can_dequantize(src.dtype))
      return unsupported(name + ": the CUDA backend cannot load " +
                         std::string(dtype_name(src.dtype)) + " weights");
    const int64_t rows = src.rows(), cols = src.row_elems();
    if (cols != dst.cols) return internal_error(name + ": column count mismatch");
    const bool raw =
        src.dtype == DType::kF32 || src.dtype == DType::kF16 || src.dtype == DType::kBF16;
    const DType staged = raw ? src.dtype : DType::kF32;
    const int64_t staged_row = cols * static_cast<int64_t>(staged == DType::kF32 ? 4 : 2);
    const int64_t dst_elem = dst.dtype == DType::kF32 ? 4 : 2;
    const int64_t chunk_rows = std::max<int64_t>(1, kStagingBytes / staged_row);
    if (staged_row > kStagingBytes)
      return unsupported(name + ": a row is larger than the upload staging buffer");
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t r1 = std::min(rows, r0 + chunk_rows);
      const int b = next_;
      next_ ^= 1;
      LATHE_CUDA_TRY(cudaEventSynchronize(done_[b]));  // the buffer's previous copy has finished
      uint8_t* h = host_[b].as<uint8_t>();
      if (raw) {
        std::memcpy(h, src.row_ptr(r0), static_cast<size_t>((r1 - r0) * staged_row));
      } else {
        float* f = reinterpret_cast<float*>(h);
        ThreadPool::global().parallel_for(
            r1 - r0,
            [&](int64_t a, int64_t e) { dequantize_rows(src, r0 + a, r0 + e, f + a * cols); }, 16);
      }
      uint8_t* out = static_cast<uint8_t*>(dst.base) + (dst.row_offset + r0) * cols * dst_elem;
      const int64_t bytes = (r1 - r0) * staged_row;
      if (staged == dst.dtype) {
        LATHE_CUDA_TRY(
            cudaMemcpyAsync(out, h, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
      } else {
        LATHE_CUDA_TRY(cudaMemcpyAsync(dev_[b].get(), h, static_cast<size_t>(bytes),
                                       cudaMemcpyHostToDevice, stream_));
        LATHE_RETURN_IF_ERROR(
            cast(staged, dev_[b].get(), dst.dtype, out, (r1 - r0) * cols, stream_));
      }
      LATHE_CUDA_TRY(cudaEventRecord(done_[b], stream_));
    }
    return Status();
  }

 private:
  cudaStream_t stream_ = nullptr;
  PinnedBuffer host_[2];
  DeviceBuffer dev_[2];
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int next_ = 0;
};

}  // namespace

Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     cudaStream_t stream) {
  if (!is_act_dtype(dtype)) return invalid_argument("the CUDA backend computes in bf16 or f16");
  const ModelConfig& c = model.config;
  const int64_t h = c.hidden_size, qs = c.q_size(), kvs = c.kv_size(), ffn = c.intermediate_size,
                v = c.vocab_size;
  const int64_t qkv_rows = qs + 2 * kvs;
  const int64_t e = 2;  // bytes per element of dtype
  const bool dummy = model.format == ModelFormat::kDummy;
  const bool tied =
      dummy ? c.tie_word_embeddings : (c.tie_word_embeddings && !model.weights.contains("output"));

  Layout lay;
  const int64_t off_embd = lay.add(v * h * e);
  const int64_t off_head = tied ? off_embd : lay.add(v * h * e);
  const int64_t off_onorm = lay.add(h * 4);
  struct LayerOffsets {
    int64_t qkv, o, gate_up, down, attn_norm, ffn_norm, q_bias = -1, k_bias = -1, v_bias = -1,
                                                        q_norm = -1, k_norm = -1;
  };
  std::vector<LayerOffsets> lo(static_cast<size_t>(c.num_layers));
  for (LayerOffsets& l : lo) {
    l.qkv = lay.add(qkv_rows * h * e);
    l.o = lay.add(h * qs * e);
    l.gate_up = lay.add(2 * ffn * h * e);
    l.down = lay.add(h * ffn * e);
    l.attn_norm = lay.add(h * 4);
    l.ffn_norm = lay.add(h * 4);
    if (c.attention_bias) {
      l.q_bias = lay.add(qs * 4);
      l.k_bias = lay.add(kvs * 4);
      l.v_bias = lay.add(kvs * 4);
    }
    if (c.qk_norm) {
      l.q_norm = lay.add(c.head_dim * 4);
      l.k_norm = lay.add(c.head_dim * 4);
    }
  }

  DeviceWeights w;
  w.dtype = dtype;
  LATHE_RETURN_IF_ERROR(w.storage.allocate(lay.bytes, "model weights"));
  uint8_t* base = w.storage.as<uint8_t>();
  auto at = [base](int64_t off) { return off < 0 ? nullptr : base + off; };
  auto atf = [base](int64_t off) {
    return off < 0 ? nullptr : reinterpret_cast<float*>(base + off);
  };
  w.token_embd = at(off_embd);
  w.lm_head = at(off_head);
  w.output_norm = atf(off_onorm);
  w.layers.resize(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    DeviceLayer& d = w.layers[i];
    d.qkv = at(lo[i].qkv);
    d.o = at(lo[i].o);
    d.gate_up = at(lo[i].gate_up);
    d.down = at(lo[i].down);
    d.attn_norm = atf(lo[i].attn_norm);
    d.ffn_norm = atf(lo[i].ffn_norm);
    d.q_bias = atf(lo[i].q_bias);
    d.k_bias = atf(lo[i].k_bias);
    d.v_bias = atf(lo[i].v_bias);
    d.q_norm = atf(lo[i].q_norm);
    d.k_norm = atf(lo[i].k_norm);
  }

  if (dummy) {
    // The CPU backend's stream order: token_embd, output (untied), then per layer q k v o gate up
    // down.
    uint64_t sid = 0;
    auto rnd = [&](void* dst, int64_t n) {
      return random_fill(dtype, dst, n, 0, kDummyStd, dummy_seed, sid++, stream);
    };
    // Values are rounded to bf16 as the CPU stores them; with f16 activations they are then rounded
    // to f16 (and an f32 dummy config, which the CPU keeps in f32, is rounded to the runner's
    // dtype).
    LATHE_RETURN_IF_ERROR(rnd(w.token_embd, v * h));
    if (!tied) LATHE_RETURN_IF_ERROR(rnd(w.lm_head, v * h));
    LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, w.output_norm, h, 1.0f, stream));
    for (DeviceLayer& d : w.layers) {
      uint8_t* qkv = static_cast<uint8_t*>(d.qkv);
      LATHE_RETURN_IF_ERROR(rnd(qkv, qs * h));
      LATHE_RETURN_IF_ERROR(rnd(qkv + qs * h * e, kvs * h));
      LATHE_RETURN_IF_ERROR(rnd(qkv + (qs + kvs) * h * e, kvs * h));
      LATHE_RETURN_IF_ERROR(rnd(d.o, h * qs));
      LATHE_RETURN_IF_ERROR(rnd(d.gate_up, ffn * h));
      LATHE_RETURN_IF_ERROR(rnd(static_cast<uint8_t*>(d.gate_up) + ffn * h * e, ffn * h));
      LATHE_RETURN_IF_ERROR(rnd(d.down, h * ffn));
      LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.attn_norm, h, 1.0f, stream));
      LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.ffn_norm, h, 1.0f, stream));
      if (d.q_bias != nullptr) {
        LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.q_bias, qs, 0.0f, stream));
        LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.k_bias, kvs, 0.0f, stream));
        LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.v_bias, kvs, 0.0f, stream));
      }
      if (d.q_norm != nullptr) {
        LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.q_norm, c.head_dim, 1.0f, stream));
        LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, d.k_norm, c.head_dim, 1.0f, stream));
      }
    }
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
    return w;
  }

  Uploader up;
  LATHE_RETURN_IF_ERROR(up.init(stream));
  const WeightStore& ws = model.weights;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, void* dst,
                    int64_t row_offset) -> Status {
    LATHE_ASSIGN_OR_RETURN(TensorView t, ws.get(name, {rows, cols}));
    return up.upload(name, t, Target{dst, dtype, row_offset, cols});
  };
  auto vec = [&](const std::string& name, int64_t n, float* dst) -> Status {
    LATHE_ASSIGN_OR_RETURN(TensorView t, ws.get(name, {n}));
    TensorView row = t;
    row.ndim = 2;
    row.shape = {1, n, 0, 0};
    return up.upload(name, row, Target{dst, DType::kF32, 0, n});
  };
  LATHE_RETURN_IF_ERROR(matrix("token_embd", v, h, w.token_embd, 0));
  if (!tied) LATHE_RETURN_IF_ERROR(matrix("output", v, h, w.lm_head, 0));
  LATHE_RETURN_IF_ERROR(vec("output_norm", h, w.output_norm));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DeviceLayer& d = w.layers[static_cast<size_t>(i)];
    auto name = [i](const char* suffix) { return WeightStore::layer_name(i, suffix); };
    LATHE_RETURN_IF_ERROR(matrix(name("attn_q"), qs, h, d.qkv, 0));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_k"), kvs, h, d.qkv, qs));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_v"), kvs, h, d.qkv, qs + kvs));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_output"), h, qs, d.o, 0));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_gate"), ffn, h, d.gate_up, 0));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_up"), ffn, h, d.gate_up, ffn));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_down"), h, ffn, d.down, 0));
    LATHE_RETURN_IF_ERROR(vec(name("attn_norm"), h, d.attn_norm));
    LATHE_RETURN_IF_ERROR(vec(name("ffn_norm"), h, d.ffn_norm));
    if (c.attention_bias) {
      LATHE_RETURN_IF_ERROR(vec(name("attn_q_bias"), qs, d.q_bias));
      LATHE_RETURN_IF_ERROR(vec(name("attn_k_bias"), kvs, d.k_bias));
      LATHE_RETURN_IF_ERROR(vec(name("attn_v_bias"), kvs, d.v_bias));
    }
    if (c.qk_norm) {
      LATHE_RETURN_IF_ERROR(vec(name("attn_q_norm"), c.head_dim, d.q_norm));
      LATHE_RETURN_IF_ERROR(vec(name("attn_k_norm"), c.head_dim, d.k_norm));
    }
  }
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace lathe::cuda

#include "engine/backend/cuda/cuda_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/backend/cuda/cast.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"
#include "engine/model/layer_weights.h"
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

const DeviceLinear& DeviceWeights::linear(int64_t layer, LinearSlot slot) const {
  const DeviceLayer& l = layers[static_cast<size_t>(layer)];
  switch (slot) {
    case LinearSlot::kQkv:
      return l.qkv;
    case LinearSlot::kO:
      return l.o;
    case LinearSlot::kGateUp:
      return l.gate_up;
    case LinearSlot::kDown:
      return l.down;
    case LinearSlot::kLmHead:
      break;
  }
  return lm_head;
}

namespace {

// The checkpoint formats of a group's parts, most rows first ("q4_k+q6_k").
std::string source_of(const LinearGroup& g) {
  std::vector<std::pair<int64_t, std::string>> rows;
  for (const WeightMatrix& m : g.parts) {
    const std::string d = m.describe();
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.second == d; });
    if (it == rows.end())
      rows.emplace_back(m.n, d);
    else
      it->first += m.n;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (const auto& r : rows) s += (s.empty() ? "" : "+") + r.second;
  return s;
}

DeviceLinear dense(void* w, int64_t n, int64_t k, DType dtype, const char* name) {
  DeviceLinear l;
  l.format = WeightFormat::kDense;
  l.dtype = dtype;
  l.w = w;
  l.n = n;
  l.k = k;
  l.name = name;
  l.source = std::string(dtype_name(dtype));
  return l;
}

}  // namespace

Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     const ParallelConfig& parallel, cudaStream_t stream) {
  if (!is_act_dtype(dtype)) return invalid_argument("the CUDA backend computes in bf16 or f16");
  LATHE_RETURN_IF_ERROR(require_single_rank(parallel, "the CUDA backend"));
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
  w.lm_head = dense(at(off_head), v, h, dtype, "lm_head");
  w.output_norm = atf(off_onorm);
  w.layers.resize(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    DeviceLayer& d = w.layers[i];
    d.qkv = dense(at(lo[i].qkv), qkv_rows, h, dtype, "qkv_proj");
    d.o = dense(at(lo[i].o), h, qs, dtype, "o_proj");
    d.gate_up = dense(at(lo[i].gate_up), 2 * ffn, h, dtype, "gate_up_proj");
    d.down = dense(at(lo[i].down), h, ffn, dtype, "down_proj");
    d.attn_norm = atf(lo[i].attn_norm);
    d.ffn_norm = atf(lo[i].ffn_norm);
    d.q_bias = atf(lo[i].q_bias);
    d.k_bias = atf(lo[i].k_bias);
    d.v_bias = atf(lo[i].v_bias);
    d.q_norm = atf(lo[i].q_norm);
    d.k_norm = atf(lo[i].k_norm);
  }
  // Where each canonical matrix goes: its projection's rows [row_offset, row_offset + n).
  auto place = [&](const std::string& name) -> std::pair<void*, int64_t> {
    if (name == "token_embd") return {w.token_embd, 0};
    if (name == "output") return {const_cast<void*>(w.lm_head.w), 0};
    const size_t dot = name.find('.', 4);
    DeviceLayer& d = w.layers[static_cast<size_t>(std::stoll(name.substr(4, dot - 4)))];
    const std::string s = name.substr(dot + 1);
    if (s == "attn_q") return {const_cast<void*>(d.qkv.w), 0};
    if (s == "attn_k") return {const_cast<void*>(d.qkv.w), qs};
    if (s == "attn_v") return {const_cast<void*>(d.qkv.w), qs + kvs};
    if (s == "attn_output") return {const_cast<void*>(d.o.w), 0};
    if (s == "ffn_gate") return {const_cast<void*>(d.gate_up.w), 0};
    if (s == "ffn_up") return {const_cast<void*>(d.gate_up.w), ffn};
    return {const_cast<void*>(d.down.w), 0};
  };

  if (dummy) {
    // One random stream per matrix, in dummy_matrix_order() (the CPU backend's order too). Values
    // are rounded to bf16 as the CPU stores them; with f16 activations they are then rounded to f16
    // (and an f32 dummy config, which the CPU keeps in f32, is rounded to the runner's dtype).
    const std::vector<MatrixShape> order = dummy_matrix_order(c);
    for (size_t sid = 0; sid < order.size(); ++sid) {
      const auto [dst, row] = place(order[sid].name);
      uint8_t* out = static_cast<uint8_t*>(dst) + row * order[sid].k * e;
      LATHE_RETURN_IF_ERROR(random_fill(dtype, out, order[sid].n * order[sid].k, 0, kDummyStd,
                                        dummy_seed, sid, stream));
    }
    LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, w.output_norm, h, 1.0f, stream));
    for (DeviceLayer& d : w.layers) {
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

  LATHE_ASSIGN_OR_RETURN(const ModelWeights mw, bind_model_weights(model));
  Uploader up;
  LATHE_RETURN_IF_ERROR(up.init(stream));
  // A projection: every part into its rows of the fused matrix, biases into their vectors.
  auto group = [&](const LinearGroup& g, DeviceLinear* dl, float* const* bias_dst) -> Status {
    int64_t row = 0;
    for (size_t i = 0; i < g.parts.size(); ++i) {
      const WeightMatrix& m = g.parts[i];
      if (m.format != WeightFormat::kDense && m.format != WeightFormat::kGguf)
        return unsupported(m.name + ": the CUDA backend cannot load " + m.describe() +
                           " weights yet");
      LATHE_RETURN_IF_ERROR(
          up.upload(m.name, m.data, Target{const_cast<void*>(dl->w), dtype, row, m.k}));
      const TensorView& b = i < g.biases.size() ? g.biases[i] : TensorView{};
      if (b.ndim > 0 && bias_dst != nullptr && bias_dst[i] != nullptr) {
        TensorView r = b;
        r.ndim = 2;
        r.shape = {1, b.numel(), 0, 0};
        LATHE_RETURN_IF_ERROR(
            up.upload(m.name + " bias", r, Target{bias_dst[i], DType::kF32, 0, b.numel()}));
      }
      row += m.n;
    }
    dl->source = source_of(g);
    return Status();
  };
  auto vec = [&](const std::string& name, const TensorView& t, float* dst) -> Status {
    TensorView row = t;
    row.ndim = 2;
    row.shape = {1, t.numel(), 0, 0};
    return up.upload(name, row, Target{dst, DType::kF32, 0, t.numel()});
  };
  LATHE_RETURN_IF_ERROR(up.upload("token_embd", mw.token_embd, Target{w.token_embd, dtype, 0, h}));
  if (!tied) LATHE_RETURN_IF_ERROR(group(mw.lm_head, &w.lm_head, nullptr));
  w.lm_head.source = source_of(mw.lm_head);
  LATHE_RETURN_IF_ERROR(vec("output_norm", mw.output_norm, w.output_norm));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    DeviceLayer& d = w.layers[i];
    const LayerWeights& l = mw.layers[i];
    const std::string prefix = "blk." + std::to_string(i) + ".";
    float* const qkv_bias[3] = {d.q_bias, d.k_bias, d.v_bias};
    LATHE_RETURN_IF_ERROR(group(l.qkv, &d.qkv, qkv_bias));
    LATHE_RETURN_IF_ERROR(group(l.o, &d.o, nullptr));
    LATHE_RETURN_IF_ERROR(group(l.gate_up, &d.gate_up, nullptr));
    LATHE_RETURN_IF_ERROR(group(l.down, &d.down, nullptr));
    LATHE_RETURN_IF_ERROR(vec(prefix + "attn_norm", l.attn_norm, d.attn_norm));
    LATHE_RETURN_IF_ERROR(vec(prefix + "ffn_norm", l.ffn_norm, d.ffn_norm));
    if (d.q_norm != nullptr) {
      LATHE_RETURN_IF_ERROR(vec(prefix + "attn_q_norm", l.q_norm, d.q_norm));
      LATHE_RETURN_IF_ERROR(vec(prefix + "attn_k_norm", l.k_norm, d.k_norm));
    }
  }
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace lathe::cuda

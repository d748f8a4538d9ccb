#include "engine/backend/cuda/cuda_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/backend/cuda/dummy_quant.h"
#include "engine/backend/cuda/gguf_repack.h"
#include "engine/backend/cuda/gguf_units.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/backend/cuda/weight_repack.h"
#include "engine/backend/cuda/weight_uploader.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"
#include "engine/model/layer_weights.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {
namespace {

constexpr int64_t kAlign = 256;
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

}  // namespace

const DeviceLinear& DeviceWeights::linear(int64_t layer, LinearSlot slot) const {
  return projection(layers[static_cast<size_t>(layer)], lm_head, slot);
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

namespace {

// Where a projection's storage goes in the single allocation: one dense matrix of the activation
// dtype, or each part in its stored format.
struct ProjectionPlan {
  bool stored = false;
  int64_t dense_offset = -1;
  std::vector<int64_t> part_offsets;
};

// Whether a GGUF part is uploaded in the integer row layout (gguf_repack.h).
bool repacked_gguf(const WeightMatrix& m, bool gguf_repack) {
  return gguf_repack && gguf_repacks(m);
}

// Whether a GGUF Q6_K part is uploaded in the split layout (gguf_repack.h).
bool split_q6k(const WeightMatrix& m, bool gguf_repack) {
  return gguf_repack && gguf_splits_q6k(m);
}

// Whether a GGUF Q5_K part is uploaded with its high bits in unit order (gguf_repack.h).
bool units_q5k(const WeightMatrix& m, bool gguf_repack) {
  return gguf_repack && gguf_reorders_q5k(m);
}

// Whether a GGUF Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K part is uploaded in the unit layout
// (gguf_units.h).
bool units_gguf(const WeightMatrix& m, bool gguf_repack) {
  return gguf_repack && gguf_takes_units(m);
}

// Bytes of one stored part on the device (integer and FP8 parts repacked, weight_repack.h; GGUF
// Q8_0 / Q4_0 parts in the integer row layout where gguf_repack, gguf_repack.h).
Result<int64_t> stored_bytes(const WeightMatrix& m, int64_t act_bytes, bool gguf_repack) {
  switch (m.format) {
    case WeightFormat::kDense:
      return m.n * m.k * act_bytes;
    case WeightFormat::kGguf:
      if (repacked_gguf(m, gguf_repack)) return gguf_repack_shape(m).bytes();
      if (split_q6k(m, gguf_repack)) return gguf_q6k_split_shape(m).bytes();
      if (units_gguf(m, gguf_repack)) return gguf_units_shape(m).bytes();
      return m.data.nbytes();
    case WeightFormat::kInt:
    case WeightFormat::kFp8: {
      LATHE_ASSIGN_OR_RETURN(const RepackShape s, repack_shape(m));
      return s.bytes();
    }
  }
  return internal_error(m.name + ": unknown weight format");
}

// The device description of a stored part at `data`; data null: a description for the kernels'
// checks only, every pointer the format needs set to a placeholder that is never read. A GGUF
// Q8_0 / Q4_0 part is described as the kInt part it is uploaded as where gguf_repack.
QuantPart part_of(const WeightMatrix& m, uint8_t* data, int64_t row_offset, bool int4_tiles,
                  bool gguf_repack) {
  static uint8_t placeholder = 0;
  auto at = [&](int64_t offset) { return data != nullptr ? data + offset : &placeholder; };
  QuantPart q;
  q.format = m.format;
  q.gguf_type = m.dtype;
  q.data = at(0);
  q.n = m.n;
  q.k = m.k;
  q.row_offset = row_offset;
  if (m.format == WeightFormat::kInt || m.format == WeightFormat::kFp8) {
    const RepackShape s = repack_shape(m, int4_tiles).value();  // checked when planned
    q.bits = s.bits;
    q.group_size = s.group_size;
    q.scales = at(s.scales_at());
    q.scale_dtype = s.scale_dtype;
    q.zeros = s.has_zeros ? at(s.zeros_at()) : nullptr;
    q.g_idx = s.has_g_idx ? reinterpret_cast<const int32_t*>(at(s.g_idx_at())) : nullptr;
    q.fp8_scale = s.fp8_scale;
    q.int4_tiles = s.int4_tiles;
  } else if (repacked_gguf(m, gguf_repack)) {
    const RepackShape s = gguf_repack_shape(m);
    q.format = WeightFormat::kInt;
    q.bits = s.bits;
    q.group_size = s.group_size;
    q.scales = at(s.scales_at());
    q.scale_dtype = s.scale_dtype;
  } else if (split_q6k(m, gguf_repack)) {
    q.gguf_q6k_split = true;
    q.scales = at(gguf_q6k_split_shape(m).scales_at());
    q.scale_dtype = DType::kF16;
  } else if (units_q5k(m, gguf_repack)) {
    q.gguf_q5k_units = true;
  } else if (units_gguf(m, gguf_repack)) {
    const RepackShape s = gguf_units_shape(m);
    q.gguf_units = true;
    q.scales = at(s.scales_at());
    q.gguf_aux = s.has_zeros ? at(s.zeros_at()) : nullptr;
  }
  return q;
}

// The pieces of a repacked part (data, scales, and zero points and g_idx where the shape has them)
// into the part's device memory at dst, each at its offset in `s`.
Status upload_pieces(Uploader& up, const std::string& name, const RepackedPart& r,
                     const RepackShape& s, void* dst) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  LATHE_RETURN_IF_ERROR(up.upload_raw(name, r.data.data(), s.data_bytes, d));
  LATHE_RETURN_IF_ERROR(up.upload_raw(name, r.scales.data(), s.scale_bytes, d + s.scales_at()));
  if (s.has_zeros)
    LATHE_RETURN_IF_ERROR(up.upload_raw(name, r.zeros.data(), s.zero_bytes, d + s.zeros_at()));
  if (s.has_g_idx)
    LATHE_RETURN_IF_ERROR(up.upload_raw(name, r.g_idx.data(), s.g_idx_bytes, d + s.g_idx_at()));
  return Status();
}

// The load log's line on GGUF parts, empty without any: which block types run in the integer row
// layout (gguf_repack.h) and which in their blocks, in the order they first appear, e.g. "GGUF
// weights: q8_0 as 8-bit integer rows (group 32, f16 scales); q6_k as GGUF blocks".
std::string gguf_layouts(const std::vector<const LinearGroup*>& groups, bool gguf_repack) {
  std::vector<std::string> seen;
  std::string s;
  for (const LinearGroup* g : groups) {
    if (g == nullptr) continue;
    for (const WeightMatrix& m : g->parts) {
      if (m.format != WeightFormat::kGguf) continue;
      const std::string type(dtype_name(m.dtype));
      if (std::find(seen.begin(), seen.end(), type) != seen.end()) continue;
      seen.push_back(type);
      s += s.empty() ? "GGUF weights: " : "; ";
      if (repacked_gguf(m, gguf_repack))
        s += type +
             strformat(" as %d-bit integer rows (group 32, f16 scales)", gguf_repack_shape(m).bits);
      else if (split_q6k(m, gguf_repack))
        s += type + " as 208-byte block slots with d apart (16-byte aligned)";
      else if (units_q5k(m, gguf_repack))
        s += type + " as GGUF blocks, high bits in unit order";
      else if (units_gguf(m, gguf_repack))
        s += type + " in the unit layout (codes, scales apart; 64-weight units)";
      else if (!gguf_repack &&
               (m.dtype == DType::kQ8_0 || m.dtype == DType::kQ4_0 || m.dtype == DType::kQ6_K ||
                m.dtype == DType::kQ5_K || gguf_unit_pieces(m.dtype).data > 0))
        s += type + " as GGUF blocks (LATHE_CUDA_GGUF_REPACK=0)";
      else
        s += type + " as GGUF blocks";
    }
  }
  return s;
}

}  // namespace

int64_t ProjectionStorage::bytes() const {
  int64_t b = dense_bytes;
  for (int64_t p : part_bytes) b += p;
  return b;
}

Result<ProjectionStorage> plan_projection(const LinearGroup* g, int64_t n, int64_t k,
                                          int64_t act_bytes, bool native_formats,
                                          bool gguf_repack) {
  ProjectionStorage s;
  if (g != nullptr && native_formats)
    for (const WeightMatrix& m : g->parts) s.stored |= m.format != WeightFormat::kDense;
  if (!s.stored) {
    s.dense_bytes = n * k * act_bytes;
    return s;
  }
  for (const WeightMatrix& m : g->parts) {
    LATHE_ASSIGN_OR_RETURN(const int64_t bytes, stored_bytes(m, act_bytes, gguf_repack));
    // The kernels' checks on the part's description (no memory is read): a part they cannot take
    // is refused here, before the allocation.
    std::string why;
    if (!quant_part_supported(part_of(m, nullptr, 0, false, gguf_repack), &why))
      return unsupported(m.name + ": " + why);
    s.part_bytes.push_back(bytes);
  }
  return s;
}

Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     const ParallelConfig& parallel, bool native_formats,
                                     bool int4_tiles, bool gguf_repack, cudaStream_t stream,
                                     const std::function<Status(int64_t)>& check_fits) {
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
  ModelWeights mw;
  if (!dummy) {
    LATHE_ASSIGN_OR_RETURN(mw, bind_model_weights(model));
  }
  // Dummy weights with --quantization: the layer projections (GGUF types: and the LM head) in
  // that format (dummy_quant.h).
  if (dummy && !native_formats && model.dummy_gguf.active())
    return unsupported("--quantization " + model.dummy_gguf.name +
                       " with dummy weights keeps GGUF blocks on the device, which "
                       "LATHE_CUDA_NATIVE_FORMATS=0 turns off; unset it");
  const bool dummy_quant = native_formats && has_dummy_quant(model);
  DummyQuantWeights dq;
  if (dummy_quant) {
    LATHE_ASSIGN_OR_RETURN(dq, dummy_quant_weights(model));
    log_info(strformat("--quantization %s with dummy weights: %s, embedding %s",
                       model.dummy_gguf.active() ? model.dummy_gguf.name.c_str()
                                                 : online_quant_name(model.online_quantization),
                       dq.description.c_str(), std::string(dtype_name(dtype)).c_str()));
  }
  const std::vector<LayerWeights>& dummy_layers = dq.layers;
  const LinearGroup* dummy_head = dq.lm_head.parts.empty() ? nullptr : &dq.lm_head;
  // The layer weights a projection is planned from: the checkpoint's, the quantized dummy's, or
  // none (16-bit dummy).
  auto layer_source = [&](size_t i) -> const LayerWeights* {
    if (!dummy) return &mw.layers[i];
    return dummy_quant ? &dummy_layers[i] : nullptr;
  };

  Layout lay;
  // Each projection as plan_projection() says: its parts in their stored formats, or one dense
  // matrix.
  auto plan = [&](const LinearGroup* g, int64_t n, int64_t k) -> Result<ProjectionPlan> {
    LATHE_ASSIGN_OR_RETURN(const ProjectionStorage s,
                           plan_projection(g, n, k, e, native_formats, gguf_repack));
    ProjectionPlan pp;
    pp.stored = s.stored;
    if (!s.stored) {
      pp.dense_offset = lay.add(s.dense_bytes);
      return pp;
    }
    for (const int64_t bytes : s.part_bytes) pp.part_offsets.push_back(lay.add(bytes));
    return pp;
  };
  const int64_t off_embd = lay.add(v * h * e);
  ProjectionPlan head;
  if (tied) {
    head.dense_offset = off_embd;
  } else {
    LATHE_ASSIGN_OR_RETURN(head, plan(dummy ? dummy_head : &mw.lm_head, v, h));
  }
  const int64_t off_onorm = lay.add(h * 4);
  struct LayerOffsets {
    ProjectionPlan qkv, o, gate_up, down;
    int64_t attn_norm, ffn_norm, q_bias = -1, k_bias = -1, v_bias = -1, q_norm = -1, k_norm = -1;
  };
  std::vector<LayerOffsets> lo(static_cast<size_t>(c.num_layers));
  for (size_t i = 0; i < lo.size(); ++i) {
    LayerOffsets& l = lo[i];
    const LayerWeights* lw = layer_source(i);
    LATHE_ASSIGN_OR_RETURN(l.qkv, plan(lw ? &lw->qkv : nullptr, qkv_rows, h));
    LATHE_ASSIGN_OR_RETURN(l.o, plan(lw ? &lw->o : nullptr, h, qs));
    LATHE_ASSIGN_OR_RETURN(l.gate_up, plan(lw ? &lw->gate_up : nullptr, 2 * ffn, h));
    LATHE_ASSIGN_OR_RETURN(l.down, plan(lw ? &lw->down : nullptr, h, ffn));
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

  if (native_formats) {
    std::vector<const LinearGroup*> groups;
    for (size_t i = 0; i < lo.size(); ++i)
      if (const LayerWeights* lw = layer_source(i))
        for (const LinearGroup* g : {&lw->qkv, &lw->o, &lw->gate_up, &lw->down})
          groups.push_back(g);
    if (!tied) groups.push_back(dummy ? dummy_head : &mw.lm_head);
    const std::string layouts = gguf_layouts(groups, gguf_repack);
    if (!layouts.empty()) log_info("CUDA: " + layouts);
  }
  if (check_fits) LATHE_RETURN_IF_ERROR(check_fits(lay.bytes));
  DeviceWeights w;
  w.dtype = dtype;
  LATHE_RETURN_IF_ERROR(w.storage.allocate(lay.bytes, "model weights"));
  uint8_t* base = w.storage.as<uint8_t>();
  auto at = [base](int64_t off) { return off < 0 ? nullptr : base + off; };
  auto atf = [base](int64_t off) {
    return off < 0 ? nullptr : reinterpret_cast<float*>(base + off);
  };
  // The DeviceLinear of a planned projection (its parts described, not yet uploaded).
  auto linear = [&](const ProjectionPlan& pp, const LinearGroup* g, int64_t n, int64_t k,
                    const char* name) -> Result<DeviceLinear> {
    if (!pp.stored) return dense(at(pp.dense_offset), n, k, dtype, name);
    DeviceLinear l;
    l.n = n;
    l.k = k;
    l.name = name;
    l.dtype = dtype;
    l.source = source_of(*g);
    l.format = WeightFormat::kDense;
    int64_t row = 0;
    for (size_t i = 0; i < g->parts.size(); ++i) {
      const WeightMatrix& m = g->parts[i];
      l.parts.push_back(part_of(m, at(pp.part_offsets[i]), row, int4_tiles, gguf_repack));
      if (l.format == WeightFormat::kDense) l.format = l.parts.back().format;
      std::string why;
      if (!quant_part_supported(l.parts.back(), &why)) return unsupported(m.name + ": " + why);
      row += m.n;
    }
    return l;
  };
  w.token_embd = at(off_embd);
  LATHE_ASSIGN_OR_RETURN(w.lm_head, linear(head,
                                           tied    ? nullptr
                                           : dummy ? dummy_head
                                                   : &mw.lm_head,
                                           v, h, "lm_head"));
  w.output_norm = atf(off_onorm);
  w.layers.resize(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    DeviceLayer& d = w.layers[i];
    const LayerWeights* lw = layer_source(i);
    LATHE_ASSIGN_OR_RETURN(d.qkv,
                           linear(lo[i].qkv, lw ? &lw->qkv : nullptr, qkv_rows, h, "qkv_proj"));
    LATHE_ASSIGN_OR_RETURN(d.o, linear(lo[i].o, lw ? &lw->o : nullptr, h, qs, "o_proj"));
    LATHE_ASSIGN_OR_RETURN(
        d.gate_up, linear(lo[i].gate_up, lw ? &lw->gate_up : nullptr, 2 * ffn, h, "gate_up_proj"));
    LATHE_ASSIGN_OR_RETURN(d.down,
                           linear(lo[i].down, lw ? &lw->down : nullptr, h, ffn, "down_proj"));
    d.attn_norm = atf(lo[i].attn_norm);
    d.ffn_norm = atf(lo[i].ffn_norm);
    d.q_bias = atf(lo[i].q_bias);
    d.k_bias = atf(lo[i].k_bias);
    d.v_bias = atf(lo[i].v_bias);
    d.q_norm = atf(lo[i].q_norm);
    d.k_norm = atf(lo[i].k_norm);
  }

  if (dummy) {
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
    // One random stream per matrix, in dummy_matrix_order() (the CPU backend's order too). Values
    // are rounded to bf16 as the CPU stores them; with f16 activations they are then rounded to f16
    // (and an f32 dummy config, which the CPU keeps in f32, is rounded to the runner's dtype).
    const std::vector<MatrixShape> order = dummy_matrix_order(c);
    for (size_t sid = 0; sid < order.size(); ++sid) {
      const auto [dst, row] = place(order[sid].name);
      if (dst == nullptr) continue;  // a quantized projection, filled below
      uint8_t* out = static_cast<uint8_t*>(dst) + row * order[sid].k * e;
      LATHE_RETURN_IF_ERROR(random_fill(dtype, out, order[sid].n * order[sid].k, 0, kDummyStd,
                                        dummy_seed, sid, stream));
    }
    uint64_t sid = order.size();
    for (size_t i = 0; dummy_quant && i < w.layers.size(); ++i) {
      DeviceLayer& d = w.layers[i];
      const LayerWeights& l = dummy_layers[i];
      for (const auto& [dl, g] : {std::pair{&d.qkv, &l.qkv}, std::pair{&d.o, &l.o},
                                  std::pair{&d.gate_up, &l.gate_up}, std::pair{&d.down, &l.down}})
        for (size_t j = 0; j < dl->parts.size(); ++j)
          LATHE_RETURN_IF_ERROR(fill_dummy_quant_part(g->parts[j], dl->parts[j], int4_tiles,
                                                      dummy_seed, sid++, stream));
    }
    if (dummy_head != nullptr && !tied)
      LATHE_RETURN_IF_ERROR(fill_dummy_quant_part(dummy_head->parts[0], w.lm_head.parts[0],
                                                  int4_tiles, dummy_seed, sid++, stream));
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

  Uploader up;
  LATHE_RETURN_IF_ERROR(up.init(stream));
  // A projection: every part into its rows of the fused matrix, biases into their vectors.
  auto group = [&](const LinearGroup& g, DeviceLinear* dl, float* const* bias_dst) -> Status {
    int64_t row = 0;
    for (size_t i = 0; i < g.parts.size(); ++i) {
      const WeightMatrix& m = g.parts[i];
      if (dl->parts.empty()) {
        LATHE_RETURN_IF_ERROR(
            up.upload(m.name, m.data, Target{const_cast<void*>(dl->w), dtype, row, m.k}));
      } else {
        // Stored format: GGUF blocks as they are (Q8_0 / Q4_0 converted on the host into the
        // integer row layout, Q6_K split, Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K in the unit layout,
        // where part_of planned it); a dense part in the activation dtype.
        const QuantPart& q = dl->parts[i];
        void* dst = const_cast<void*>(q.data);
        if (m.format == WeightFormat::kDense) {
          LATHE_RETURN_IF_ERROR(up.upload(m.name, m.data, Target{dst, dtype, 0, m.k}));
        } else if (m.format == WeightFormat::kGguf && q.format == WeightFormat::kInt) {
          LATHE_ASSIGN_OR_RETURN(const RepackedPart r, cuda::gguf_repack(m));
          LATHE_RETURN_IF_ERROR(upload_pieces(up, m.name, r, gguf_repack_shape(m), dst));
        } else if (m.format == WeightFormat::kGguf && q.gguf_q6k_split) {
          LATHE_ASSIGN_OR_RETURN(const RepackedPart r, cuda::gguf_split_q6k(m));
          LATHE_RETURN_IF_ERROR(upload_pieces(up, m.name, r, gguf_q6k_split_shape(m), dst));
        } else if (m.format == WeightFormat::kGguf && q.gguf_units) {
          LATHE_ASSIGN_OR_RETURN(const RepackedPart r, cuda::gguf_to_units(m));
          LATHE_RETURN_IF_ERROR(upload_pieces(up, m.name, r, gguf_units_shape(m), dst));
        } else if (m.format == WeightFormat::kGguf && q.gguf_q5k_units) {
          LATHE_ASSIGN_OR_RETURN(const RepackedPart r, cuda::gguf_reorder_q5k(m));
          LATHE_RETURN_IF_ERROR(up.upload_raw(m.name, r.data.data(), m.data.nbytes(), dst));
        } else if (m.format == WeightFormat::kGguf) {
          LATHE_RETURN_IF_ERROR(up.upload_raw(m.name, m.data.data, m.data.nbytes(), dst));
        } else {
          // Integer codes and FP8: repacked on the host into the kernels' layout.
          LATHE_ASSIGN_OR_RETURN(const RepackShape s, repack_shape(m, int4_tiles));
          LATHE_RETURN_IF_ERROR(upload_pieces(up, m.name, repack(m, s), s, dst));
        }
      }
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

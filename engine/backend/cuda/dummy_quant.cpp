#include "engine/backend/cuda/dummy_quant.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cuda/gguf_repack.h"
#include "engine/backend/cuda/gguf_units.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/model/weight_store.h"

namespace lathe::cuda {

bool has_dummy_quant(const LoadedModel& model) {
  return model.format == ModelFormat::kDummy &&
         (model.online_quantization != OnlineQuant::kNone || model.dummy_gguf.active());
}

Result<DummyQuantWeights> dummy_quant_weights(const LoadedModel& model) {
  const ModelConfig& c = model.config;
  const int64_t h = c.hidden_size, qs = c.q_size(), kvs = c.kv_size(), ffn = c.intermediate_size;
  const DummyGguf& gguf = model.dummy_gguf;
  DummyQuantWeights w;
  Status status;
  // One part: `tensor` is the GGUF name's middle ("attn_q"), layer -1 for the LM head.
  auto part = [&](LinearGroup& g, int64_t layer, const char* tensor, int64_t n, int64_t k) {
    const std::string name =
        layer < 0 ? std::string("output") : WeightStore::layer_name(layer, tensor);
    if (!gguf.active()) {
      g.parts.push_back(dummy_quant_matrix(model.online_quantization, name, n, k));
      return;
    }
    Result<DType> t = dummy_gguf_type(gguf, c, tensor, layer, k);
    if (!t.is_ok()) {
      if (status.is_ok()) status = t.status();
      return;
    }
    g.parts.push_back(dummy_gguf_matrix(t.value(), name, n, k));
  };
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    part(l.qkv, i, "attn_q", qs, h);
    part(l.qkv, i, "attn_k", kvs, h);
    part(l.qkv, i, "attn_v", kvs, h);
    part(l.o, i, "attn_output", h, qs);
    part(l.gate_up, i, "ffn_gate", ffn, h);
    part(l.gate_up, i, "ffn_up", ffn, h);
    part(l.down, i, "ffn_down", h, ffn);
  }
  if (gguf.active() && !c.tie_word_embeddings) part(w.lm_head, -1, "output", c.vocab_size, h);
  LATHE_RETURN_IF_ERROR(status);
  // The layers' types, most weights first ("q4_k+q6_k").
  std::vector<std::pair<int64_t, std::string>> types;
  for (const LayerWeights& l : w.layers)
    for (const LinearGroup* g : {&l.qkv, &l.o, &l.gate_up, &l.down})
      for (const WeightMatrix& m : g->parts) {
        const std::string d = m.describe();
        auto it =
            std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.second == d; });
        if (it == types.end())
          types.emplace_back(m.n * m.k, d);
        else
          it->first += m.n * m.k;
      }
  std::stable_sort(types.begin(), types.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& t : types) w.description += (w.description.empty() ? "" : "+") + t.second;
  w.description += " layer projections of random codes, LM head ";
  w.description += w.lm_head.parts.empty() ? std::string(c.tie_word_embeddings ? "tied" : "16-bit")
                                           : w.lm_head.parts[0].describe();
  return w;
}

WeightMatrix dummy_gguf_matrix(DType type, const std::string& name, int64_t n, int64_t k) {
  WeightMatrix m;
  m.name = name;
  m.n = n;
  m.k = k;
  m.format = WeightFormat::kGguf;
  m.dtype = type;
  m.data = make_view(type, {n, k}, nullptr);  // the shape and bytes of the blocks; no host data
  return m;
}

WeightMatrix dummy_quant_matrix(OnlineQuant mode, const std::string& name, int64_t n, int64_t k) {
  WeightMatrix m;
  m.name = name;
  m.n = n;
  m.k = k;
  m.scheme = "dummy";
  WeightQuant& q = m.quant;
  switch (mode) {
    case OnlineQuant::kFp8:
      m.format = WeightFormat::kFp8;
      m.dtype = DType::kF8E4M3;
      q.bits = 8;
      q.granularity = ScaleGranularity::kTensor;
      q.scales.dtype = DType::kF32;
      break;
    case OnlineQuant::kInt8:
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI8;
      q.bits = 8;
      q.layout = IntLayout::kInt8Rows;
      q.granularity = ScaleGranularity::kChannel;
      q.scales.dtype = DType::kF16;
      break;
    default:  // kInt4 (kNone is never asked for)
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI32;
      q.bits = 4;
      q.layout = IntLayout::kCompressedTensors;
      q.granularity = k % 128 == 0 ? ScaleGranularity::kGroup : ScaleGranularity::kChannel;
      q.group_size = k % 128 == 0 ? 128 : 0;
      q.scales.dtype = DType::kF16;
      break;
  }
  return m;
}

Status fill_dummy_quant_part(const WeightMatrix& m, const QuantPart& part, bool int4_tiles,
                             uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  if (m.format == WeightFormat::kGguf && part.format == WeightFormat::kInt) {
    // A Q8_0 / Q4_0 part planned in the integer row layout (gguf_repack.h): what repacking the
    // dummy's blocks gives, drawn directly: uniform random codes (the blocks' random quants, moved)
    // and every scale the blocks' constant d.
    if (!gguf_repacks(m))
      return internal_error(m.name + ": a GGUF " + m.describe() + " part planned as integer rows");
    LATHE_ASSIGN_OR_RETURN(const GgufDummyBlock b, gguf_dummy_block(m.dtype));
    const RepackShape s = gguf_repack_shape(m);
    uint16_t d16 = 0;  // f16 d: the pattern's two bytes (block offset 0 in q8_0 and q4_0)
    std::memcpy(&d16, b.bytes.data(), 2);
    const float d = f16_to_f32(d16);
    LATHE_RETURN_IF_ERROR(
        random_bytes(const_cast<void*>(part.data), s.data_bytes, 0xFF, seed, stream_id, stream));
    return constant_fill(DType::kF16, const_cast<void*>(part.scales), s.scale_bytes / 2, d, stream);
  }
  if (m.format == WeightFormat::kGguf && part.gguf_q6k_split) {
    // A Q6_K part in the split layout (gguf_repack.h): the blocks' bytes moved, drawn directly:
    // random slots (ql, qh and the scales; the dummy block's scale bytes are its pattern) and
    // every d the pattern's.
    LATHE_ASSIGN_OR_RETURN(const GgufDummyBlock b, gguf_dummy_block(m.dtype));
    const RepackShape s = gguf_q6k_split_shape(m);
    constexpr int32_t kSlot = 208;
    const int64_t blocks = s.data_bytes / kSlot;
    LATHE_RETURN_IF_ERROR(
        random_bytes(const_cast<void*>(part.data), s.data_bytes, 0xFF, seed, stream_id, stream));
    if (b.offset < kSlot) {
      const int32_t len = std::min<int32_t>(b.len, kSlot - b.offset);
      LATHE_RETURN_IF_ERROR(block_pattern_fill(const_cast<void*>(part.data), blocks, kSlot,
                                               b.offset, b.bytes.data(), len, stream));
    }
    if (b.offset + b.len <= kSlot)
      return internal_error(m.name + ": the q6_k dummy pattern does not set d");
    uint16_t d16 = 0;  // f16 d: the pattern's bytes at block offset 208
    std::memcpy(&d16, b.bytes.data() + (kSlot - b.offset), 2);
    return constant_fill(DType::kF16, const_cast<void*>(part.scales), blocks, f16_to_f32(d16),
                         stream);
  }
  if (m.format == WeightFormat::kGguf && part.gguf_units) {
    // A part in the unit layout (gguf_units.h): each array random, then the template's constant
    // bytes where they fall in an array's piece of the block (the d / m / dmin and scale bytes; the
    // reordered pieces hold random codes and high bits only, so the reorder changes nothing).
    LATHE_ASSIGN_OR_RETURN(const GgufDummyBlock b, gguf_dummy_block(m.dtype));
    const GgufUnitPieces pc = gguf_unit_pieces(m.dtype);
    const int64_t blocks = m.n * (m.k / dtype_info(m.dtype).block_size);
    struct Array {
      const void* at;
      int32_t piece, from;
    };
    const Array arrays[] = {{part.data, pc.data, pc.data_from},
                            {part.scales, pc.scales, pc.scales_from},
                            {part.gguf_aux, pc.aux, pc.aux_from}};
    struct Run {
      int32_t offset, len;
      const uint8_t* bytes;
    };
    const Run runs[] = {{b.offset, b.len, b.bytes.data()},
                        {b.more.offset, b.more.len, b.more.bytes.data()}};
    uint64_t stream_at = stream_id;
    for (const Array& a : arrays) {
      if (a.piece == 0) continue;
      void* at = const_cast<void*>(a.at);
      // Up to the next multiple of 4 bytes: inside the plan's 256-byte alignment.
      LATHE_RETURN_IF_ERROR(
          random_bytes(at, (blocks * a.piece + 3) / 4 * 4, 0xFF, seed, stream_at++, stream));
      for (const Run& r : runs) {
        const int32_t lo = std::max(r.offset, a.from),
                      hi = std::min(r.offset + r.len, a.from + a.piece);
        if (lo < hi)
          LATHE_RETURN_IF_ERROR(block_pattern_fill(at, blocks, a.piece, lo - a.from,
                                                   r.bytes + (lo - r.offset), hi - lo, stream));
      }
    }
    return Status();
  }
  if (m.format == WeightFormat::kGguf) {
    LATHE_ASSIGN_OR_RETURN(const GgufDummyBlock b, gguf_dummy_block(m.dtype));
    const int64_t bytes = m.data.nbytes();
    LATHE_RETURN_IF_ERROR(random_bytes(const_cast<void*>(part.data), (bytes + 3) / 4 * 4, 0xFF,
                                       seed, stream_id, stream));
    LATHE_RETURN_IF_ERROR(block_pattern_fill(const_cast<void*>(part.data), bytes / b.block_bytes,
                                             b.block_bytes, b.offset, b.bytes.data(), b.len,
                                             stream));
    return block_pattern_fill(const_cast<void*>(part.data), bytes / b.block_bytes, b.block_bytes,
                              b.more.offset, b.more.bytes.data(), b.more.len, stream);
  }
  LATHE_ASSIGN_OR_RETURN(const RepackShape s, repack_shape(m, int4_tiles));
  // Codes: uniform over the format's values. int4 codes (zero 8) spread with std ~4.6 and int8
  // codes (zero 128) with std ~74; E4M3 bytes with bit 6 clear (exponents 0..7, no NaN) reach
  // +-1.875 with std ~0.6. The scale brings each to std ~0.02.
  const bool fp8 = part.format == WeightFormat::kFp8;
  const float scale = fp8 ? 0.03f : s.bits == 4 ? 0.0043f : 0.00027f;
  LATHE_RETURN_IF_ERROR(random_bytes(const_cast<void*>(part.data), s.data_bytes, fp8 ? 0xBF : 0xFF,
                                     seed, stream_id, stream));
  const int64_t scale_size = s.scale_dtype == DType::kF16 ? 2 : 4;
  return constant_fill(s.scale_dtype, const_cast<void*>(part.scales), s.scale_bytes / scale_size,
                       scale, stream);
}

}  // namespace lathe::cuda

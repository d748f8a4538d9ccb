// CpuModelRunner's forward pass: the forward plan (engine/model/forward_plan.h) executed op by op
// with the reference ops of cpu_ops.h. No op is fused: each computes exactly what the plan states,
// in float32, so this is the reference the other backends' fusions are checked against.
#include <cmath>
#include <cstring>

#include "engine/backend/cpu/cpu_model_runner.h"

namespace lathe {
namespace {

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

const float* bias_or_null(const std::vector<float>& b) {
  return b.empty() ? nullptr : b.data();
}

}  // namespace

const CpuModelRunner::Linear& CpuModelRunner::linear(const Layer& l, LinearSlot slot) const {
  return projection(l, lm_head_, slot);
}

void CpuModelRunner::run_layer_op(const ForwardOp& op, const Layer& l, int64_t li,
                                  const ModelInput& in, int64_t rows) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  const float eps = plan_.rms_norm_eps;
  ThreadPool& pool = *pool_;
  const int64_t layer_floats = static_cast<int64_t>(num_blocks_) * block_size_ * c.kv_size();
  cpu::KvLayerView cache;
  cache.k = kv_.get() + 2 * li * layer_floats;
  cache.v = cache.k + layer_floats;
  cache.block_size = block_size_;
  cache.num_kv_heads = c.num_kv_heads;
  cache.head_dim = c.head_dim;

  switch (op.kind) {
    case OpKind::kNorm:
      cpu::rms_norm(x_.data(), (op.norm == NormSlot::kAttn ? l.attn_norm : l.ffn_norm).data(), rows,
                    hidden, eps, h_.data());
      return;
    case OpKind::kLinear: {
      // Inputs and outputs of each projection: qkv and gate_up read the normalized rows, o the
      // attention output, down the activation.
      const Linear& g = linear(l, op.linear);
      const float* x = h_.data();
      float* outs[3] = {tmp_.data(), nullptr, nullptr};
      if (op.linear == LinearSlot::kQkv) {
        outs[0] = q_.data(), outs[1] = k_.data(), outs[2] = v_.data();
      } else if (op.linear == LinearSlot::kO) {
        x = attn_.data();
      } else if (op.linear == LinearSlot::kGateUp) {
        outs[0] = gate_.data(), outs[1] = up_.data();
      } else {
        x = gate_.data();
      }
      cpu::LinearGroupItem items[3];
      for (size_t i = 0; i < g.parts.size(); ++i)
        items[i] = {&g.parts[i], op.bias ? bias_or_null(g.biases[i]) : nullptr, outs[i]};
      cpu::linear_group(x, rows, items, static_cast<int>(g.parts.size()), pool);
      return;
    }
    case OpKind::kQkNorm:
      cpu::rms_norm(q_.data(), l.q_norm.data(), rows * c.num_heads, c.head_dim, eps, q_.data());
      cpu::rms_norm(k_.data(), l.k_norm.data(), rows * c.num_kv_heads, c.head_dim, eps, k_.data());
      return;
    case OpKind::kRope:
      cpu::rope(q_.data(), rows, c.num_heads, c.head_dim, rope_cos_.data(), rope_sin_.data(),
                plan_.rope_style);
      cpu::rope(k_.data(), rows, c.num_kv_heads, c.head_dim, rope_cos_.data(), rope_sin_.data(),
                plan_.rope_style);
      return;
    case OpKind::kKvWrite:
      cpu::write_kv(k_.data(), v_.data(), in.slot_mapping.data(), rows, cache);
      return;
    case OpKind::kAttention: {
      cpu::PagedAttentionArgs a;
      a.q = q_.data();
      a.out = attn_.data();
      a.query_start = in.query_start.data();
      a.seq_lens = in.seq_lens.data();
      a.block_tables = in.block_tables.data();
      a.num_seqs = in.num_seqs();
      a.max_blocks_per_seq = in.max_blocks_per_seq;
      a.num_heads = c.num_heads;
      a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
      a.sliding_window = plan_.sliding_window;
      cpu::paged_attention(a, cache, pool);
      return;
    }
    case OpKind::kResidualAdd: {
      // World size 1 (CpuModelRunner::create refuses more): the reduction over ranks is the
      // identity.
      float* res = x_.data();
      const float* add = tmp_.data();
      const int64_t n = rows * hidden;
      for (int64_t i = 0; i < n; ++i) res[i] += add[i];
      return;
    }
    case OpKind::kActivation:
      cpu::swiglu(gate_.data(), up_.data(), gate_.data(), rows * c.intermediate_size);
      return;
    case OpKind::kGatherVocab:
      return;  // a head op; one rank holds the whole vocabulary
  }
}

Status CpuModelRunner::forward(const ModelInput& in) {
  LATHE_RETURN_IF_ERROR(check_input(in));
  const ModelConfig& c = config_;
  const int64_t t_count = in.num_tokens();
  const int64_t hidden = c.hidden_size, q_size = c.q_size(), kv_size = c.kv_size(),
                ffn = c.intermediate_size;
  grow(x_, t_count * hidden);
  grow(h_, t_count * hidden);
  grow(tmp_, t_count * hidden);
  grow(q_, t_count * q_size);
  grow(attn_, t_count * q_size);
  grow(k_, t_count * kv_size);
  grow(v_, t_count * kv_size);
  grow(gate_, t_count * ffn);
  grow(up_, t_count * ffn);
  grow(rope_cos_, t_count * (c.head_dim / 2));
  grow(rope_sin_, t_count * (c.head_dim / 2));
  cpu::rope_table(in.positions.data(), t_count, inv_freq_, rope_cos_.data(), rope_sin_.data());

  // Rows whose hidden state reaches the logits: the trailing sample_count(i) tokens of each sampled
  // sequence (its last token, or with drafts the last verified token and the drafts), ascending.
  const int64_t n_out = in.num_sample_rows();
  std::vector<int32_t> out_rows;
  out_rows.reserve(static_cast<size_t>(n_out));
  for (size_t i = 0; i < in.sample_seqs.size(); ++i) {
    const int32_t end = in.query_start[in.sample_seqs[i] + 1];
    for (int32_t r = end - in.sample_count(i); r < end; ++r) out_rows.push_back(r);
  }

  cpu::embedding(token_embd_, in.token_ids.data(), t_count, x_.data());

  // After the last layer's attention (the last op that mixes rows) only the logits rows matter.
  const int32_t attention_op = plan_.find(OpKind::kAttention);
  int64_t rows = t_count;
  for (int64_t li = 0; li < c.num_layers && rows > 0; ++li) {
    const Layer& l = layers_[static_cast<size_t>(li)];
    for (size_t oi = 0; oi < plan_.layer.size() && rows > 0; ++oi) {
      run_layer_op(plan_.layer[oi], l, li, in, rows);
      if (li == c.num_layers - 1 && static_cast<int32_t>(oi) == attention_op) {
        // Move the rows that go on (residual and attention output) to the front. Rows are
        // ascending, so row i comes from row out_rows[i] >= i.
        for (int64_t i = 0; i < n_out; ++i) {
          const int64_t r = out_rows[static_cast<size_t>(i)];
          std::memmove(x_.data() + i * hidden, x_.data() + r * hidden, sizeof(float) * hidden);
          std::memmove(attn_.data() + i * q_size, attn_.data() + r * q_size,
                       sizeof(float) * q_size);
        }
        rows = n_out;
      }
    }
  }

  grow(logits_, n_out * c.vocab_size);
  if (n_out == 0) return Status();
  for (const ForwardOp& op : plan_.head) {
    switch (op.kind) {
      case OpKind::kNorm:
        cpu::rms_norm(x_.data(), output_norm_.data(), n_out, hidden, plan_.rms_norm_eps, h_.data());
        break;
      case OpKind::kLinear:
        cpu::linear(h_.data(), n_out, lm_head_.parts[0], nullptr, logits_.data(), *pool_);
        break;
      default:  // kGatherVocab: one rank holds the whole vocabulary
        break;
    }
  }
  return Status();
}

}  // namespace lathe

// The forward pass as data (forward_plan.h) and the weights bound to it (layer_weights.h,
// weight_scheme.h): the plan each architecture gets, the tensor-parallel reduction points, and the
// projections of real fixture checkpoints in their formats (f32/f16/bf16 safetensors, GGUF blocks).
#include <QtTest>

#include "engine/model/forward_plan.h"
#include "engine/model/layer_weights.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/parallel.h"
#include "test_support.h"

using namespace lathe;
using lathe::test::fixture_path;

namespace {

std::string ops_of(const std::vector<ForwardOp>& ops) {
  std::string s;
  for (const ForwardOp& op : ops) s += (s.empty() ? "" : " ") + op.name();
  return s;
}

Result<LoadedModel> load(const std::string& relative) {
  LoadOptions o;
  o.load_tokenizer = false;
  return load_model(fixture_path(relative), o);
}

}  // namespace

class ForwardPlanTest : public QObject {
  Q_OBJECT
 private slots:
  void llama_layer_is_the_reference_sequence() {
    ModelConfig c;
    c.arch = Architecture::kLlama;
    const ForwardPlan p = make_forward_plan(c);
    QCOMPARE(ops_of(p.layer),
             std::string("norm(attn) linear(qkv) rope kv_write attention linear(o) residual_add "
                         "norm(ffn) linear(gate_up) activation(swiglu) linear(down) residual_add"));
    QCOMPARE(ops_of(p.head), std::string("norm(final) linear(lm_head) gather_vocab"));
    QVERIFY(!p.has(OpKind::kQkNorm));
    QCOMPARE(p.find(OpKind::kAttention), 4);
  }

  void variants_change_the_plan_in_one_place() {
    ModelConfig qwen2;
    qwen2.attention_bias = true;
    QVERIFY(make_forward_plan(qwen2).layer[1].bias);
    ModelConfig qwen3;
    qwen3.qk_norm = true;
    qwen3.rope_style = RopeStyle::kInterleaved;
    qwen3.rms_norm_eps = 1e-6;
    qwen3.sliding_window = 0;
    const ForwardPlan p3 = make_forward_plan(qwen3);
    QVERIFY(ops_of(p3.layer).starts_with("norm(attn) linear(qkv) qk_norm rope kv_write"));
    QCOMPARE(p3.rope_style, RopeStyle::kInterleaved);
    QCOMPARE(p3.rms_norm_eps, 1e-6f);
    ModelConfig mistral;
    mistral.sliding_window = 4096;
    mistral.tie_word_embeddings = true;
    const ForwardPlan pm = make_forward_plan(mistral);
    QCOMPARE(pm.sliding_window, 4096);
    QVERIFY(pm.tied_embeddings);
  }

  // The reduction points of tensor parallelism: each residual add sums over the ranks, the head
  // gathers the vocabulary; at world size 1 none.
  void ranks_mark_the_reduction_points() {
    ModelConfig c;
    const ForwardPlan one = make_forward_plan(c, 1);
    for (const ForwardOp& op : one.layer) QVERIFY(!op.reduce);
    const ForwardPlan two = make_forward_plan(c, 2);
    int reductions = 0;
    for (const ForwardOp& op : two.layer)
      if (op.kind == OpKind::kResidualAdd) {
        QVERIFY(op.reduce);
        ++reductions;
      }
    QCOMPARE(reductions, 2);
    QVERIFY(two.head.back().kind == OpKind::kGatherVocab && two.head.back().reduce);
    QCOMPARE(two.world_size, 2);
  }

  void parallel_config_is_validated() {
    ParallelConfig p;
    LATHE_QVERIFY_OK(p.validate());
    auto r = shard_range(4096, p, "hidden size");
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r->begin, int64_t{0});
    QCOMPARE(r->count, int64_t{4096});
    p.world_size = 2;
    QCOMPARE(p.validate().code(), ErrorCode::kInvalidArgument);  // no communicator
    QVERIFY(p.validate().message().find("communicator") != std::string::npos);
    p.world_size = 0;
    QCOMPARE(p.validate().code(), ErrorCode::kInvalidArgument);
    p.world_size = 1;
    p.rank = 1;
    QVERIFY(p.validate().message().find("rank 1") != std::string::npos);
    const Status refused = require_single_rank(ParallelConfig{}, "the X backend");
    LATHE_QVERIFY_OK(refused);
  }

  // A safetensors checkpoint: q|k|v and gate|up grouped, biases bound with attention_bias (Qwen2),
  // QK norms with qk_norm (Qwen3); every matrix dense in its stored dtype.
  void binds_safetensors_projections() {
    for (const char* name :
         {"models/qwen2_tied", "models/qwen3_untied_bf16", "models/mistral_f16"}) {
      Result<LoadedModel> m = load(name);
      LATHE_QVERIFY_RESULT(m);
      Result<ModelWeights> w = bind_model_weights(m.value());
      LATHE_QVERIFY_RESULT(w);
      const ModelConfig& c = m->config;
      QCOMPARE(static_cast<int64_t>(w->layers.size()), c.num_layers);
      const LayerWeights& l = w->layers[0];
      QCOMPARE(static_cast<int>(l.qkv.parts.size()), 3);
      QCOMPARE(l.qkv.n(), c.q_size() + 2 * c.kv_size());
      QCOMPARE(l.qkv.k(), c.hidden_size);
      QCOMPARE(l.gate_up.n(), 2 * c.intermediate_size);
      QCOMPARE(l.down.n(), c.hidden_size);
      QCOMPARE(l.qkv.has_bias(), c.attention_bias);
      QCOMPARE(l.q_norm.ndim > 0, c.qk_norm);
      QCOMPARE(l.qkv.parts[1].name, std::string("blk.0.attn_k"));
      QVERIFY(l.qkv.parts[0].format == WeightFormat::kDense);
      QCOMPARE(l.qkv.parts[0].describe(), std::string(dtype_name(l.qkv.parts[0].dtype)));
      QCOMPARE(&w->linear(0, LinearSlot::kDown), &l.down);
      QCOMPARE(&w->linear(0, LinearSlot::kLmHead), &w->lm_head);
      QVERIFY(w->linear_bytes() > 0);
      if (c.tie_word_embeddings) QCOMPARE(w->lm_head.parts[0].data.data, w->token_embd.data);
    }
  }

  // GGUF block types are formats of their own (kGguf), described by their block type.
  void binds_gguf_blocks_as_their_format() {
    Result<LoadedModel> m = load("model/tiny_llama.gguf");
    LATHE_QVERIFY_RESULT(m);
    Result<ModelWeights> w = bind_model_weights(m.value());
    LATHE_QVERIFY_RESULT(w);
    bool saw_blocks = false;
    for (const LayerWeights& l : w->layers)
      for (const WeightMatrix& p : l.qkv.parts) {
        if (p.format == WeightFormat::kGguf) {
          saw_blocks = true;
          QVERIFY(is_quantized(p.dtype));
          QCOMPARE(p.describe(), std::string(dtype_name(p.dtype)));
          QCOMPARE(p.bytes(), p.data.nbytes());
        }
      }
    QVERIFY2(saw_blocks, "the tiny GGUF fixture holds quantized projections");
  }

  void dummy_models_are_not_bound_but_ordered() {
    LoadOptions o;
    o.load_format = LoadFormat::kDummy;
    o.load_tokenizer = false;
    Result<LoadedModel> m = load_model(fixture_path("../../benchmarks/configs/smollm2-135m"), o);
    LATHE_QVERIFY_RESULT(m);
    QCOMPARE(bind_model_weights(m.value()).status().code(), ErrorCode::kInternal);
    const std::vector<MatrixShape> order = dummy_matrix_order(m->config);
    QCOMPARE(order.front().name, std::string("token_embd"));
    QCOMPARE(static_cast<int64_t>(order.size()),
             (m->config.tie_word_embeddings ? 1 : 2) + 7 * m->config.num_layers);
    QCOMPARE(order.back().name, WeightStore::layer_name(m->config.num_layers - 1, "ffn_down"));
  }
};

QTEST_GUILESS_MAIN(ForwardPlanTest)
#include "forward_plan_test.moc"

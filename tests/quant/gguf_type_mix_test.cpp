// llama.cpp's per-tensor type mix (engine/quant/gguf_type_mix.h), rule by rule, on a 24-layer
// Qwen2.5-0.5B-like shape (hidden 896: not a multiple of 256, so k-quants fall back) and a 32-layer
// 8B-like shape (hidden 4096).
#include <QtTest>

#include <string>

#include "engine/quant/gguf_type_mix.h"

using namespace lathe;

namespace {

DType type_of(GgufFileType ft, const std::string& name, int64_t row, int64_t layer, int64_t n,
              bool tied = false, int dims = 2, bool is_70b = false) {
  GgufTensorQuery q;
  q.name = name;
  q.n_dims = dims;
  q.row_length = row;
  q.layer = layer;
  q.num_layers = n;
  q.tied_embeddings = tied;
  q.is_70b = is_70b;
  return gguf_tensor_type(ft, q).value_or(DType::kF32);
}

std::string blk(int64_t i, const char* s) {
  return "blk." + std::to_string(i) + "." + s + ".weight";
}

}  // namespace

class GgufTypeMixTest : public QObject {
  Q_OBJECT
 private slots:
  void names_parse() {
    QCOMPARE(*parse_gguf_file_type("Q4_K_M"), GgufFileType::kQ4_K_M);
    QCOMPARE(*parse_gguf_file_type("q8_0"), GgufFileType::kQ8_0);
    QVERIFY(!parse_gguf_file_type("q4_k_s"));
    QCOMPARE(static_cast<uint32_t>(GgufFileType::kQ4_K_M), 15u);  // llama_ftype values
    QCOMPARE(static_cast<uint32_t>(GgufFileType::kQ5_K_M), 17u);
  }

  void use_more_bits_layers() {
    // n = 32: first 4, last 4, and every third from 4 + 2.
    QList<int> more;
    for (int i = 0; i < 32; ++i)
      if (gguf_use_more_bits(i, 32)) more << i;
    QCOMPARE(more, (QList<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  }

  void q4_k_m_on_an_8b_shape() {
    const GgufFileType ft = GgufFileType::kQ4_K_M;
    const int64_t n = 32;
    QCOMPARE(type_of(ft, "output.weight", 4096, -1, n), DType::kQ6_K);
    QCOMPARE(type_of(ft, "token_embd.weight", 4096, -1, n), DType::kQ4_K);  // untied: the base
    QCOMPARE(type_of(ft, "output_norm.weight", 4096, -1, n, false, 1), DType::kF32);
    for (int64_t i = 0; i < n; ++i) {
      const DType more = gguf_use_more_bits(i, n) ? DType::kQ6_K : DType::kQ4_K;
      QCOMPARE(type_of(ft, blk(i, "attn_v"), 4096, i, n), more);
      QCOMPARE(type_of(ft, blk(i, "ffn_down"), 14336, i, n), more);
      QCOMPARE(type_of(ft, blk(i, "attn_q"), 4096, i, n), DType::kQ4_K);
      QCOMPARE(type_of(ft, blk(i, "attn_k"), 4096, i, n), DType::kQ4_K);
      QCOMPARE(type_of(ft, blk(i, "attn_output"), 4096, i, n), DType::kQ4_K);
      QCOMPARE(type_of(ft, blk(i, "ffn_gate"), 4096, i, n), DType::kQ4_K);
      QCOMPARE(type_of(ft, blk(i, "ffn_up"), 4096, i, n), DType::kQ4_K);
      QCOMPARE(type_of(ft, blk(i, "attn_norm"), 4096, i, n, false, 1), DType::kF32);
      QCOMPARE(type_of(ft, "blk." + std::to_string(i) + ".attn_q.bias", 4096, i, n, false, 1),
               DType::kF32);
    }
    // 70B: attn_v's q4_k layers get q5_k.
    QCOMPARE(type_of(ft, blk(40, "attn_v"), 8192, 40, 80, false, 2, true), DType::kQ5_K);
    QCOMPARE(type_of(ft, blk(12, "attn_v"), 8192, 12, 80, false, 2, true), DType::kQ6_K);
  }

  void q5_k_m_and_the_single_types() {
    QCOMPARE(type_of(GgufFileType::kQ5_K_M, blk(0, "ffn_down"), 4096, 0, 32), DType::kQ6_K);
    QCOMPARE(type_of(GgufFileType::kQ5_K_M, blk(4, "ffn_down"), 4096, 4, 32), DType::kQ5_K);
    QCOMPARE(type_of(GgufFileType::kQ5_K_M, blk(4, "attn_q"), 4096, 4, 32), DType::kQ5_K);
    QCOMPARE(type_of(GgufFileType::kQ5_K_M, "output.weight", 4096, -1, 32), DType::kQ6_K);
    // q8_0 keeps the output in q8_0; q4_0's output is q6_k; q6_k everywhere for q6_k.
    QCOMPARE(type_of(GgufFileType::kQ8_0, "output.weight", 4096, -1, 32), DType::kQ8_0);
    QCOMPARE(type_of(GgufFileType::kQ8_0, blk(0, "attn_v"), 4096, 0, 32), DType::kQ8_0);
    QCOMPARE(type_of(GgufFileType::kQ4_0, "output.weight", 4096, -1, 32), DType::kQ6_K);
    QCOMPARE(type_of(GgufFileType::kQ4_0, blk(0, "ffn_down"), 14336, 0, 32), DType::kQ4_0);
    QCOMPARE(type_of(GgufFileType::kQ6_K, blk(0, "attn_v"), 4096, 0, 32), DType::kQ6_K);
  }

  void tied_embeddings_take_the_output_rule() {
    QCOMPARE(type_of(GgufFileType::kQ4_K_M, "token_embd.weight", 4096, -1, 32, true), DType::kQ6_K);
    QCOMPARE(type_of(GgufFileType::kQ8_0, "token_embd.weight", 4096, -1, 32, true), DType::kQ8_0);
  }

  void rows_that_do_not_fit_fall_back() {
    const GgufFileType ft = GgufFileType::kQ4_K_M;
    const int64_t n = 24;  // Qwen2.5-0.5B: hidden 896, intermediate 4864 (= 19 * 256)
    QCOMPARE(type_of(ft, blk(5, "attn_q"), 896, 5, n), DType::kQ5_0);     // q4_k -> q5_0
    QCOMPARE(type_of(ft, blk(0, "attn_v"), 896, 0, n), DType::kQ8_0);     // q6_k -> q8_0
    QCOMPARE(type_of(ft, blk(0, "ffn_down"), 4864, 0, n), DType::kQ6_K);  // fits
    QCOMPARE(type_of(ft, blk(6, "ffn_down"), 4864, 6, n), DType::kQ4_K);
    QCOMPARE(type_of(ft, blk(5, "ffn_down"), 4864, 5, n), DType::kQ6_K);         // (5 - 3) % 3 == 2
    QCOMPARE(type_of(ft, "token_embd.weight", 896, -1, n, true), DType::kQ8_0);  // tied output
    QCOMPARE(type_of(GgufFileType::kQ5_K_M, blk(5, "attn_q"), 896, 5, n), DType::kQ5_1);
    QCOMPARE(type_of(GgufFileType::kQ8_0, blk(5, "attn_q"), 48, 5, n), DType::kF16);  // no fit
  }
};

QTEST_GUILESS_MAIN(GgufTypeMixTest)
#include "gguf_type_mix_test.moc"

// The checkpoint layouts (engine/quant/gptq_layout.h, awq_layout.h, compressed_tensors_layout.h):
// bit positions checked by hand on small matrices, then every variant written as a folder and
// read back by the independent numpy reader of scripts/quant/read_quantized_folder.py, which must
// dequantize it to exactly the weights Lathe's quantizer says it wrote (skips without
// scripts/fetch-quant-tools.sh).
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/quant/atomic_output.h"
#include "engine/quant/awq_layout.h"
#include "engine/quant/compressed_tensors_layout.h"
#include "engine/quant/gptq_layout.h"
#include "engine/quant/safetensors_writer.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

uint32_t word(const PackedTensor& t, size_t i) {
  uint32_t w;
  std::memcpy(&w, t.data.data() + 4 * i, 4);
  return w;
}

// A quantized matrix with codes (r * 3 + c) % 16 and known params, for bit-position checks.
IntQuantizedMatrix pattern(int64_t rows, int64_t cols, int64_t group, int bits, bool sym) {
  IntQuantizedMatrix q = IntQuantizedMatrix::empty(rows, cols, {bits, group, sym, DType::kF16, 1});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      q.codes[static_cast<size_t>(r * cols + c)] = static_cast<uint8_t>((r * 3 + c) % (1 << bits));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < q.num_groups(); ++g) {
      q.scales[static_cast<size_t>(r * q.num_groups() + g)] = 0.25f * float(g + 1);
      q.zeros[static_cast<size_t>(r * q.num_groups() + g)] =
          sym ? 1 << (bits - 1) : int32_t(1 + (r + g) % 14);
    }
  return q;
}

enum class Layout { kGptq, kAwq, kCompressedTensors };

struct Variant {
  const char* name;
  Layout format;
  int bits;
  int64_t group;
  bool sym;
  bool act_order;
  int fp8;  // -1: integer; else an Fp8ScaleKind
};

}  // namespace

class QuantLayoutsTest : public QObject {
  Q_OBJECT
 private slots:
  void gptq_bit_positions() {
    const IntQuantizedMatrix q = pattern(16, 64, 32, 4, false);
    Result<std::vector<PackedTensor>> p = pack_gptq_linear("m", q);
    LATHE_QVERIFY_RESULT(p);
    QCOMPARE((*p)[0].spec.name, std::string("m.qweight"));
    QCOMPARE((*p)[0].spec.shape, (std::vector<int64_t>{8, 16}));  // [K / 8, N]
    QCOMPARE((*p)[1].spec.shape, (std::vector<int64_t>{2, 2}));   // [G, N / 8]
    QCOMPARE((*p)[2].spec.dtype, std::string("F16"));
    // Weight (n=5, k=19) sits in word (19 / 8, 5), bits 4 * (19 % 8).
    QCOMPARE((word((*p)[0], 2 * 16 + 5) >> 12) & 15u, uint32_t((5 * 3 + 19) % 16));
    // Zero (g=1, n=9) is stored minus one in word (1, 9 / 8), bits 4 * (9 % 8).
    QCOMPARE((word((*p)[1], 1 * 2 + 1) >> 4) & 15u, uint32_t(1 + (9 + 1) % 14 - 1));
    // Symmetric 4-bit: zeros 8 stored as 7 -> 0x77777777.
    Result<std::vector<PackedTensor>> s = pack_gptq_linear("m", pattern(16, 64, 32, 4, true));
    LATHE_QVERIFY_RESULT(s);
    QCOMPARE(word((*s)[1], 0), 0x77777777u);
    // A zero point of 0 cannot be stored in v1.
    IntQuantizedMatrix z = pattern(16, 64, 32, 4, false);
    z.zeros[0] = 0;
    QVERIFY(!pack_gptq_linear("m", z).is_ok());
    QVERIFY(!check_gptq_shape(12, 64, 4).is_ok());
    QVERIFY(check_gptq_shape(12, 64, 8).is_ok());  // 8 bits pack 4 per word
  }

  void awq_nibble_order() {
    const IntQuantizedMatrix q = pattern(16, 64, 32, 4, false);
    Result<std::vector<PackedTensor>> p = pack_awq_linear("m", q);
    LATHE_QVERIFY_RESULT(p);
    QCOMPARE((*p)[0].spec.shape, (std::vector<int64_t>{64, 2}));  // [K, N / 8]
    // Word (k=3, c=1) holds columns 8..15 as nibbles of [0, 2, 4, 6, 1, 3, 5, 7].
    const uint32_t w = word((*p)[0], 3 * 2 + 1);
    for (int i = 0; i < 8; ++i) {
      const int n = 8 + kAwqOrder[i];
      QCOMPARE((w >> (4 * i)) & 15u, uint32_t((n * 3 + 3) % 16));
    }
    IntQuantizedMatrix permuted = q;
    std::swap(permuted.g_idx[0], permuted.g_idx[40]);
    QVERIFY(!pack_awq_linear("m", permuted).is_ok());  // no g_idx in AWQ
    QVERIFY(!check_awq_shape(12, 64, 4).is_ok());
    QVERIFY(!check_awq_shape(16, 64, 8).is_ok());
  }

  void compressed_tensors_packing() {
    const IntQuantizedMatrix q = pattern(12, 40, 8, 4, false);  // N, K not multiples of 8
    Result<std::vector<PackedTensor>> p = pack_ct_int_linear("m", q, "BF16");
    LATHE_QVERIFY_RESULT(p);
    QCOMPARE((*p)[0].spec.name, std::string("m.weight_packed"));
    QCOMPARE((*p)[0].spec.shape, (std::vector<int64_t>{12, 5}));  // [N, ceil(K / 8)]
    QCOMPARE((*p)[1].spec.shape, (std::vector<int64_t>{12, 5}));  // scales [N, G]
    QCOMPARE((*p)[1].spec.dtype, std::string("BF16"));
    QCOMPARE((*p)[2].spec.name, std::string("m.weight_zero_point"));
    QCOMPARE((*p)[2].spec.shape, (std::vector<int64_t>{2, 5}));  // [ceil(N / 8), G]
    QCOMPARE((*p)[3].spec.name, std::string("m.weight_shape"));
    // Code (n=7, k=13): word (7, 1), bits 4 * 5.
    QCOMPARE((word((*p)[0], 7 * 5 + 1) >> 20) & 15u, uint32_t((7 * 3 + 13) % 16));
    // Zero (n=10, g=3): word (1, 3), bits 4 * 2, the unsigned zero (signed + 8).
    QCOMPARE((word((*p)[2], 1 * 5 + 3) >> 8) & 15u, uint32_t(1 + (10 + 3) % 14));
    QCOMPARE(word((*p)[3], 0), 12u);
    QCOMPARE(word((*p)[3], 1), 40u);
    // Symmetric: no zero point tensor.
    Result<std::vector<PackedTensor>> s =
        pack_ct_int_linear("m", pattern(12, 40, 8, 4, true), "F16");
    LATHE_QVERIFY_RESULT(s);
    QCOMPARE(s->size(), size_t{3});
    // The config vLLM reads.
    const nlohmann::json c =
        nlohmann::json::parse(ct_int_quantization_config_json(4, 128, true, false));
    QCOMPARE(c["quant_method"].get<std::string>(), std::string("compressed-tensors"));
    QCOMPARE(c["format"].get<std::string>(), std::string("pack-quantized"));
    QCOMPARE(c["ignore"][0].get<std::string>(), std::string("lm_head"));
    const nlohmann::json& w = c["config_groups"]["group_0"]["weights"];
    QCOMPARE(w["strategy"].get<std::string>(), std::string("group"));
    QCOMPARE(w["group_size"].get<int>(), 128);
    QCOMPARE(w["num_bits"].get<int>(), 4);
    QVERIFY(c["config_groups"]["group_0"]["input_activations"].is_null());
    const nlohmann::json f =
        nlohmann::json::parse(ct_fp8_quantization_config_json(Fp8ScaleKind::kChannel));
    QCOMPARE(f["format"].get<std::string>(), std::string("float-quantized"));
    QCOMPARE(f["config_groups"]["group_0"]["input_activations"]["strategy"].get<std::string>(),
             std::string("token"));
    QVERIFY(f["config_groups"]["group_0"]["input_activations"]["dynamic"].get<bool>());
    const nlohmann::json b =
        nlohmann::json::parse(ct_fp8_quantization_config_json(Fp8ScaleKind::kBlock));
    QCOMPARE(b["config_groups"]["group_0"]["weights"]["block_structure"],
             nlohmann::json({128, 128}));
  }

  void reference_reader_dequantizes_every_variant_data() {
    QTest::addColumn<int>("index");
    for (int i = 0; i < 12; ++i) QTest::newRow(variants()[static_cast<size_t>(i)].name) << i;
  }
  void reference_reader_dequantizes_every_variant() {
    LATHE_SKIP_WITHOUT_QUANT_VENV();
    QFETCH(int, index);
    const Variant v = variants()[static_cast<size_t>(index)];
    const int64_t n = 48, k = 256;
    QTemporaryDir dir;
    const std::string folder = dir.filePath("model").toStdString();
    std::filesystem::create_directory(folder);
    // Two linears from the same random weights; the expected file holds Lathe's dequantization.
    std::vector<PackedTensor> packed;
    std::vector<std::pair<std::string, std::vector<float>>> expected;
    std::string qconfig;
    for (int l = 0; l < 2; ++l) {
      const std::string prefix = "model.layers." + std::to_string(l) + ".mlp.up_proj";
      std::vector<float> w = test::random_normal(static_cast<size_t>(n * k), 100 + l, 0.05f);
      w[7] = 0.9f;
      if (v.fp8 >= 0) {
        const Fp8Matrix m = quantize_fp8(w.data(), n, k, static_cast<Fp8ScaleKind>(v.fp8));
        for (PackedTensor& t : pack_ct_fp8_linear(prefix, m)) packed.push_back(std::move(t));
        expected.emplace_back(prefix + ".weight", dequantize_fp8(m));
        qconfig = ct_fp8_quantization_config_json(static_cast<Fp8ScaleKind>(v.fp8));
        continue;
      }
      IntQuantConfig c{v.bits, v.group, v.sym, DType::kF16,
                       v.format == Layout::kGptq && !v.sym ? 1 : 0};
      if (v.format == Layout::kCompressedTensors) c.scale_dtype = DType::kBF16;
      Result<IntQuantizedMatrix> q = quantize_int_rtn(w.data(), n, k, c);
      LATHE_QVERIFY_RESULT(q);
      if (v.act_order) {  // a permuted grouping, as GPTQ's act-order makes
        std::vector<float> again = dequantize_int(*q);
        for (int64_t col = 0; col < k; ++col)
          q->g_idx[static_cast<size_t>(col)] = int32_t(((col * 37) % k) / q->group_size);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t col = 0; col < k; ++col) {
            const IntGroupParams p = q->params(r, q->g_idx[static_cast<size_t>(col)]);
            q->codes[static_cast<size_t>(r * k + col)] = static_cast<uint8_t>(
                int_code(again[static_cast<size_t>(r * k + col)], p, (1 << v.bits) - 1));
          }
      }
      Result<std::vector<PackedTensor>> p = v.format == Layout::kGptq ? pack_gptq_linear(prefix, *q)
                                            : v.format == Layout::kAwq
                                                ? pack_awq_linear(prefix, *q)
                                                : pack_ct_int_linear(prefix, *q, "BF16");
      LATHE_QVERIFY_RESULT(p);
      for (PackedTensor& t : *p) packed.push_back(std::move(t));
      expected.emplace_back(prefix + ".weight", dequantize_int(*q));
      qconfig = v.format == Layout::kGptq
                    ? gptq_quantize_config_json({v.bits, v.group, v.sym, v.act_order, 0.1, "rtn"})
                : v.format == Layout::kAwq
                    ? awq_quantization_config_json(v.group, true)
                    : ct_int_quantization_config_json(v.bits, v.group, v.sym, v.act_order);
    }
    std::vector<SafetensorsTensorSpec> specs;
    for (const PackedTensor& t : packed) specs.push_back(t.spec);
    Result<SafetensorsFolderWriter> w = SafetensorsFolderWriter::create(folder, specs);
    LATHE_QVERIFY_RESULT(w);
    for (const PackedTensor& t : packed)
      LATHE_QVERIFY_OK(w->write(t.spec.name, t.data.data(), t.data.size()));
    LATHE_QVERIFY_OK(w->finish());
    LATHE_QVERIFY_OK(
        write_small_file(folder + "/config.json", "{\"quantization_config\": " + qconfig + "}"));
    std::vector<SafetensorsTensorSpec> espec;
    for (const auto& [name, values] : expected) espec.push_back({name, "F32", {n, k}});
    const std::string exp_path = dir.filePath("expected.safetensors").toStdString();
    Result<SafetensorsWriter> ew = SafetensorsWriter::create(exp_path, espec);
    LATHE_QVERIFY_RESULT(ew);
    for (const auto& [name, values] : expected)
      LATHE_QVERIFY_OK(ew->write(name, values.data(), values.size() * 4));
    LATHE_QVERIFY_OK(ew->finish());
    const test::ProcessResult r =
        test::run_python_script("read_quantized_folder.py",
                                {QString::fromStdString(folder), QString::fromStdString(exp_path)});
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + r.err));
    const QJsonObject rep = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(rep["checked"].toInt(), 2);
    QCOMPARE(rep["max_abs_diff"].toDouble(), 0.0);
  }

 private:
  static std::vector<Variant> variants() {
    using F = Layout;
    return {
        {"gptq_int4_g32_sym", F::kGptq, 4, 32, true, false, -1},
        {"gptq_int4_g64_asym", F::kGptq, 4, 64, false, false, -1},
        {"gptq_int4_g32_actorder", F::kGptq, 4, 32, true, true, -1},
        {"gptq_int8_channel_asym", F::kGptq, 8, -1, false, false, -1},
        {"awq_int4_g32_asym", F::kAwq, 4, 32, false, false, -1},
        {"awq_int4_g128_sym", F::kAwq, 4, 128, true, false, -1},
        {"ct_int4_g32_sym", F::kCompressedTensors, 4, 32, true, false, -1},
        {"ct_int4_g128_asym_actorder", F::kCompressedTensors, 4, 128, false, true, -1},
        {"ct_int8_channel_sym", F::kCompressedTensors, 8, -1, true, false, -1},
        {"ct_fp8_channel", F::kCompressedTensors, 8, -1, true, false, int(Fp8ScaleKind::kChannel)},
        {"ct_fp8_block", F::kCompressedTensors, 8, -1, true, false, int(Fp8ScaleKind::kBlock)},
        {"ct_fp8_tensor", F::kCompressedTensors, 8, -1, true, false, int(Fp8ScaleKind::kTensor)},
    };
  }
};

QTEST_GUILESS_MAIN(QuantLayoutsTest)
#include "quant_layouts_test.moc"

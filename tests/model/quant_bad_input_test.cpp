// Quantized checkpoints that disagree with their config: each edited copy of a fixture of
// tests/fixtures/formats/ must fail to load with an error that names the file or tensor and what
// disagrees (never a crash, never garbage logits).
#include <QtTest>

#include <QTemporaryDir>

#include "engine/model/checkpoint_quant.h"
#include "quant_fixture_util.h"

using namespace lathe;
using json = nlohmann::json;
using test::StoredTensor;
using test::TensorMap;

namespace {

const std::string kQ = "model.layers.0.self_attn.q_proj";
const std::string kUp = "model.layers.0.mlp.up_proj";

using ConfigEdit = std::function<void(json&)>;
using TensorEdit = std::function<void(TensorMap&)>;

json& qconfig(json& c) {
  return c["quantization_config"];
}

}  // namespace

class QuantBadInputTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  int next_ = 0;

  // Loads an edited copy of fixture `name`; the error must have `code` and contain every string of
  // `needles`.
  void expect_refused(const std::string& name, const ConfigEdit& config, const TensorEdit& tensors,
                      ErrorCode code, std::initializer_list<std::string> needles) {
    const std::string dst = dir_.filePath(QString("case%1").arg(next_++)).toStdString();
    LATHE_QVERIFY_OK(test::edited_copy(name, dst, config, tensors));
    LoadOptions o;
    o.load_tokenizer = false;
    const Result<LoadedModel> m = load_model(dst, o);
    QVERIFY2(!m.is_ok(), ("loaded: " + dst).c_str());
    const std::string msg = m.status().message();
    QVERIFY2(m.status().code() == code, msg.c_str());
    for (const std::string& n : needles) QVERIFY2(msg.find(n) != std::string::npos, msg.c_str());
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void packed_tensors_of_the_wrong_shape() {
    expect_refused("gptq_g64_asym", nullptr,
                   [](TensorMap& t) {
                     StoredTensor& z = t[kQ + ".qzeros"];  // [1, 8] -> [1, 4]
                     z.shape = {1, 4};
                     z.bytes.resize(16);
                   },
                   ErrorCode::kCorruptFile,
                   {"blk.0.attn_q (" + kQ + ")", "qzeros has shape [1, 4], expected [1, 8]"});
    expect_refused("awq_g64", nullptr,
                   [](TensorMap& t) {
                     StoredTensor& w = t[kUp + ".qweight"];  // [64, 16] -> [32, 16]
                     w.shape = {32, 16};
                     w.bytes.resize(w.bytes.size() / 2);
                   },
                   ErrorCode::kCorruptFile, {kUp, "qweight has shape [32, 16], expected [64, 16]"});
    expect_refused("ct_w4a16_asym_g64", nullptr,
                   [](TensorMap& t) {
                     StoredTensor& s = t[kQ + ".weight_shape"];
                     const int32_t v[2] = {64, 32};
                     std::memcpy(s.bytes.data(), v, 8);
                   },
                   ErrorCode::kCorruptFile, {kQ, "weight_shape says [64, 32]", "implies [64, 64]"});
    expect_refused("ct_w8a16_channel", nullptr,
                   [](TensorMap& t) { t[kQ + ".weight_packed"].dtype = "F32"; },
                   ErrorCode::kCorruptFile, {kQ, "weight_packed is stored as f32, expected i32"});
    expect_refused("fp8_block_inv", nullptr,
                   [](TensorMap& t) {
                     StoredTensor& s = t[kUp + ".weight_scale_inv"];  // [2, 1] -> [1, 1]
                     s.shape = {1, 1};
                     s.bytes.resize(2);
                   },
                   ErrorCode::kCorruptFile,
                   {kUp, "weight_scale_inv has shape [1, 1], expected [2, 1]"});
  }

  void missing_parts() {
    expect_refused("gptq_g64_asym", nullptr, [](TensorMap& t) { t.erase(kUp + ".scales"); },
                   ErrorCode::kCorruptFile, {"blk.0.ffn_up (" + kUp + ")", "scales is missing"});
    expect_refused("ct_fp8_tensor", nullptr, [](TensorMap& t) { t.erase(kQ + ".weight_scale"); },
                   ErrorCode::kCorruptFile,
                   {kQ + ".weight_scale", "does not match its quantization config"});
    expect_refused("fp8_static", nullptr, [](TensorMap& t) { t.erase(kQ + ".input_scale"); },
                   ErrorCode::kCorruptFile, {kQ + ".input_scale", "static"});
    expect_refused("fp8_block_inv", nullptr,
                   [](TensorMap& t) { t.erase(kQ + ".weight_scale_inv"); }, ErrorCode::kCorruptFile,
                   {kQ + ".weight_scale_inv"});
    // Quantized by the config, but stored as a plain weight.
    expect_refused(
        "awq_g64", nullptr,
        [](TensorMap& t) {
          for (const char* p : {".qweight", ".qzeros", ".scales"}) t.erase(kQ + p);
          t[kQ + ".weight"] = StoredTensor{"F16", {64, 64}, std::vector<uint8_t>(64 * 64 * 2)};
        },
        ErrorCode::kCorruptFile, {kQ + ".qweight", "quantizes this module"});
    expect_refused("gptq_g64_asym", nullptr,
                   [](TensorMap& t) {
                     for (const char* p : {".qweight", ".qzeros", ".scales", ".g_idx"})
                       t.erase(kQ + p);
                   },
                   ErrorCode::kNotFound, {"blk.0.attn_q", "quantized parts"});
  }

  void group_size_that_does_not_divide_k() {
    expect_refused("gptq_g64_asym", [](json& c) { qconfig(c)["group_size"] = 48; }, nullptr,
                   ErrorCode::kCorruptFile,
                   {"blk.0.attn_q", "group size 48 does not divide the 64 inputs"});
    expect_refused(
        "ct_w4a16_asym_g64",
        [](json& c) { qconfig(c)["config_groups"]["group_0"]["weights"]["group_size"] = 40; },
        nullptr, ErrorCode::kCorruptFile, {"group size 40 does not divide the 64 inputs"});
  }

  void unknown_or_unsupported_methods() {
    expect_refused("gptq_g64_asym", [](json& c) { qconfig(c)["quant_method"] = "bitsandbytes"; },
                   nullptr, ErrorCode::kUnsupported,
                   {"config.json", "quant_method 'bitsandbytes'", supported_quant_methods()});
    expect_refused("gptq_g64_asym", [](json& c) { qconfig(c)["bits"] = 3; }, nullptr,
                   ErrorCode::kUnsupported, {"3-bit GPTQ is not supported"});
    expect_refused("awq_g64", [](json& c) { qconfig(c)["version"] = "gemv"; }, nullptr,
                   ErrorCode::kUnsupported, {"AWQ version \"gemv\"", "GEMM"});
    expect_refused("ct_w8a16_channel", [](json& c) { qconfig(c)["format"] = "marlin-24"; }, nullptr,
                   ErrorCode::kUnsupported, {"format 'marlin-24'", "pack-quantized"});
    expect_refused("fp8_static", [](json& c) { qconfig(c)["fmt"] = "e5m2"; }, nullptr,
                   ErrorCode::kUnsupported, {"\"e5m2\"", "e4m3"});
    expect_refused("gptq_g64_asym", [](json& c) { qconfig(c)["checkpoint_format"] = "marlin"; },
                   nullptr, ErrorCode::kUnsupported, {"checkpoint_format \"marlin\""});
    expect_refused("gptq_dynamic",
                   [](json& c) { qconfig(c)["dynamic"]["+:(unclosed"] = json::object(); }, nullptr,
                   ErrorCode::kInvalidArgument, {"'(unclosed' is not a regular expression"});
  }

  // A symmetric GPTQ checkpoint's zero points are all 7 (gptq) or all 8 (gptq_v2); anything else
  // cannot be read consistently.
  void zero_point_conventions_that_cannot_be_resolved() {
    expect_refused("gptq_g32_sym_desc_act", nullptr,
                   [](TensorMap& t) { test::set_words(t[kUp + ".qzeros"], 0x33333333u); },
                   ErrorCode::kCorruptFile,
                   {kUp + ".qzeros", "sym: true", "holds 3", "cannot be resolved"});
    expect_refused("gptq_g32_sym_desc_act", nullptr,
                   [](TensorMap& t) { test::set_words(t[kQ + ".qzeros"], 0x88888888u); },
                   ErrorCode::kCorruptFile, {"both conventions", kQ + ".qzeros"});
    expect_refused("gptq_g32_sym_desc_act", nullptr,
                   [](TensorMap& t) { test::set_words(t[kQ + ".qzeros"], 0x78787878u); },
                   ErrorCode::kCorruptFile, {kQ + ".qzeros", "a mix of both"});
  }

  void g_idx_out_of_range() {
    expect_refused("gptq_g32_sym_desc_act", nullptr,
                   [](TensorMap& t) {
                     const int32_t bad = 99;
                     std::memcpy(t[kQ + ".g_idx"].bytes.data() + 4 * 5, &bad, 4);
                   },
                   ErrorCode::kCorruptFile,
                   {"blk.0.attn_q", "g_idx[5] is 99, outside the 2 scale groups"});
    expect_refused("ct_w4a16_sym_g32_actorder", nullptr,
                   [](TensorMap& t) {
                     const int32_t bad = -1;
                     std::memcpy(t[kUp + ".weight_g_idx"].bytes.data(), &bad, 4);
                   },
                   ErrorCode::kCorruptFile, {"blk.0.ffn_up", "g_idx[0] is -1"});
  }

  void scales_that_are_not_numbers() {
    expect_refused("awq_g64", nullptr,
                   [](TensorMap& t) {
                     const uint16_t nan = 0x7e00;
                     std::memcpy(t[kQ + ".scales"].bytes.data() + 6, &nan, 2);
                   },
                   ErrorCode::kCorruptFile,
                   {"blk.0.attn_q", "the scales[3] is not a finite number"});
  }
};

QTEST_GUILESS_MAIN(QuantBadInputTest)
#include "quant_bad_input_test.moc"

// load_model(): the default model, tiny Hugging Face folders (single, sharded, Qwen2 bias, Qwen3
// q/k norm), the same weights as GGUF (cross-format checks, incl. llama.cpp's Q/K permutation),
// config-only (dummy) loading, chat templates, generation defaults, and each kind of bad input.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/core/half.h"
#include "engine/model/dequant.h"
#include "engine/model/gguf_model.h"
#include "engine/model/model_loader.h"
#include "model_test_files.h"
#include "test_support.h"

using namespace lathe;
using lathe::test::GgufBuilder;
namespace fs = std::filesystem;

namespace {

LoadOptions no_tokenizer() {
  LoadOptions o;
  o.load_tokenizer = false;
  return o;
}

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const Status s = dequantize_tensor(t, out.data());
  if (!s.is_ok()) qFatal("%s", s.message().c_str());
  return out;
}

const TensorView& tensor(const LoadedModel& m, const std::string& name) {
  const TensorView* t = m.weights.find(name);
  if (t == nullptr) qFatal("missing tensor %s", name.c_str());
  return *t;
}

std::string summary_of(const LoadedModel& m) {
  std::string s;
  for (const auto& [g, t] : m.dtype_summary) s += g + "=" + t + " ";
  return s;
}

const char* kChatTemplateStart = "{% for message in messages %}{{ '<|im_start|>' + message['role']";

// A minimal llama GGUF (1 layer, hidden 32, ffn 64, 4 heads, 2 KV heads, vocab 16), with optional
// breakage applied to the builder before writing.
GgufBuilder minimal_llama() {
  GgufBuilder b;
  b.llama_metadata(1, 32, 64, 4, 2);
  b.kv_u32("llama.vocab_size", 16);
  b.f32_tensor("token_embd.weight", {32, 16});
  b.f32_tensor("output_norm.weight", {32});
  b.f32_tensor("blk.0.attn_norm.weight", {32});
  b.f32_tensor("blk.0.attn_q.weight", {32, 32});
  b.f32_tensor("blk.0.attn_k.weight", {32, 16});
  b.f32_tensor("blk.0.attn_v.weight", {32, 16});
  b.f32_tensor("blk.0.attn_output.weight", {32, 32});
  b.f32_tensor("blk.0.ffn_norm.weight", {32});
  b.f32_tensor("blk.0.ffn_gate.weight", {32, 64});
  b.f32_tensor("blk.0.ffn_up.weight", {32, 64});
  b.f32_tensor("blk.0.ffn_down.weight", {64, 32});
  return b;
}

}  // namespace

class ModelLoaderTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  std::string copy_fixture(const std::string& name, const std::string& to) {
    const fs::path dst = fs::path(dir_.path().toStdString()) / to;
    fs::remove_all(dst);
    fs::copy(lathe::test::fixture_path("model/" + name), dst, fs::copy_options::recursive);
    return dst.string();
  }

  std::string write(const std::string& name, const GgufBuilder& b) {
    return lathe::test::write_file(dir_.path(), name, b.build());
  }

  static void expect_error(const Result<LoadedModel>& r, ErrorCode code, const std::string& file,
                           const std::string& needle) {
    QVERIFY2(!r.is_ok(), "expected an error");
    const Status status = r.status();
    const std::string& msg = status.message();
    QVERIFY2(r.status().code() == code,
             (std::string(error_code_name(r.status().code())) + ": " + msg).c_str());
    QVERIFY2(msg.find(file) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(needle) != std::string::npos, msg.c_str());
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void default_model() {
    const std::string path = lathe::test::default_model_path();
    if (!QFile::exists(QString::fromStdString(path)))
      QSKIP("default model not fetched (scripts/fetch-default-model.sh)");
    auto r = load_model(path);
    LATHE_QVERIFY_RESULT(r);
    const LoadedModel& m = *r;
    QCOMPARE(m.format, ModelFormat::kGguf);
    QCOMPARE(m.path, path);
    QCOMPARE(m.file_bytes, int64_t{98362432});
    QCOMPARE(m.config.num_layers, int64_t{30});
    QCOMPARE(m.weights.size(),
             size_t{2 + 30 * 9});  // token_embd, output_norm, 9 per layer; output is tied
    QVERIFY(!m.weights.contains("output"));
    LATHE_QVERIFY_RESULT(m.weights.get("token_embd", {49152, 576}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.29.attn_k", {192, 576}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.0.ffn_down", {576, 1536}));
    QCOMPARE(tensor(m, "token_embd").dtype, DType::kQ8_0);
    QCOMPARE(tensor(m, "blk.0.attn_q").dtype, DType::kQ4_1);
    QCOMPARE(tensor(m, "output_norm").dtype, DType::kF32);
    QCOMPARE(summary_of(m),
             std::string("embedding=q8_0 attention=q4_1 mlp=q4_1 norms=f32 output=tied "));
    QVERIFY(m.chat_template.find("<|im_start|>") != std::string::npos);
    QVERIFY(std::find(m.generation.eos_token_ids.begin(), m.generation.eos_token_ids.end(), 2) !=
            m.generation.eos_token_ids.end());
    QVERIFY(m.tokenizer != nullptr);
    QCOMPARE(m.tokenizer->vocab_size(), int64_t{49152});
    QCOMPARE(m.tokenizer->eos_id(), 2);
    // Norm weights are plain floats near 1 after training; a wrong data offset would not be.
    const std::vector<float> norm = to_f32(tensor(m, "blk.0.attn_norm"));
    for (float v : norm) QVERIFY(std::isfinite(v) && std::fabs(v) < 100.0f);
  }

  void hf_folder() {
    const std::string dir = lathe::test::fixture_path("model/tiny_llama");
    auto r = load_model(dir);
    LATHE_QVERIFY_RESULT(r);
    const LoadedModel& m = *r;
    QCOMPARE(m.format, ModelFormat::kHfFolder);
    QCOMPARE(m.config.name, std::string("tiny_llama"));
    QCOMPARE(m.config.rope_style, RopeStyle::kNeox);
    QCOMPARE(m.config.weight_dtype, DType::kF32);
    QCOMPARE(m.weights.size(), size_t{3 + 2 * 9});
    LATHE_QVERIFY_RESULT(m.weights.get("output", {300, 32}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.1.attn_k", {16, 32}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.1.ffn_down", {32, 64}));
    QCOMPARE(summary_of(m),
             std::string("embedding=f32 attention=f32 mlp=f32 norms=f32 output=f32 "));
    QCOMPARE(m.file_bytes,
             static_cast<int64_t>(fs::file_size(fs::path(dir) / "model.safetensors")));
    QVERIFY(m.chat_template.rfind(kChatTemplateStart, 0) == 0);
    // generation_config.json: eos [2, 0] and sampling defaults; config.json's eos 2 is not
    // repeated.
    QCOMPARE(m.generation.eos_token_ids, (std::vector<TokenId>{2, 0}));
    QCOMPARE(m.generation.temperature, 0.7f);
    QCOMPARE(m.generation.top_p, 0.9f);
    QCOMPARE(m.generation.top_k, 40);
    QVERIFY(m.tokenizer != nullptr);
    QCOMPARE(m.tokenizer->vocab_size(), int64_t{300});
    // tests/fixtures/model/expected.json: the HF tokenizer's ids for "hello world".
    QCOMPARE(m.tokenizer->encode("hello world", {false, true}),
             (std::vector<TokenId>{287, 223, 89, 81, 84, 78, 70}));
  }

  // safetensors does not align tensor data: a file whose header is one byte longer puts every f32
  // tensor at an odd address; the loader copies such tensors (reading them in place would be a
  // misaligned access) and the values are the same.
  void hf_tensors_at_unaligned_offsets_are_copied() {
    const fs::path src = lathe::test::fixture_path("model/tiny_llama");
    const fs::path dst = fs::path(dir_.path().toStdString()) / "tiny_llama_unaligned";
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
      fs::copy_file(e.path(), dst / e.path().filename());
    std::ifstream in(src / "model.safetensors", std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
    const std::vector<uint8_t> data(bytes.begin() + 8 + static_cast<int64_t>(n), bytes.end());
    const std::vector<uint8_t> shifted = lathe::test::safetensors_bytes(header + " ", data);
    std::ofstream(dst / "model.safetensors", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(shifted.data()),
               static_cast<std::streamsize>(shifted.size()));
    auto a = load_model(src.string());
    auto b = load_model(dst.string());
    LATHE_QVERIFY_RESULT(a);
    LATHE_QVERIFY_RESULT(b);
    auto wa = a->weights.get("blk.1.ffn_down", {32, 64});
    auto wb = b->weights.get("blk.1.ffn_down", {32, 64});
    LATHE_QVERIFY_RESULT(wb);
    QCOMPARE(reinterpret_cast<uintptr_t>(wb->data) % 4, uintptr_t{0});
    QVERIFY(std::memcmp(wa->data, wb->data, static_cast<size_t>(wa->nbytes())) == 0);
  }

  void hf_paths_inside_the_folder() {
    const std::string dir = lathe::test::fixture_path("model/tiny_llama");
    for (const char* file : {"config.json", "model.safetensors"}) {
      const std::string p = dir + "/" + file;
      auto r = load_model(p, no_tokenizer());
      LATHE_QVERIFY_RESULT(r);
      QCOMPARE(r->format, ModelFormat::kHfFolder);
      QCOMPARE(r->path, p);
      QCOMPARE(r->weights.size(), size_t{21});
    }
  }

  void sharded_folder_loads_the_same_weights() {
    auto single = load_model(lathe::test::fixture_path("model/tiny_llama"), no_tokenizer());
    auto sharded =
        load_model(lathe::test::fixture_path("model/tiny_llama_sharded"), no_tokenizer());
    LATHE_QVERIFY_RESULT(single);
    LATHE_QVERIFY_RESULT(sharded);
    QCOMPARE(sharded->weights.size(), single->weights.size());
    for (const auto& [name, t] : single->weights.tensors()) {
      const TensorView* s = sharded->weights.find(name);
      QVERIFY2(s != nullptr, name.c_str());
      QCOMPARE(s->shape_string(), t.shape_string());
      QVERIFY2(std::memcmp(s->data, t.data, static_cast<size_t>(t.nbytes())) == 0, name.c_str());
    }
    QCOMPARE(sharded->chat_template, single->chat_template);  // from chat_template.jinja
    QVERIFY(sharded->file_bytes > single->file_bytes);        // four headers instead of one
  }

  void qwen2_bias_and_named_templates() {
    auto r = load_model(lathe::test::fixture_path("model/tiny_qwen2"), no_tokenizer());
    LATHE_QVERIFY_RESULT(r);
    const LoadedModel& m = *r;
    QCOMPARE(m.config.arch, Architecture::kQwen2);
    QVERIFY(m.config.attention_bias);
    QVERIFY(m.config.tie_word_embeddings);
    QVERIFY(!m.weights.contains("output"));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.0.attn_q_bias", {32}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.1.attn_v_bias", {16}));
    QCOMPARE(tensor(m, "blk.0.attn_q").dtype, DType::kF16);
    QCOMPARE(m.config.weight_dtype, DType::kF16);
    QCOMPARE(summary_of(m),
             std::string("embedding=f16 attention=f16 mlp=f16 norms=f16 output=tied "));
    // tokenizer_config.json lists "tool_use" first and "default" second: the default one is taken.
    QVERIFY(m.chat_template.rfind(kChatTemplateStart, 0) == 0);
    QCOMPARE(m.config.num_parameters(), int64_t{28320});  // expected.json
  }

  void qwen3_qk_norm_and_explicit_head_dim() {
    auto r = load_model(lathe::test::fixture_path("model/tiny_qwen3"), no_tokenizer());
    LATHE_QVERIFY_RESULT(r);
    const LoadedModel& m = *r;
    QCOMPARE(m.config.arch, Architecture::kQwen3);
    QCOMPARE(m.config.head_dim, int64_t{16});
    QVERIFY(m.config.qk_norm);
    LATHE_QVERIFY_RESULT(m.weights.get("blk.0.attn_q", {64, 32}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.0.attn_output", {32, 64}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.0.attn_q_norm", {16}));
    LATHE_QVERIFY_RESULT(m.weights.get("blk.1.attn_k_norm", {16}));
    QCOMPARE(tensor(m, "blk.0.ffn_up").dtype, DType::kBF16);
    QCOMPARE(m.config.num_parameters(), int64_t{44000});  // expected.json
  }

  void gguf_matches_the_safetensors_it_came_from() {
    auto hf = load_model(lathe::test::fixture_path("model/tiny_llama"), no_tokenizer());
    auto gg = load_model(lathe::test::fixture_path("model/tiny_llama.gguf"), no_tokenizer());
    LATHE_QVERIFY_RESULT(hf);
    LATHE_QVERIFY_RESULT(gg);
    QCOMPARE(gg->format, ModelFormat::kGguf);
    QCOMPARE(gg->config.rope_style, RopeStyle::kInterleaved);
    QCOMPARE(gg->config.num_parameters(), hf->config.num_parameters());
    QCOMPARE(gg->weights.size(), hf->weights.size());
    QCOMPARE(summary_of(*gg),
             std::string("embedding=q8_0 attention=q5_1+q4_0+q5_0+q4_1 mlp=f16+bf16+q8_0 norms=f32 "
                         "output=f16 "));

    // Every tensor has the same PyTorch-order shape in both formats.
    for (const auto& [name, t] : hf->weights.tensors())
      QCOMPARE(tensor(*gg, name).shape_string(), t.shape_string());

    // f32 norms are copied; f16 / bf16 tensors are the rounded HF values.
    QVERIFY(to_f32(tensor(*gg, "blk.1.ffn_norm")) == to_f32(tensor(*hf, "blk.1.ffn_norm")));
    const std::vector<float> gate_hf = to_f32(tensor(*hf, "blk.0.ffn_gate"));
    const std::vector<float> gate_gg = to_f32(tensor(*gg, "blk.0.ffn_gate"));
    const std::vector<float> up_hf = to_f32(tensor(*hf, "blk.0.ffn_up"));
    const std::vector<float> up_gg = to_f32(tensor(*gg, "blk.0.ffn_up"));
    for (size_t i = 0; i < gate_hf.size(); ++i) {
      QCOMPARE(gate_gg[i], f16_to_f32(f32_to_f16(gate_hf[i])));
      QCOMPARE(up_gg[i], bf16_to_f32(f32_to_bf16(up_hf[i])));
    }

    // attn_q was permuted by llama.cpp's converter: GGUF row h*hd + 2i + j is HF row h*hd + j*hd/2
    // + i.
    const int64_t hd = hf->config.head_dim, rows = hf->config.q_size(), k = hf->config.hidden_size;
    const std::vector<float> q_hf = to_f32(tensor(*hf, "blk.0.attn_q"));
    const std::vector<float> q_gg = to_f32(tensor(*gg, "blk.0.attn_q"));  // q4_0
    float max_abs = 0;
    for (float v : q_hf) max_abs = std::max(max_abs, std::fabs(v));
    float err_permuted = 0, err_plain = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r / hd, i = (r % hd) / 2, j = r % 2;
      const int64_t src = h * hd + j * (hd / 2) + i;
      for (int64_t c = 0; c < k; ++c) {
        err_permuted = std::max(err_permuted, std::fabs(q_gg[static_cast<size_t>(r * k + c)] -
                                                        q_hf[static_cast<size_t>(src * k + c)]));
        err_plain = std::max(err_plain, std::fabs(q_gg[static_cast<size_t>(r * k + c)] -
                                                  q_hf[static_cast<size_t>(r * k + c)]));
      }
    }
    QVERIFY2(err_permuted <= max_abs / 8,
             qPrintable(QString("q4_0 error %1 vs max %2").arg(err_permuted).arg(max_abs)));
    QVERIFY2(err_plain > max_abs / 4, "the GGUF rows should be in llama.cpp's permuted order");

    // Tokenizer metadata and generation defaults from the GGUF.
    QCOMPARE(gg->generation.eos_token_ids, (std::vector<TokenId>{2, 0}));  // eos, then eot
    QCOMPARE(gg->generation.temperature, 0.6f);
    QCOMPARE(gg->generation.top_k, 20);
    QVERIFY(gg->chat_template.rfind(kChatTemplateStart, 0) == 0);
    auto g = GgufFile::open(lathe::test::fixture_path("model/tiny_llama.gguf"));
    LATHE_QVERIFY_RESULT(g);
    auto td = read_gguf_tokenizer_data(**g);
    LATHE_QVERIFY_RESULT(td);
    QCOMPARE(td->model, std::string("gpt2"));
    QCOMPARE(td->pre, std::string("smollm"));
    QCOMPARE(td->tokens.size(), size_t{300});
    QCOMPARE(td->tokens[2], std::string("<|im_end|>"));
    QCOMPARE(td->token_types[2], 3);  // control
    QCOMPARE(td->token_types[100], 1);
    QCOMPARE(td->merges.size(), size_t{300 - 256 - 3});
    QCOMPARE(td->bos_id, 1);
    QCOMPARE(td->eos_id, 2);
    QCOMPARE(td->add_bos, 0);
    QCOMPARE(td->add_eos, -1);  // absent
  }

  void gguf_tokenizer_encodes_like_the_hf_one() {
    auto gg = load_model(lathe::test::fixture_path("model/tiny_llama.gguf"));
    LATHE_QVERIFY_RESULT(gg);
    QVERIFY(gg->tokenizer != nullptr);
    QCOMPARE(gg->tokenizer->encode("hello world", {false, true}),
             (std::vector<TokenId>{287, 223, 89, 81, 84, 78, 70}));
  }

  void gguf_qwen2_bias() {
    auto hf = load_model(lathe::test::fixture_path("model/tiny_qwen2"), no_tokenizer());
    auto gg = load_model(lathe::test::fixture_path("model/tiny_qwen2.gguf"), no_tokenizer());
    LATHE_QVERIFY_RESULT(hf);
    LATHE_QVERIFY_RESULT(gg);
    QCOMPARE(gg->config.rope_style, RopeStyle::kNeox);  // Qwen2 GGUFs are not permuted
    QVERIFY(gg->config.attention_bias);
    QVERIFY(!gg->weights.contains("output"));
    // Both store attn_q in f16, in the same (unpermuted) order: identical bytes.
    const TensorView& a = tensor(*hf, "blk.1.attn_q");
    const TensorView& b = tensor(*gg, "blk.1.attn_q");
    QCOMPARE(b.dtype, DType::kF16);
    QVERIFY(std::memcmp(a.data, b.data, static_cast<size_t>(a.nbytes())) == 0);
    QVERIFY(to_f32(tensor(*gg, "blk.0.attn_k_bias")) == to_f32(tensor(*hf, "blk.0.attn_k_bias")));
  }

  void dummy_needs_only_a_config() {
    LoadOptions o;
    o.load_format = LoadFormat::kDummy;
    const std::string dir = lathe::test::fixture_path("model/configs/llama-3.1-8b");
    for (const std::string& p : {dir, dir + "/config.json"}) {
      auto r = load_model(p, o);
      LATHE_QVERIFY_RESULT(r);
      QCOMPARE(r->format, ModelFormat::kDummy);
      QCOMPARE(r->weights.size(), size_t{0});
      QVERIFY(r->tokenizer == nullptr);
      QVERIFY(r->dtype_summary.empty());
      QCOMPARE(r->config.num_parameters(), int64_t{8030261248});
      QCOMPARE(r->generation.eos_token_ids, (std::vector<TokenId>{128001, 128008, 128009}));
    }
    // A folder with tokenizer files gets its tokenizer even with dummy weights.
    auto tiny = load_model(lathe::test::fixture_path("model/tiny_llama"), o);
    LATHE_QVERIFY_RESULT(tiny);
    QVERIFY(tiny->tokenizer != nullptr);
    QCOMPARE(tiny->weights.size(), size_t{0});
    // A GGUF with dummy weights: its metadata, no tensors.
    auto gg = load_model(lathe::test::fixture_path("model/tiny_llama.gguf"), o);
    LATHE_QVERIFY_RESULT(gg);
    QCOMPARE(gg->format, ModelFormat::kDummy);
    QCOMPARE(gg->weights.size(), size_t{0});
    QCOMPARE(gg->config.rope_style, RopeStyle::kInterleaved);
    // Without dummy, a config-only folder has no weights: an error naming the folder.
    expect_error(load_model(dir, no_tokenizer()), ErrorCode::kNotFound, "llama-3.1-8b",
                 "no model weights");
  }

  void chat_template_override_wins() {
    LoadOptions o = no_tokenizer();
    o.chat_template_override = "{{ messages[0]['content'] }}";
    auto hf = load_model(lathe::test::fixture_path("model/tiny_llama"), o);
    auto gg = load_model(lathe::test::fixture_path("model/tiny_llama.gguf"), o);
    LATHE_QVERIFY_RESULT(hf);
    LATHE_QVERIFY_RESULT(gg);
    QCOMPARE(hf->chat_template, o.chat_template_override);
    QCOMPARE(gg->chat_template, o.chat_template_override);
  }

  void missing_tokenizer() {
    const std::string d = copy_fixture("tiny_llama", "no_tokenizer");
    fs::remove(fs::path(d) / "tokenizer.json");
    expect_error(load_model(d), ErrorCode::kNotFound, "no_tokenizer", "expected tokenizer.json");
    auto ok = load_model(d, no_tokenizer());
    LATHE_QVERIFY_RESULT(ok);
    QVERIFY(ok->tokenizer == nullptr);
    // A GGUF without tokenizer.ggml.* metadata.
    expect_error(load_model(write("no_vocab.gguf", minimal_llama())), ErrorCode::kNotFound,
                 "no_vocab.gguf", "no tokenizer");
    LATHE_QVERIFY_RESULT(load_model(write("no_vocab2.gguf", minimal_llama()), no_tokenizer()));
  }

  void missing_paths_and_non_models() {
    expect_error(load_model("/nonexistent/model.gguf"), ErrorCode::kNotFound,
                 "/nonexistent/model.gguf", "no such file");
    const std::string empty = dir_.path().toStdString() + "/empty_folder";
    fs::create_directories(empty);
    expect_error(load_model(empty), ErrorCode::kNotFound, "empty_folder", "no config.json");
    const std::string txt = lathe::test::write_file(dir_.path(), "notes.txt", {'h', 'i'});
    expect_error(load_model(txt), ErrorCode::kInvalidArgument, "notes.txt", "not a model");
  }

  void corrupt_gguf_through_load_model() {
    const std::vector<uint8_t> full =
        lathe::test::read_file_bytes(lathe::test::fixture_path("model/tiny_llama.gguf"));
    const std::string cut = lathe::test::write_file(
        dir_.path(), "cut.gguf", std::vector<uint8_t>(full.begin(), full.begin() + 5000));
    expect_error(load_model(cut), ErrorCode::kCorruptFile, "cut.gguf", "truncated");
    std::vector<uint8_t> bad_magic = full;
    bad_magic[0] = 'X';
    const std::string magic = lathe::test::write_file(dir_.path(), "magic.gguf", bad_magic);
    expect_error(load_model(magic), ErrorCode::kCorruptFile, "magic.gguf", "not a GGUF file");
    GgufBuilder b = minimal_llama();
    b.tensors[3].override_offset = true;
    b.tensors[3].offset = 1 << 24;
    expect_error(load_model(write("offset.gguf", b), no_tokenizer()), ErrorCode::kCorruptFile,
                 "offset.gguf", "tensor 'blk.0.attn_q.weight' ends at byte");
  }

  void split_gguf_is_explained() {
    GgufBuilder b = minimal_llama();
    b.kv_u32("split.count", 3);
    expect_error(load_model(write("model-00001-of-00003.gguf", b), no_tokenizer()),
                 ErrorCode::kUnsupported, "model-00001-of-00003.gguf",
                 "one of 3 parts of a split GGUF");
  }

  void missing_and_misshapen_tensors() {
    LATHE_QVERIFY_RESULT(load_model(write("minimal.gguf", minimal_llama()), no_tokenizer()));
    GgufBuilder missing = minimal_llama();
    missing.tensors.erase(missing.tensors.begin() + 5);  // blk.0.attn_v.weight
    expect_error(load_model(write("missing.gguf", missing), no_tokenizer()), ErrorCode::kNotFound,
                 "missing.gguf", "tensor 'blk.0.attn_v' is missing");
    GgufBuilder shape = minimal_llama();
    shape.tensors[4] =
        GgufBuilder::Tensor{"blk.0.attn_k.weight", {32, 32}, 0, std::vector<uint8_t>(32 * 32 * 4)};
    expect_error(load_model(write("shape.gguf", shape), no_tokenizer()), ErrorCode::kCorruptFile,
                 "shape.gguf", "'blk.0.attn_k' ('blk.0.attn_k.weight' in");
    auto r = load_model(write("shape2.gguf", shape), no_tokenizer());
    QVERIFY(
        r.status().message().find("has shape [32, 32], expected [16, 32] from the model config") !=
        std::string::npos);
    GgufBuilder quant_norm = minimal_llama();
    quant_norm.tensors[2] =
        GgufBuilder::Tensor{"blk.0.attn_norm.weight", {32}, 8, std::vector<uint8_t>(34)};
    expect_error(load_model(write("qnorm.gguf", quant_norm), no_tokenizer()),
                 ErrorCode::kUnsupported, "qnorm.gguf",
                 "norms and biases must be f32, f16 or bf16");
    // Extra tensors are ignored.
    GgufBuilder extra = minimal_llama();
    extra.f32_tensor("blk.0.attn_rot_embd", {4});
    extra.f32_tensor("blk.7.attn_q.weight", {4});
    LATHE_QVERIFY_RESULT(load_model(write("extra.gguf", extra), no_tokenizer()));
  }

  void bad_hf_folders() {
    // config.json missing a required field: the error names the file and the field.
    const std::string d = copy_fixture("tiny_llama", "no_field");
    {
      std::ofstream out(fs::path(d) / "config.json");
      out << R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300})";
    }
    expect_error(load_model(d), ErrorCode::kCorruptFile, d + "/config.json", "intermediate_size");
    // Unknown architecture.
    const std::string e = copy_fixture("tiny_llama", "unknown_arch");
    {
      std::ofstream out(fs::path(e) / "config.json");
      out << R"({"model_type": "falcon", "hidden_size": 32})";
    }
    expect_error(load_model(e), ErrorCode::kUnsupported, "unknown_arch/config.json",
                 "supported: llama, mistral, qwen2, qwen3");
    // A safetensors header whose sizes lie.
    const std::string f = copy_fixture("tiny_llama", "lying_header");
    const std::string header =
        R"({"model.norm.weight": {"dtype": "F32", "shape": [32], "data_offsets": [0, 64]}})";
    lathe::test::write_file(QString::fromStdString(f), "model.safetensors",
                            lathe::test::safetensors_bytes(header, std::vector<uint8_t>(64)));
    expect_error(load_model(f), ErrorCode::kCorruptFile, "lying_header/model.safetensors",
                 "'model.norm.weight'");
    // A checkpoint quantized with a method Lathe does not read.
    const std::string g = copy_fixture("tiny_llama", "gptq");
    {
      std::ifstream in(fs::path(g) / "config.json");
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      text.insert(text.find('{') + 1,
                  R"("quantization_config": {"quant_method": "bitsandbytes", "bits": 4},)");
      std::ofstream out(fs::path(g) / "config.json");
      out << text;
    }
    expect_error(load_model(g), ErrorCode::kUnsupported, "gptq/config.json",
                 "quant_method 'bitsandbytes' is not supported; Lathe reads gptq, awq, "
                 "compressed-tensors, fp8");
    // Broken tokenizer_config.json.
    const std::string h = copy_fixture("tiny_llama", "bad_tok_cfg");
    {
      std::ofstream out(fs::path(h) / "tokenizer_config.json");
      out << "{chat";
    }
    expect_error(load_model(h, no_tokenizer()), ErrorCode::kCorruptFile,
                 "bad_tok_cfg/tokenizer_config.json", "not valid JSON");
  }
};

QTEST_GUILESS_MAIN(ModelLoaderTest)
#include "model_loader_test.moc"

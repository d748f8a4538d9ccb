// safetensors reader: headers, dtypes, sharded and multi-file folders, and each kind of malformed
// file (a clear error naming the file and the tensor).
#include <QtTest>

#include <cstring>

#include <filesystem>

#include "engine/model/safetensors_file.h"
#include "model_test_files.h"
#include "test_support.h"

using namespace lathe;
using lathe::test::safetensors_bytes;

class SafetensorsTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  Result<std::shared_ptr<const SafetensorsFile>> open_bytes(const std::string& name,
                                                            const std::vector<uint8_t>& b) {
    return SafetensorsFile::open(lathe::test::write_file(dir_.path(), name, b));
  }
  Result<std::shared_ptr<const SafetensorsFile>> open_header(const std::string& name,
                                                             const std::string& header,
                                                             size_t data_bytes) {
    return open_bytes(name, safetensors_bytes(header, std::vector<uint8_t>(data_bytes, 0)));
  }

  template <typename R>
  static void expect_error(const R& r, ErrorCode code, const std::string& file,
                           const std::string& needle) {
    QVERIFY2(!r.is_ok(), "expected an error");
    const Status status = r.status();
    const std::string& msg = status.message();
    QVERIFY2(r.status().code() == code, msg.c_str());
    QVERIFY2(msg.find(file) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(needle) != std::string::npos, msg.c_str());
  }

  // Copies a fixture folder into the temp dir and returns the copy's path.
  std::string copy_fixture(const std::string& name, const std::string& to) {
    namespace fs = std::filesystem;
    const fs::path dst = fs::path(dir_.path().toStdString()) / to;
    fs::remove_all(dst);
    fs::copy(lathe::test::fixture_path("model/" + name), dst, fs::copy_options::recursive);
    return dst.string();
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void reads_tensors_and_metadata() {
    std::vector<uint8_t> data;
    for (int i = 0; i < 6; ++i) lathe::test::append<float>(&data, static_cast<float>(i));
    lathe::test::append<uint16_t>(&data, 0x3f80);  // bf16 1.0
    lathe::test::append<uint16_t>(&data, 0x4000);  // bf16 2.0
    const std::string header =
        R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
        R"( "b": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]},)"
        R"( "__metadata__": {"format": "pt"}})";
    auto r = open_bytes("ok.safetensors", safetensors_bytes(header, data));
    LATHE_QVERIFY_RESULT(r);
    const SafetensorsFile& f = **r;
    QCOMPARE(f.tensors().size(), size_t{2});
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    const SafetensorsTensor* w = f.find("w");
    QVERIFY(w != nullptr);
    QCOMPARE(w->numel(), int64_t{6});
    auto v = w->view(f.path());
    LATHE_QVERIFY_RESULT(v);
    QCOMPARE(v->shape_string(), std::string("[2, 3]"));
    float last = 0.0f;  // the view may be unaligned (safetensors does not align data): memcpy
    std::memcpy(&last, static_cast<const uint8_t*>(v->data) + 5 * sizeof(float), sizeof(float));
    QCOMPARE(last, 5.0f);
    QCOMPARE(f.find("b")->dtype.value(), DType::kBF16);
  }

  void unusual_dtypes_are_listed_but_not_viewable() {
    const std::string header = R"({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})";
    auto r = open_header("f64.safetensors", header, 16);
    LATHE_QVERIFY_RESULT(r);
    const SafetensorsTensor* x = (*r)->find("x");
    QVERIFY(!x->dtype.has_value());
    expect_error(x->view((*r)->path()), ErrorCode::kUnsupported, "f64.safetensors", "F64");
    expect_error(open_header("f4.safetensors",
                             R"({"x": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", 1),
                 ErrorCode::kUnsupported, "f4.safetensors", "'x' has dtype 'F4'");
  }

  void header_whose_sizes_lie() {
    // 2 x 3 f16 needs 12 bytes; the header claims 16.
    const std::string header =
        R"({"model.layers.0.mlp.up_proj.weight": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 16]}})";
    expect_error(open_header("lies.safetensors", header, 16), ErrorCode::kCorruptFile,
                 "lies.safetensors",
                 "tensor 'model.layers.0.mlp.up_proj.weight': data_offsets [0, 16] hold 16 bytes, "
                 "but shape [2,3] of F16 needs 12");
  }

  void data_past_the_end() {
    const std::string header = R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})";
    expect_error(open_header("short.safetensors", header, 8), ErrorCode::kCorruptFile,
                 "short.safetensors", "truncated: tensor 'w' ends at data byte 16");
  }

  void header_size_limits() {
    std::vector<uint8_t> b;
    lathe::test::append<uint64_t>(&b, 200'000'000);
    b.push_back('{');
    expect_error(open_bytes("big_header.safetensors", b), ErrorCode::kCorruptFile,
                 "big_header.safetensors", "at most 100 MB");
    std::vector<uint8_t> c;
    lathe::test::append<uint64_t>(&c, 1000);
    c.push_back('{');
    expect_error(open_bytes("short_header.safetensors", c), ErrorCode::kCorruptFile,
                 "short_header.safetensors", "truncated: the header claims 1000 bytes");
    expect_error(open_bytes("tiny.safetensors", {1, 2, 3}), ErrorCode::kCorruptFile,
                 "tiny.safetensors", "only 3 bytes");
  }

  void malformed_headers() {
    expect_error(open_header("json.safetensors", R"({"w": {"dtype": )", 0), ErrorCode::kCorruptFile,
                 "json.safetensors", "not valid JSON");
    expect_error(open_header("array.safetensors", "[1, 2]", 0), ErrorCode::kCorruptFile,
                 "array.safetensors", "not a JSON object");
    expect_error(
        open_header("noshape.safetensors", R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4),
        ErrorCode::kCorruptFile, "noshape.safetensors", "'w' has no \"shape\"");
    expect_error(
        open_header("negshape.safetensors",
                    R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
        ErrorCode::kCorruptFile, "negshape.safetensors", "non-negative");
    expect_error(open_header("backwards.safetensors",
                             R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})", 4),
                 ErrorCode::kCorruptFile, "backwards.safetensors", "begin after end");
    expect_error(
        open_header(
            "overflow.safetensors",
            R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
            4),
        ErrorCode::kCorruptFile, "overflow.safetensors", "overflows");
  }

  void overlapping_and_duplicate_tensors() {
    const std::string overlap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                                R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
    expect_error(open_header("overlap.safetensors", overlap, 12), ErrorCode::kCorruptFile,
                 "overlap.safetensors", "'a' and 'b' overlap");
    const std::string dup = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                            R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
    expect_error(open_header("dup.safetensors", dup, 8), ErrorCode::kCorruptFile, "dup.safetensors",
                 "'a' twice");
  }

  void sharded_folder_equals_single_file() {
    auto single = SafetensorsCheckpoint::open_folder(lathe::test::fixture_path("model/tiny_llama"));
    auto sharded =
        SafetensorsCheckpoint::open_folder(lathe::test::fixture_path("model/tiny_llama_sharded"));
    LATHE_QVERIFY_RESULT(single);
    LATHE_QVERIFY_RESULT(sharded);
    QVERIFY(!single->sharded());
    QVERIFY(sharded->sharded());
    QCOMPARE(single->files().size(), size_t{1});
    QVERIFY(sharded->files().size() >= 3);
    QCOMPARE(sharded->tensors().size(), single->tensors().size());
    for (const auto& [name, e] : single->tensors()) {
      const SafetensorsCheckpoint::Entry* s = sharded->find(name);
      QVERIFY2(s != nullptr, name.c_str());
      QCOMPARE(s->tensor->shape, e.tensor->shape);
      QCOMPARE(s->tensor->nbytes(), e.tensor->nbytes());
      QVERIFY2(std::memcmp(s->tensor->data, e.tensor->data,
                           static_cast<size_t>(e.tensor->nbytes())) == 0,
               name.c_str());
    }
  }

  void folder_without_index_uses_every_file() {
    namespace fs = std::filesystem;
    const std::string d = copy_fixture("tiny_llama_sharded", "no_index");
    fs::remove(fs::path(d) / "model.safetensors.index.json");
    auto r = SafetensorsCheckpoint::open_folder(d);
    LATHE_QVERIFY_RESULT(r);
    QVERIFY(!r->sharded());
    QVERIFY(r->find("model.embed_tokens.weight") != nullptr);
    QVERIFY(r->find("lm_head.weight") != nullptr);
  }

  void sharded_folder_errors() {
    namespace fs = std::filesystem;
    // A shard listed in the index is missing.
    const std::string d = copy_fixture("tiny_llama_sharded", "missing_shard");
    fs::remove(fs::path(d) / "model-00002-of-00004.safetensors");
    expect_error(SafetensorsCheckpoint::open_folder(d), ErrorCode::kNotFound,
                 "model.safetensors.index.json", "model-00002-of-00004.safetensors");
    // The index puts a tensor in a file that does not have it.
    const std::string e = copy_fixture("tiny_llama_sharded", "wrong_index");
    {
      std::ofstream out(fs::path(e) / "model.safetensors.index.json");
      out << R"({"weight_map": {"model.embed_tokens.weight": "model-00004-of-00004.safetensors",)"
          << R"( "model.norm.weight": "model-00001-of-00004.safetensors"}})";
    }
    // (embed_tokens is really in shard 1, the norm in shard 3.)
    expect_error(SafetensorsCheckpoint::open_folder(e), ErrorCode::kCorruptFile, "wrong_index",
                 "does not contain it");
    // An index entry that escapes the folder.
    const std::string f = copy_fixture("tiny_llama_sharded", "escape_index");
    {
      std::ofstream out(fs::path(f) / "model.safetensors.index.json");
      out << R"({"weight_map": {"model.norm.weight": "../../etc/passwd"}})";
    }
    expect_error(SafetensorsCheckpoint::open_folder(f), ErrorCode::kCorruptFile, "escape_index",
                 "outside the folder");
    // A folder with no weights at all.
    const std::string g = dir_.path().toStdString() + "/empty_folder";
    fs::create_directories(g);
    expect_error(SafetensorsCheckpoint::open_folder(g), ErrorCode::kNotFound, "empty_folder",
                 "no model weights");
  }

  void same_tensor_in_two_files() {
    namespace fs = std::filesystem;
    const std::string d = dir_.path().toStdString() + "/two_files";
    fs::create_directories(d);
    const std::string header = R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
    lathe::test::write_file(QString::fromStdString(d), "a.safetensors",
                            safetensors_bytes(header, std::vector<uint8_t>(4)));
    lathe::test::write_file(QString::fromStdString(d), "b.safetensors",
                            safetensors_bytes(header, std::vector<uint8_t>(4)));
    expect_error(SafetensorsCheckpoint::open_folder(d), ErrorCode::kCorruptFile, "two_files",
                 "'x' is in both");
  }
};

QTEST_GUILESS_MAIN(SafetensorsTest)
#include "safetensors_test.moc"

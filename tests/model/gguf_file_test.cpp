// GGUF reader: every metadata type, tensor infos and views, the default model, and each kind of
// malformed file (a clear kCorruptFile / kUnsupported error naming the file; never a crash or a
// huge allocation).
#include <QtTest>

#include <cmath>
#include <limits>

#include "engine/model/gguf_file.h"
#include "model_test_files.h"
#include "test_support.h"

using namespace lathe;
using lathe::test::append;
using lathe::test::GgufBuilder;

class GgufFileTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  // Writes `b` and opens it.
  Result<std::shared_ptr<const GgufFile>> open_built(const GgufBuilder& b,
                                                     const std::string& name) {
    return GgufFile::open(lathe::test::write_file(dir_.path(), name, b.build()));
  }

  // Expects `r` to fail with `code`, a message naming the file and containing `needle`.
  static void expect_error(const Result<std::shared_ptr<const GgufFile>>& r, ErrorCode code,
                           const std::string& file, const std::string& needle) {
    QVERIFY2(!r.is_ok(), "expected an error");
    const Status status = r.status();
    const std::string& msg = status.message();
    QVERIFY2(r.status().code() == code, msg.c_str());
    QVERIFY2(msg.find(file) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(needle) != std::string::npos, msg.c_str());
  }

  static GgufBuilder small_valid() {
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    b.kv_u32("llama.block_count", 1);
    b.f32_tensor("a.weight", {8, 2});
    b.f32_tensor("b.weight", {3});
    return b;
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void reads_every_metadata_type() {
    auto r = GgufFile::open(lathe::test::fixture_path("model/tiny_llama.gguf"));
    LATHE_QVERIFY_RESULT(r);
    const GgufFile& g = **r;
    QCOMPARE(g.version(), 3u);
    QCOMPARE(*g.get_int("lathe.test.u8").value(), int64_t{200});
    QCOMPARE(*g.get_int("lathe.test.i8").value(), int64_t{-100});
    QCOMPARE(*g.get_int("lathe.test.u16").value(), int64_t{60000});
    QCOMPARE(*g.get_int("lathe.test.i16").value(), int64_t{-30000});
    QCOMPARE(*g.get_int("lathe.test.u32").value(), int64_t{4000000000});
    QCOMPARE(*g.get_int("lathe.test.i32").value(), int64_t{-2000000000});
    QCOMPARE(*g.get_int("lathe.test.u64").value(), (int64_t{1} << 40) + 1);
    QCOMPARE(*g.get_int("lathe.test.i64").value(), -(int64_t{1} << 40));
    QCOMPARE(*g.get_float("lathe.test.f32").value(), 0.25);
    QCOMPARE(*g.get_float("lathe.test.f64").value(), -1.5e300);
    QCOMPARE(*g.get_bool("lathe.test.bool").value(), true);
    QCOMPARE(*g.get_string("lathe.test.string").value(), std::string("h\xc3\xa9llo"));
    QCOMPARE(g.get_float_array("lathe.test.floats").value(), (std::vector<double>{0.5, -2.0}));

    const GgufValue* nested = g.find("lathe.test.nested");
    QVERIFY(nested != nullptr);
    QCOMPARE(nested->array_type, GgufType::kArray);
    QCOMPARE(nested->array_size(), int64_t{2});
    QCOMPARE(nested->array_arrays[0].array_ints, (std::vector<int64_t>{1, 2, 3}));
    QCOMPARE(nested->array_arrays[1].array_ints, (std::vector<int64_t>{4}));
    const GgufValue* nested_s = g.find("lathe.test.nested_strings");
    QVERIFY(nested_s != nullptr);
    QCOMPARE(nested_s->array_arrays[0].array_strings, (std::vector<std::string>{"a", "bc"}));

    // Absent keys are nullopt; a present key of the wrong type is an error naming the key.
    QVERIFY(!g.get_int("no.such.key").value().has_value());
    auto wrong = g.get_int("lathe.test.string");
    QVERIFY(!wrong.is_ok());
    QCOMPARE(wrong.status().code(), ErrorCode::kCorruptFile);
    QVERIFY(wrong.status().message().find("lathe.test.string") != std::string::npos);
  }

  void tensor_views_are_in_pytorch_order() {
    auto r = GgufFile::open(lathe::test::fixture_path("model/tiny_llama.gguf"));
    LATHE_QVERIFY_RESULT(r);
    const GgufTensorInfo* down = (*r)->find_tensor("blk.0.ffn_down.weight");
    QVERIFY(down != nullptr);
    QCOMPARE(down->ne[0], int64_t{64});  // ggml: contiguous dim first
    QCOMPARE(down->ne[1], int64_t{32});
    const TensorView v = down->view();
    QCOMPARE(v.shape_string(), std::string("[32, 64]"));
    QCOMPARE(v.dtype, DType::kQ8_0);
    QCOMPARE(v.nbytes(), int64_t{32 * 2 * 34});
    QCOMPARE(reinterpret_cast<uintptr_t>(v.data) % (*r)->alignment(), uintptr_t{0});
  }

  void default_model_metadata() {
    const std::string path = lathe::test::default_model_path();
    if (!QFile::exists(QString::fromStdString(path)))
      QSKIP("default model not fetched (scripts/fetch-default-model.sh)");
    auto r = GgufFile::open(path);
    LATHE_QVERIFY_RESULT(r);
    const GgufFile& g = **r;
    QCOMPARE(g.version(), 3u);
    QCOMPARE(g.tensors().size(), size_t{272});
    QCOMPARE(g.metadata().size(), size_t{33});
    QCOMPARE(*g.get_string("general.architecture").value(), std::string("llama"));
    QCOMPARE(*g.get_int("llama.block_count").value(), int64_t{30});
    QCOMPARE(g.get_string_array("tokenizer.ggml.tokens").value().size(), size_t{49152});
    QCOMPARE(g.get_string_array("tokenizer.ggml.merges").value().size(), size_t{48900});
    const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
    QVERIFY(emb != nullptr);
    QCOMPARE(emb->dtype, DType::kQ8_0);
    QCOMPARE(emb->view().shape_string(), std::string("[49152, 576]"));
    QCOMPARE(g.find_tensor("blk.0.attn_k.weight")->view().shape_string(),
             std::string("[192, 576]"));
    QCOMPARE(g.find_tensor("blk.0.attn_k.weight")->dtype, DType::kQ4_1);
  }

  void version_2_is_read() {
    GgufBuilder b = small_valid();
    b.version = 2;
    auto r = open_built(b, "v2.gguf");
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE((*r)->version(), 2u);
    QCOMPARE((*r)->tensors().size(), size_t{2});
    const float* a = reinterpret_cast<const float*>((*r)->find_tensor("a.weight")->data);
    QCOMPARE(a[15], 15.0f);
    QCOMPARE(reinterpret_cast<const float*>((*r)->find_tensor("b.weight")->data)[2], 2.0f);
  }

  void custom_alignment_is_honoured() {
    GgufBuilder b = small_valid();
    b.alignment = 64;
    b.kv_u32("general.alignment", 64);
    auto r = open_built(b, "align64.gguf");
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE((*r)->alignment(), uint64_t{64});
    QCOMPARE((*r)->data_offset() % 64, uint64_t{0});
    QCOMPARE(reinterpret_cast<const float*>((*r)->find_tensor("b.weight")->data)[1], 1.0f);
  }

  void wrong_magic() {
    GgufBuilder b = small_valid();
    std::memcpy(b.magic, "GGML", 4);
    expect_error(open_built(b, "magic.gguf"), ErrorCode::kCorruptFile, "magic.gguf",
                 "not a GGUF file");
    const std::string path = lathe::test::write_file(dir_.path(), "tiny.gguf", {'G', 'G'});
    expect_error(GgufFile::open(path), ErrorCode::kCorruptFile, "tiny.gguf", "not a GGUF file");
  }

  void unsupported_versions() {
    GgufBuilder b = small_valid();
    b.version = 1;
    expect_error(open_built(b, "v1.gguf"), ErrorCode::kUnsupported, "v1.gguf", "version 1");
    b.version = 4;
    expect_error(open_built(b, "v4.gguf"), ErrorCode::kUnsupported, "v4.gguf", "version 4");
    b.version = 0x03000000;  // a big-endian writer's 3
    expect_error(open_built(b, "be.gguf"), ErrorCode::kUnsupported, "be.gguf", "big-endian");
  }

  void truncated_files_fail_cleanly() {
    const std::vector<uint8_t> full =
        lathe::test::read_file_bytes(lathe::test::fixture_path("model/tiny_llama.gguf"));
    QVERIFY(full.size() > 1000);
    uint64_t data_end = 0;
    {
      auto r = GgufFile::open(lathe::test::fixture_path("model/tiny_llama.gguf"));
      LATHE_QVERIFY_RESULT(r);
      for (const GgufTensorInfo& t : (*r)->tensors())
        data_end = std::max<uint64_t>(data_end, (*r)->data_offset() + t.offset + t.nbytes);
    }
    // Cut inside the header, the metadata, the tensor infos and the data section.
    int checked = 0;
    for (size_t len = 0; len < data_end; len += (len < 4096 ? 7 : 997)) {
      const std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
      auto r = GgufFile::open(lathe::test::write_file(dir_.path(), "cut.gguf", cut));
      QVERIFY2(!r.is_ok(), std::to_string(len).c_str());
      QCOMPARE(r.status().code(), ErrorCode::kCorruptFile);
      QVERIFY2(r.status().message().find("cut.gguf") != std::string::npos,
               r.status().message().c_str());
      ++checked;
    }
    QVERIFY(checked > 500);
    // A cut in the metadata says what it was reading.
    const std::vector<uint8_t> cut(full.begin(), full.begin() + 2000);
    auto r = GgufFile::open(lathe::test::write_file(dir_.path(), "cut_meta.gguf", cut));
    expect_error(r, ErrorCode::kCorruptFile, "cut_meta.gguf", "truncated");
  }

  void tensor_offset_past_the_end() {
    GgufBuilder b = small_valid();
    b.tensors[1].override_offset = true;
    b.tensors[1].offset = 1 << 20;
    expect_error(open_built(b, "offset.gguf"), ErrorCode::kCorruptFile, "offset.gguf",
                 "tensor 'b.weight' ends at byte");
    b.tensors[1].offset = std::numeric_limits<uint64_t>::max() - 31;  // would wrap around
    expect_error(open_built(b, "offset_wrap.gguf"), ErrorCode::kCorruptFile, "offset_wrap.gguf",
                 "b.weight");
  }

  void misaligned_tensor_offset() {
    GgufBuilder b = small_valid();
    b.tensors[1].override_offset = true;
    b.tensors[1].offset = 68;  // inside the file, but not a multiple of 32
    expect_error(open_built(b, "misaligned.gguf"), ErrorCode::kCorruptFile, "misaligned.gguf",
                 "not a multiple of the alignment 32");
  }

  void bad_alignment_value() {
    GgufBuilder b = small_valid();
    b.kv_u32("general.alignment", 24);
    expect_error(open_built(b, "align24.gguf"), ErrorCode::kCorruptFile, "align24.gguf",
                 "power of two");
  }

  void absurd_counts_are_rejected_before_allocating() {
    GgufBuilder b = small_valid();
    b.override_counts = true;
    b.tensor_count = 2;
    b.kv_count = uint64_t{1} << 60;
    expect_error(open_built(b, "kv_count.gguf"), ErrorCode::kCorruptFile, "kv_count.gguf",
                 "metadata entries");
    b.kv_count = 2;
    b.tensor_count = uint64_t{1} << 61;
    expect_error(open_built(b, "tensor_count.gguf"), ErrorCode::kCorruptFile, "tensor_count.gguf",
                 "tensors");
  }

  void string_length_past_the_end() {
    GgufBuilder b = small_valid();
    std::vector<uint8_t> v;
    append<uint64_t>(&v, uint64_t{1} << 62);  // string length
    v.push_back('x');
    b.kv_raw("general.name", 8, v);
    expect_error(open_built(b, "strlen.gguf"), ErrorCode::kCorruptFile, "strlen.gguf",
                 "general.name");
  }

  void array_count_past_the_end() {
    GgufBuilder b = small_valid();
    std::vector<uint8_t> v;
    append<uint32_t>(&v, 4);                  // u32 elements
    append<uint64_t>(&v, uint64_t{1} << 61);  // count
    b.kv_raw("big.array", 9, v);
    expect_error(open_built(b, "arraylen.gguf"), ErrorCode::kCorruptFile, "arraylen.gguf",
                 "cannot fit");
    // Strings inside an array whose lengths run past the end.
    GgufBuilder c = small_valid();
    std::vector<uint8_t> s;
    append<uint32_t>(&s, 8);
    append<uint64_t>(&s, 2);
    append<uint64_t>(&s, 1);
    s.push_back('a');
    append<uint64_t>(&s, uint64_t{1} << 40);
    c.kv_raw("tokenizer.ggml.tokens", 9, s);
    expect_error(open_built(c, "arraystr.gguf"), ErrorCode::kCorruptFile, "arraystr.gguf",
                 "element 1 of metadata 'tokenizer.ggml.tokens'");
  }

  void nesting_too_deep() {
    GgufBuilder b = small_valid();
    std::vector<uint8_t> v;
    for (int i = 0; i < 20; ++i) {  // array of array of ... (one element each)
      append<uint32_t>(&v, 9);
      append<uint64_t>(&v, 1);
    }
    append<uint32_t>(&v, 4);
    append<uint64_t>(&v, 0);
    b.kv_raw("deep", 9, v);
    expect_error(open_built(b, "deep.gguf"), ErrorCode::kCorruptFile, "deep.gguf",
                 "nested more than");
  }

  void bad_value_types() {
    GgufBuilder b = small_valid();
    b.kv_raw("weird", 13, {0, 0, 0, 0});
    expect_error(open_built(b, "type13.gguf"), ErrorCode::kCorruptFile, "type13.gguf", "weird");
    GgufBuilder c = small_valid();
    c.kv_raw("flag", 7, {2});
    expect_error(open_built(c, "bool2.gguf"), ErrorCode::kCorruptFile, "bool2.gguf", "flag");
  }

  void duplicate_names() {
    GgufBuilder b = small_valid();
    b.f32_tensor("a.weight", {4});
    expect_error(open_built(b, "dup_tensor.gguf"), ErrorCode::kCorruptFile, "dup_tensor.gguf",
                 "'a.weight' appears twice");
    GgufBuilder c = small_valid();
    c.kv_u32("llama.block_count", 2);
    expect_error(open_built(c, "dup_key.gguf"), ErrorCode::kCorruptFile, "dup_key.gguf",
                 "'llama.block_count' appears twice");
  }

  void shape_overflow_and_bad_dims() {
    GgufBuilder b = small_valid();
    b.tensor("huge", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, {});
    expect_error(open_built(b, "overflow.gguf"), ErrorCode::kCorruptFile, "overflow.gguf",
                 "overflows");
    GgufBuilder z = small_valid();
    z.tensor("empty", {0, 4}, 0, {});
    expect_error(open_built(z, "zero.gguf"), ErrorCode::kCorruptFile, "zero.gguf",
                 "'empty' has a dimension of size 0");
    GgufBuilder c = small_valid();
    c.tensor("five_dims", {1, 1, 1, 1, 1}, 0, std::vector<uint8_t>(4));
    expect_error(open_built(c, "dims5.gguf"), ErrorCode::kCorruptFile, "dims5.gguf",
                 "5 dimensions");
    GgufBuilder d = small_valid();
    d.tensor("odd_row", {33, 1}, 2, std::vector<uint8_t>(36));  // q4_0 rows must be multiples of 32
    expect_error(open_built(d, "oddrow.gguf"), ErrorCode::kCorruptFile, "oddrow.gguf",
                 "not a multiple of the block size");
  }

  void unsupported_tensor_type_names_tensor_and_type() {
    GgufBuilder b = small_valid();
    b.tensor("blk.0.ffn_up.weight", {256, 1}, 23, std::vector<uint8_t>(136));  // iq4_xs
    auto r = open_built(b, "iq4xs.gguf");
    expect_error(r, ErrorCode::kUnsupported, "iq4xs.gguf",
                 "blk.0.ffn_up.weight has type iq4_xs, which Lathe does not support; supported: "
                 "f32, f16, q4_0");
    for (const char* t : {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_0", "bf16"})
      QVERIFY2(r.status().message().find(t) != std::string::npos, t);
    GgufBuilder c = small_valid();
    c.tensor("blk.0.ffn_up.weight", {256, 1}, 35, std::vector<uint8_t>(66));  // tq2_0
    expect_error(open_built(c, "tq2.gguf"), ErrorCode::kUnsupported, "tq2.gguf",
                 "has type tq2_0, which Lathe does not support");
  }

  void q2_k_and_q3_k_are_read() {
    for (const auto& [id, bytes] : {std::pair<uint32_t, size_t>{10, 84}, {11, 110}}) {
      GgufBuilder b = small_valid();
      b.tensor("blk.0.ffn_up.weight", {256, 1}, id, std::vector<uint8_t>(bytes));
      auto r = open_built(b, "k.gguf");
      LATHE_QVERIFY_RESULT(r);
    }
  }
};

QTEST_GUILESS_MAIN(GgufFileTest)
#include "gguf_file_test.moc"

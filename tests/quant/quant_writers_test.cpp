// The writers under every quantized output (engine/quant/safetensors_writer.h, gguf_writer.h,
// atomic_output.h): what they write reads back through the engine's own readers (and, for GGUF,
// through gguf-py when scripts/fetch-quant-tools.sh has run), sizes are known before writing, and
// an output appears under its name only when committed.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/model/dequant.h"
#include "engine/model/gguf_file.h"
#include "engine/model/safetensors_file.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/gguf_writer.h"
#include "engine/quant/safetensors_writer.h"
#include "model/model_test_files.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (a.type != GgufType::kArray)
    return a.int_value == b.int_value && a.string_value == b.string_value &&
           (a.float_value == b.float_value ||
            (std::isnan(a.float_value) && std::isnan(b.float_value)));
  if (a.array_type != b.array_type || a.array_ints != b.array_ints ||
      a.array_floats != b.array_floats || a.array_strings != b.array_strings ||
      a.array_arrays.size() != b.array_arrays.size())
    return false;
  for (size_t i = 0; i < a.array_arrays.size(); ++i)
    if (!same_value(a.array_arrays[i], b.array_arrays[i])) return false;
  return true;
}

}  // namespace

class QuantWritersTest : public QObject {
  Q_OBJECT
 private slots:
  void safetensors_file_reads_back() {
    QTemporaryDir dir;
    const std::vector<float> a = test::random_normal(12, 1);
    const std::vector<uint8_t> b = {1, 2, 3};
    std::vector<SafetensorsTensorSpec> specs = {
        {"a.weight", "F32", {3, 4}}, {"b", "U8", {3}}, {"empty", "F16", {0, 5}}};
    const std::string path = dir.filePath("x.safetensors").toStdString();
    Result<SafetensorsWriter> w = SafetensorsWriter::create(path, specs, {{"format", "pt"}});
    LATHE_QVERIFY_RESULT(w);
    QVERIFY(!w->write("b", b.data(), 3).is_ok());  // out of order
    LATHE_QVERIFY_OK(w->write("a.weight", a.data(), 48));
    QVERIFY(!w->write("b", b.data(), 2).is_ok());  // wrong size
    LATHE_QVERIFY_OK(w->write("b", b.data(), 3));
    QVERIFY(!w->finish().is_ok());  // "empty" not written yet
    LATHE_QVERIFY_OK(w->write("empty", nullptr, 0));
    LATHE_QVERIFY_OK(w->finish());
    QCOMPARE(static_cast<int64_t>(fs::file_size(path)),
             safetensors_file_size(specs, {{"format", "pt"}}));
    const std::vector<uint8_t> raw = test::read_file_bytes(path);
    uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    QCOMPARE(n % 8, uint64_t{0});  // header padded to 8 bytes
    QCOMPARE(raw[8 + n - 1], uint8_t(' '));
    Result<std::shared_ptr<const SafetensorsFile>> f = SafetensorsFile::open(path);
    LATHE_QVERIFY_RESULT(f);
    QCOMPARE((*f)->metadata().at("format"), std::string("pt"));
    const SafetensorsTensor* t = (*f)->find("a.weight");
    QVERIFY(t != nullptr);
    QCOMPARE(t->shape, (std::vector<int64_t>{3, 4}));
    QCOMPARE(std::memcmp(t->data, a.data(), 48), 0);
    QCOMPARE((*f)->find("b")->dtype_name, std::string("U8"));

    QVERIFY(!SafetensorsWriter::create(path, {{"x", "F32", {1}}, {"x", "F32", {1}}}).is_ok());
    QVERIFY(!SafetensorsWriter::create(path, {{"x", "F7", {1}}}).is_ok());
    QVERIFY(!SafetensorsWriter::create(path, {{"x", "F32", {-1}}}).is_ok());
  }

  void safetensors_folder_shards_and_indexes() {
    QTemporaryDir dir;
    std::vector<SafetensorsTensorSpec> specs;
    std::vector<std::vector<float>> data;
    for (int i = 0; i < 7; ++i) {
      specs.push_back({QString("t%1").arg(i).toStdString(), "F32", {10, 10 + i}});
      data.push_back(test::random_normal(static_cast<size_t>(10 * (10 + i)), 10 + i));
    }
    const int64_t shard = 1200;  // two or three tensors per shard
    Result<SafetensorsFolderWriter> w =
        SafetensorsFolderWriter::create(dir.path().toStdString(), specs, shard);
    LATHE_QVERIFY_RESULT(w);
    QVERIFY(w->num_shards() > 2);
    for (int i = 0; i < 7; ++i)
      LATHE_QVERIFY_OK(w->write(specs[static_cast<size_t>(i)].name,
                                data[static_cast<size_t>(i)].data(),
                                data[static_cast<size_t>(i)].size() * 4));
    LATHE_QVERIFY_OK(w->finish());
    int64_t on_disk = 0;
    for (const auto& e : fs::directory_iterator(dir.path().toStdString()))
      on_disk += static_cast<int64_t>(e.file_size());
    QCOMPARE(on_disk, SafetensorsFolderWriter::expected_bytes(specs, shard));
    Result<SafetensorsCheckpoint> c = SafetensorsCheckpoint::open_folder(dir.path().toStdString());
    LATHE_QVERIFY_RESULT(c);
    QVERIFY(c->sharded());
    QCOMPARE(c->tensors().size(), size_t{7});
    for (int i = 0; i < 7; ++i)
      QCOMPARE(
          std::memcmp(c->find(QString("t%1").arg(i).toStdString())->tensor->data,
                      data[static_cast<size_t>(i)].data(), data[static_cast<size_t>(i)].size() * 4),
          0);
    // One shard: model.safetensors, no index.
    QTemporaryDir one;
    Result<SafetensorsFolderWriter> w1 =
        SafetensorsFolderWriter::create(one.path().toStdString(), {specs[0]});
    LATHE_QVERIFY_RESULT(w1);
    LATHE_QVERIFY_OK(w1->write("t0", data[0].data(), data[0].size() * 4));
    LATHE_QVERIFY_OK(w1->finish());
    QVERIFY(fs::exists(one.path().toStdString() + "/model.safetensors"));
    QVERIFY(!fs::exists(one.path().toStdString() + "/model.safetensors.index.json"));
  }

  void gguf_copy_reads_back_identically() {
    // Every metadata type and a few tensors of the tiny fixture, written again with 64-byte
    // alignment.
    Result<std::shared_ptr<const GgufFile>> src =
        GgufFile::open(test::fixture_path("model/tiny_llama.gguf"));
    LATHE_QVERIFY_RESULT(src);
    GgufMetadata m((*src)->metadata().begin(), (*src)->metadata().end());
    gguf_set(m, "general.alignment", gguf_u32(64));
    std::vector<GgufTensorSpec> specs;
    for (const GgufTensorInfo& t : (*src)->tensors()) {
      const TensorView v = t.view();
      specs.push_back(
          {t.name, t.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim)});
    }
    QTemporaryDir dir;
    const std::string path = dir.filePath("copy.gguf").toStdString();
    Result<GgufWriter> w = GgufWriter::create(path, m, specs);
    LATHE_QVERIFY_RESULT(w);
    for (const GgufTensorInfo& t : (*src)->tensors())
      LATHE_QVERIFY_OK(w->write(t.name, t.data, static_cast<size_t>(t.nbytes)));
    LATHE_QVERIFY_OK(w->finish());
    QCOMPARE(static_cast<int64_t>(fs::file_size(path)), gguf_file_size(m, specs));

    Result<std::shared_ptr<const GgufFile>> back = GgufFile::open(path);
    LATHE_QVERIFY_RESULT(back);
    QCOMPARE((*back)->version(), uint32_t{3});
    QCOMPARE((*back)->alignment(), uint64_t{64});
    QCOMPARE((*back)->metadata().size(), m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      QCOMPARE((*back)->metadata()[i].first, m[i].first);
      QVERIFY2(same_value((*back)->metadata()[i].second, m[i].second), m[i].first.c_str());
    }
    QCOMPARE((*back)->tensors().size(), (*src)->tensors().size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const GgufTensorInfo& a = (*src)->tensors()[i];
      const GgufTensorInfo& b = (*back)->tensors()[i];
      QCOMPARE(b.name, a.name);
      QCOMPARE(b.ne, a.ne);
      QCOMPARE(b.dtype, a.dtype);
      QCOMPARE(b.offset % 64, uint64_t{0});
      QCOMPARE(std::memcmp(a.data, b.data, static_cast<size_t>(a.nbytes)), 0);
    }

    // gguf-py reads the same metadata and tensors, and dequantizes them to the engine's values.
    if (test::quant_venv_python().empty()) {
      qWarning("gguf-py check skipped: run scripts/fetch-quant-tools.sh");
      return;
    }
    const test::ProcessResult r =
        test::run_python_script("read_gguf.py", {QString::fromStdString(path)});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["version"].toInt(), 3);
    QCOMPARE(j["alignment"].toInt(), 64);
    QCOMPARE(j["metadata"].toObject().size(), qsizetype(m.size()));
    QCOMPARE(j["metadata"].toObject()["general.architecture"].toString(), QString("llama"));
    const QJsonArray tensors = j["tensors"].toArray();
    QCOMPARE(tensors.size(), qsizetype(specs.size()));
    for (qsizetype i = 0; i < tensors.size(); ++i) {
      const QJsonObject t = tensors[i].toObject();
      const GgufTensorInfo& info = (*back)->tensors()[static_cast<size_t>(i)];
      QCOMPARE(t["name"].toString().toStdString(), info.name);
      std::vector<float> deq(static_cast<size_t>(info.numel()));
      LATHE_QVERIFY_OK(dequantize_tensor(info.view(), deq.data()));
      double sum = 0;
      for (float v : deq) sum += v;
      QVERIFY2(
          std::fabs(sum - t["sum"].toDouble()) <= 1e-6 * (1 + std::fabs(sum)),
          qPrintable(
              QString("%1: %2 vs %3").arg(t["name"].toString()).arg(sum).arg(t["sum"].toDouble())));
    }
  }

  void gguf_writer_refuses_bad_plans() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.gguf").toStdString();
    GgufMetadata m;
    gguf_set(m, "general.architecture", gguf_string("llama"));
    QVERIFY(!GgufWriter::create(path, m, {{"t", DType::kQ4_K, {4, 100}}}).is_ok());  // 100 % 256
    QVERIFY(!GgufWriter::create(path, m, {{"t", DType::kF8E4M3, {4}}}).is_ok());     // no ggml id
    QVERIFY(
        !GgufWriter::create(path, m, {{"t", DType::kF32, {4}}, {"t", DType::kF32, {4}}}).is_ok());
    gguf_set(m, "general.alignment", gguf_u32(48));
    QVERIFY(!GgufWriter::create(path, m, {{"t", DType::kF32, {4}}}).is_ok());
  }

  void gguf_tensors_stream_in_parts() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("parts.gguf").toStdString();
    GgufMetadata m;
    gguf_set(m, "general.architecture", gguf_string("llama"));
    const std::vector<GgufTensorSpec> specs = {{"a", DType::kF32, {2, 5}}, {"b", DType::kF32, {3}}};
    std::vector<float> a(10), b = {7.f, 8.f, 9.f};
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
    Result<GgufWriter> w = GgufWriter::create(path, m, specs);
    LATHE_QVERIFY_RESULT(w);
    LATHE_QVERIFY_OK(w->write_part("a", a.data(), 12));
    // Another tensor, a whole-tensor write, or a piece past the end while "a" is incomplete.
    QVERIFY(!w->write_part("b", b.data(), 12).is_ok());
    QVERIFY(!w->write("a", a.data(), 40).is_ok());
    const Status over = w->write_part("a", a.data() + 3, 32);
    QVERIFY(!over.is_ok());
    QVERIFY2(over.message().find("gets 44 bytes, declared 40") != std::string::npos,
             over.message().c_str());
    QVERIFY(!w->finish().is_ok());  // "a" is not complete
    LATHE_QVERIFY_OK(w->write_part("a", a.data() + 3, 28));
    LATHE_QVERIFY_OK(w->write("b", b.data(), 12));
    LATHE_QVERIFY_OK(w->finish(false));
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(path);
    LATHE_QVERIFY_RESULT(g);
    QVERIFY(std::memcmp((*g)->find_tensor("a")->data, a.data(), 40) == 0);
    QVERIFY(std::memcmp((*g)->find_tensor("b")->data, b.data(), 12) == 0);
  }

  void atomic_output_appears_only_on_commit() {
    QTemporaryDir dir;
    const std::string out = dir.filePath("model-out").toStdString();
    {
      Result<AtomicOutput> a = AtomicOutput::begin(out, true, false);
      LATHE_QVERIFY_RESULT(a);
      QVERIFY(fs::is_directory(a->temp_path()));
      QVERIFY(a->temp_path() != out);
      LATHE_QVERIFY_OK(write_small_file(a->temp_path() + "/f.txt", "x"));
      QVERIFY(!fs::exists(out));
    }  // destroyed without commit: the temporary is gone, nothing under the name
    QCOMPARE(
        std::distance(fs::directory_iterator(dir.path().toStdString()), fs::directory_iterator()),
        0);
    {
      Result<AtomicOutput> a = AtomicOutput::begin(out, true, false);
      LATHE_QVERIFY_RESULT(a);
      LATHE_QVERIFY_OK(write_small_file(a->temp_path() + "/f.txt", "first"));
      LATHE_QVERIFY_OK(a->commit());
    }
    QVERIFY(fs::exists(out + "/f.txt"));
    // An existing output is an error unless forced; forced, it is replaced whole.
    Status s = check_output_path(out, false);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("--force") != std::string::npos, s.message().c_str());
    QVERIFY(!AtomicOutput::begin(out, true, false).is_ok());
    {
      Result<AtomicOutput> a = AtomicOutput::begin(out, true, true);
      LATHE_QVERIFY_RESULT(a);
      LATHE_QVERIFY_OK(write_small_file(a->temp_path() + "/g.txt", "second"));
      LATHE_QVERIFY_OK(a->commit());
    }
    QVERIFY(fs::exists(out + "/g.txt") && !fs::exists(out + "/f.txt"));
    QCOMPARE(
        std::distance(fs::directory_iterator(dir.path().toStdString()), fs::directory_iterator()),
        1);
    // A file output.
    const std::string file = dir.filePath("m.gguf").toStdString();
    {
      Result<AtomicOutput> a = AtomicOutput::begin(file, false, false);
      LATHE_QVERIFY_RESULT(a);
      LATHE_QVERIFY_OK(write_small_file(a->temp_path(), "gguf"));
      LATHE_QVERIFY_OK(a->commit());
    }
    QCOMPARE(test::read_file_bytes(file).size(), size_t{4});
    // The output's folder must exist.
    QVERIFY(check_output_path(dir.filePath("no/such/folder/out").toStdString(), false).code() ==
            ErrorCode::kNotFound);
  }

  // A full disk during a write (quantize's files): /dev/full fails every write with ENOSPC, which
  // is a kResourceExhausted error naming the file and what to do, not an abort or a short file.
  void a_full_disk_is_an_error_naming_the_file() {
    if (!fs::exists("/dev/full")) QSKIP("no /dev/full on this system");
    Result<FileWriter> w = FileWriter::create("/dev/full");
    LATHE_QVERIFY_RESULT(w);
    const std::vector<char> bytes(1 << 16, 'x');
    const Status s = w->write(bytes.data(), bytes.size());
    QCOMPARE(s.code(), ErrorCode::kResourceExhausted);
    QVERIFY2(s.message().find("/dev/full") != std::string::npos &&
                 s.message().find("the disk is full") != std::string::npos,
             s.message().c_str());
    QCOMPARE(w->write_zeros(4096).code(), ErrorCode::kResourceExhausted);
  }

  void free_space_is_checked() {
    QTemporaryDir dir;
    const std::string out = dir.filePath("out").toStdString();
    LATHE_QVERIFY_OK(check_free_space(out, 1024));
    const Status s = check_free_space(out, int64_t{1} << 62);  // 4 EiB
    QCOMPARE(s.code(), ErrorCode::kResourceExhausted);
    QVERIFY2(s.message().find("not enough disk space") != std::string::npos, s.message().c_str());
  }
};

QTEST_GUILESS_MAIN(QuantWritersTest)
#include "quant_writers_test.moc"

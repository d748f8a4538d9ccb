// GGUF block quantizers (engine/quant/ggml_quantize.h): bit-identical to llama.cpp's reference
// quantizers on the committed blocks of tests/fixtures/quant/ggml_reference (made by
// scripts/fixtures/make_ggml_quant_fixtures.sh from llama.cpp's ggml-quants.c), bit-identical to
// gguf-py's quantizer on random rows for every type gguf-py can quantize (skips without
// scripts/fetch-quant-tools.sh), and within per-type error bounds through the engine's own
// dequantizer.
#include <QtTest>

#include <QTemporaryDir>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/model/dequant.h"
#include "engine/quant/ggml_quantize.h"
#include "model/model_test_files.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

struct TypeName {
  DType type;
  const char* name;
};
constexpr TypeName kTypes[] = {
    {DType::kQ8_0, "q8_0"}, {DType::kQ4_0, "q4_0"}, {DType::kQ4_1, "q4_1"}, {DType::kQ5_0, "q5_0"},
    {DType::kQ5_1, "q5_1"}, {DType::kQ4_K, "q4_k"}, {DType::kQ5_K, "q5_k"}, {DType::kQ6_K, "q6_k"},
};

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x, int64_t cols) {
  std::vector<uint8_t> out(static_cast<size_t>(*dtype_bytes(t, static_cast<int64_t>(x.size()))));
  const Status s =
      quantize_rows_ggml(t, x.data(), static_cast<int64_t>(x.size()) / cols, cols, out.data());
  if (!s.is_ok()) qFatal("%s", s.message().c_str());
  return out;
}

// Weight-like rows with edge cases, 256 values each.
std::vector<float> test_rows(uint32_t seed) {
  std::vector<float> x = test::random_normal(256 * 12, seed, 0.03f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.f);
  std::fill(x.begin() + 512, x.begin() + 768, -0.5f);
  x[900] = 9.f;
  for (size_t i = 1024; i < 1280; ++i) x[i] *= 1e-5f;
  for (size_t i = 1280; i < 1536; ++i) x[i] *= 3000.f;
  for (size_t i = 1536; i < 1792; ++i) x[i] = std::fabs(x[i]);
  for (size_t i = 1792; i < 2048; ++i) x[i] = -std::fabs(x[i]);
  for (size_t i = 2048; i < 2304; ++i) x[i] = float(int(i % 7) - 3) * 0.01f;  // few values
  return x;
}

}  // namespace

class GgmlQuantizeTest : public QObject {
  Q_OBJECT

  void add_types() {
    QTest::addColumn<int>("type");
    QTest::addColumn<QString>("name");
    for (const TypeName& t : kTypes) QTest::newRow(t.name) << int(t.type) << QString(t.name);
  }

 private slots:
  void bit_identical_to_llama_cpp_data() { add_types(); }
  void bit_identical_to_llama_cpp() {
    QFETCH(int, type);
    QFETCH(QString, name);
    const std::string dir = test::fixture_path("quant/ggml_reference/");
    const std::vector<uint8_t> raw = test::read_file_bytes(dir + "input.f32");
    std::vector<float> x(raw.size() / 4);
    std::memcpy(x.data(), raw.data(), raw.size());
    QCOMPARE(x.size(), size_t{2048});
    const std::vector<uint8_t> want = test::read_file_bytes(dir + name.toStdString() + ".bin");
    QVERIFY(!want.empty());
    QCOMPARE(quantize(static_cast<DType>(type), x, 256), want);
  }

  void bit_identical_to_gguf_py_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<QString>("name");
    for (const TypeName& t : kTypes)
      if (dtype_info(t.type).block_size == 32)
        QTest::newRow(t.name) << int(t.type) << QString(t.name);
  }
  void bit_identical_to_gguf_py() {
    LATHE_SKIP_WITHOUT_QUANT_VENV();
    QFETCH(int, type);
    QFETCH(QString, name);
    QTemporaryDir dir;
    std::vector<float> x = test_rows(77);
    const std::vector<float> more = test::random_normal(256 * 8, 78, 1.f);
    x.insert(x.end(), more.begin(), more.end());
    std::vector<uint8_t> bytes(x.size() * 4);
    std::memcpy(bytes.data(), x.data(), bytes.size());
    const std::string input = test::write_file(dir.path(), "input.f32", bytes);
    const test::ProcessResult r = test::run_python_script(
        "gguf_py_quantize.py", {QString::fromStdString(input), "256", dir.path(), name});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const std::vector<uint8_t> want =
        test::read_file_bytes(dir.path().toStdString() + "/" + name.toStdString() + ".bin");
    QCOMPARE(quantize(static_cast<DType>(type), x, 256), want);
  }

  void round_trip_error_is_bounded_data() { add_types(); }
  void round_trip_error_is_bounded() {
    QFETCH(int, type);
    const DType t = static_cast<DType>(type);
    const std::vector<float> x = test_rows(5);
    const std::vector<uint8_t> q = quantize(t, x, 256);
    std::vector<float> back(x.size());
    dequantize_row(t, q.data(), back.data(), static_cast<int64_t>(x.size()));
    // Relative RMS error per 256-value row; the zero row comes back exactly zero.
    // (A uniform step d has RMS error d / sqrt(12); with d ~ 2.5 sigma / 2^(bits-1) that is
    // about 0.006 at 8 bits, 0.045 at 5 and 0.09 at 4.)
    const double bound = t == DType::kQ8_0                                             ? 0.015
                         : t == DType::kQ6_K                                           ? 0.03
                         : t == DType::kQ5_0 || t == DType::kQ5_1 || t == DType::kQ5_K ? 0.06
                                                                                       : 0.12;
    for (size_t row = 0; row < x.size() / 256; ++row) {
      if (row == 4) continue;  // ~3e-7: below what an f16 block scale can express, by design
      double err = 0, ref = 0;
      for (size_t i = row * 256; i < (row + 1) * 256; ++i) {
        err += double(back[i] - x[i]) * (back[i] - x[i]);
        ref += double(x[i]) * x[i];
      }
      if (ref == 0) {
        QCOMPARE(err, 0.0);
        continue;
      }
      const double rel = std::sqrt(err / ref);
      QVERIFY2(
          rel <= bound,
          qPrintable(QString("row %1: relative RMS error %2 > %3").arg(row).arg(rel).arg(bound)));
    }
  }

  void refuses_rows_that_do_not_fit() {
    std::vector<float> x(96, 1.f);
    std::vector<uint8_t> out(1024);
    QVERIFY(!quantize_rows_ggml(DType::kQ4_K, x.data(), 1, 96, out.data()).is_ok());
    QVERIFY(!quantize_rows_ggml(DType::kQ8_0, x.data(), 1, 48, out.data()).is_ok());
    QVERIFY(!quantize_rows_ggml(DType::kBF16, x.data(), 1, 96, out.data()).is_ok());
    QVERIFY(quantize_rows_ggml(DType::kQ8_0, x.data(), 3, 32, out.data()).is_ok());
    QVERIFY(can_quantize_ggml(DType::kQ6_K) && !can_quantize_ggml(DType::kF16));
  }
};

QTEST_GUILESS_MAIN(GgmlQuantizeTest)
#include "ggml_quantize_test.moc"

// Core utilities: half-precision conversion, dtype tables, strings, thread pool, mapped files.
#include <QtTest>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/atomic_file.h"
#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/core/mapped_file.h"
#include "engine/core/status_guard.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "test_support.h"

using namespace lathe;

class CoreTest : public QObject {
  Q_OBJECT
 private slots:
  void f16_round_trips_every_half() {
    // Every finite half converts to float and back to itself.
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const uint16_t x = static_cast<uint16_t>(h);
      const float f = f16_to_f32(x);
      if (std::isnan(f)) {
        QVERIFY(std::isnan(f16_to_f32(f32_to_f16(f))));
        continue;
      }
      QCOMPARE(f32_to_f16(f), x);
    }
  }

  void f16_rounds_to_nearest_even() {
    QCOMPARE(f16_to_f32(f32_to_f16(1.0f)), 1.0f);
    QCOMPARE(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
    QVERIFY(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
    QCOMPARE(f16_to_f32(f32_to_f16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
    QCOMPARE(f16_to_f32(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
    // Smallest subnormal half.
    QCOMPARE(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  }

  void bf16_rounds_to_nearest_even() {
    QCOMPARE(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
    QCOMPARE(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
    QCOMPARE(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie -> even
    QCOMPARE(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))),
             1.0f + std::ldexp(1.0f, -6));
    QVERIFY(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  }

  void dtype_sizes() {
    QCOMPARE(*dtype_bytes(DType::kQ4_1, 64), int64_t{40});
    QCOMPARE(*dtype_bytes(DType::kQ6_K, 512), int64_t{420});
    QVERIFY(!dtype_bytes(DType::kQ4_K, 100).has_value());
    QCOMPARE(dtype_bits_per_element(DType::kQ4_1), 5.0);
    QCOMPARE(*dtype_from_ggml(30), DType::kBF16);
    QCOMPARE(*dtype_from_ggml(10), DType::kQ2_K);
    QCOMPARE(*dtype_from_ggml(11), DType::kQ3_K);
    QCOMPARE(*dtype_bytes(DType::kQ2_K, 512), int64_t{168});
    QCOMPARE(*dtype_bytes(DType::kQ3_K, 256), int64_t{110});
    QVERIFY(!dtype_from_ggml(23).has_value());  // iq4_xs: unsupported
    QCOMPARE(std::string(ggml_type_name(10)), std::string("q2_K"));
  }

  void byte_sizes_parse() {
    QCOMPARE(parse_byte_size("512MiB"), int64_t{512} << 20);
    QCOMPARE(parse_byte_size("2G"), int64_t{2} << 30);
    QCOMPARE(parse_byte_size("1.5 GiB"), int64_t{3} << 29);
    QCOMPARE(parse_byte_size("4096"), int64_t{4096});
    QCOMPARE(parse_byte_size("lots"), int64_t{-1});
    QCOMPARE(parse_byte_size("-1G"), int64_t{-1});
    QCOMPARE(format_bytes(1536.0 * 1024 * 1024), std::string("1.50 GiB"));
  }

  void utf8_prefix() {
    const std::string euro = "a\xe2\x82\xac";  // a€
    QCOMPARE(valid_utf8_prefix(euro), size_t{4});
    QCOMPARE(valid_utf8_prefix(euro.substr(0, 3)),
             size_t{1});                      // incomplete trailing char held back
    QVERIFY(!is_valid_utf8("\xc0\xaf"));      // overlong
    QVERIFY(!is_valid_utf8("\xed\xa0\x80"));  // surrogate
  }

  void thread_pool_covers_every_index_once() {
    ThreadPool pool(3);
    for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) QCOMPARE(h.load(), 1);
    }
  }

  void thread_pool_back_to_back_calls() {
    // Thousands of short calls in a row (a decode step's pattern) all complete and sum correctly,
    // including calls whose chunk count is below the pool size.
    ThreadPool pool(4);
    std::atomic<int64_t> total{0};
    int64_t expected = 0;
    for (int iter = 0; iter < 5000; ++iter) {
      const int64_t n = 1 + iter % 37;
      expected += n * (n - 1) / 2;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        int64_t local = 0;
        for (int64_t i = b; i < e; ++i) local += i;
        total += local;
      });
    }
    QCOMPARE(total.load(), expected);
  }

  void thread_pool_serializes_concurrent_callers() {
    ThreadPool pool(2);
    std::atomic<int64_t> total{0};
    auto caller = [&] {
      for (int i = 0; i < 500; ++i)
        pool.parallel_for(64, [&](int64_t b, int64_t e) { total += e - b; });
    };
    std::thread a(caller), b(caller);
    a.join();
    b.join();
    QCOMPARE(total.load(), int64_t{2 * 500 * 64});
  }

  void mapped_file_errors_name_the_file() {
    auto missing = MappedFile::open("/nonexistent/model.gguf");
    QVERIFY(!missing.is_ok());
    QCOMPARE(missing.status().code(), ErrorCode::kNotFound);
    QVERIFY(missing.status().message().find("/nonexistent/model.gguf") != std::string::npos);

    const QString path = QDir::temp().filePath("lathe_mapped_file_test.bin");
    {
      std::ofstream out(path.toStdString(), std::ios::binary);
      out << "GGUF1234";
    }
    auto f = MappedFile::open(path.toStdString());
    LATHE_QVERIFY_RESULT(f);
    QCOMPARE(f.value()->size(), size_t{8});
    QVERIFY(std::memcmp(f.value()->data(), "GGUF", 4) == 0);
    QFile::remove(path);
  }

  // What killed writers left ("<name>.tmp-<pid>[-<n>]" of a process that is gone) is removed by
  // the next write of the same file; a running writer's, another file's and odd names stay.
  void stale_temporaries_of_killed_writers_are_removed() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    QVERIFY(child > 0);
    ::waitpid(child, nullptr, 0);  // a pid that no longer runs
    const std::string base = dir.filePath("out.json").toStdString();
    const std::string dead = std::to_string(child), live = std::to_string(::getppid());
    auto touch = [](const std::string& p) { std::ofstream(p) << "half"; };
    touch(base + ".tmp-" + dead + "-3");
    QVERIFY(QDir().mkpath(QString::fromStdString(base + ".tmp-" + dead)));  // a model folder
    touch(base + ".tmp-" + dead + "/model.safetensors");
    touch(base + ".tmp-" + live + "-1");                                 // a writer at work
    touch(base + ".tmp-abc");                                            // not ours
    touch(dir.filePath("other.json.tmp-").toStdString() + dead + "-1");  // another file's
    LATHE_QVERIFY_OK(write_file_atomically(base, "new"));
    QVERIFY(!QFile::exists(QString::fromStdString(base + ".tmp-" + dead + "-3")));
    QVERIFY(!QFile::exists(QString::fromStdString(base + ".tmp-" + dead)));
    QVERIFY(QFile::exists(QString::fromStdString(base + ".tmp-" + live + "-1")));
    QVERIFY(QFile::exists(QString::fromStdString(base + ".tmp-abc")));
    QVERIFY(QFile::exists(dir.filePath("other.json.tmp-") + QString::fromStdString(dead + "-1")));
    std::ifstream in(base);
    std::string text;
    in >> text;
    QCOMPARE(text, std::string("new"));
    QVERIFY(remove_stale_temporaries(base).empty());  // nothing left to remove
  }

  // call_catching (status_guard.h): a result passes through; std::bad_alloc becomes kOutOfMemory,
  // any other exception kInternal, each message naming the call and what was thrown.
  void exceptions_become_errors_at_the_boundary() {
    const Result<int> seven = call_catching("the seven", []() -> Result<int> { return 7; });
    QVERIFY(seven.is_ok());
    QCOMPARE(seven.value(), 7);
    const Status passed =
        call_catching("the step", []() -> Status { return invalid_argument("bad input"); });
    QCOMPARE(static_cast<int>(passed.code()), static_cast<int>(ErrorCode::kInvalidArgument));
    QCOMPARE(passed.message(), std::string("bad input"));

    const Result<int> oom =
        call_catching("the step", []() -> Result<int> { throw std::bad_alloc(); });
    QCOMPARE(static_cast<int>(oom.status().code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(oom.status().message().find("the step ran out of host memory") == 0,
             oom.status().message().c_str());
    const Status thrown = call_catching(
        "creating the runner", []() -> Status { throw std::runtime_error("flashinfer: no plan"); });
    QCOMPARE(static_cast<int>(thrown.code()), static_cast<int>(ErrorCode::kInternal));
    QCOMPARE(thrown.message(), std::string("creating the runner threw flashinfer: no plan"));
    const Status odd = call_catching("the step", []() -> Status { throw 42; });
    QCOMPARE(static_cast<int>(odd.code()), static_cast<int>(ErrorCode::kInternal));
    QVERIFY(odd.message().find("not a std::exception") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(CoreTest)
#include "core_test.moc"

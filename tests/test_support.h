// Helpers shared by Lathe's Qt Test executables.
#pragma once

#include <QtTest>

#include <climits>
#include <cstdlib>
#include <string>

#include "engine/core/status.h"

namespace lathe::test {

// tests/fixtures/<relative>
inline std::string fixture_path(const std::string& relative) {
  const char* env = std::getenv("LATHE_TEST_DATA");
  return std::string(env != nullptr ? env : LATHE_TEST_DATA) + "/" + relative;
}

// The default model (SmolLM2-135M-Instruct Q4_1), fetched by scripts/fetch-default-model.sh.
std::string default_model_path();

// Whether the environment says a GPU must be there (LATHE_REQUIRE_GPU=1, set by the GPU run
// scripts): GPU tests then fail instead of skipping when the GPU, driver or plugin is missing.
inline bool gpu_required() {
  const char* v = std::getenv("LATHE_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// The factor on the tests' own wall-clock limits (how long to wait for work to finish, latency
// bounds): LATHE_TEST_TIME_SCALE, which scripts/sanitize.sh sets to 10 because ASan + UBSan code
// runs several times slower; 1 when unset, or not a number >= 1. Normal runs keep every limit as
// written.
inline double time_scale() {
  const char* v = std::getenv("LATHE_TEST_TIME_SCALE");
  if (v == nullptr) return 1.0;
  char* end = nullptr;
  const double f = std::strtod(v, &end);
  return end != v && f >= 1.0 && f <= 1000.0 ? f : 1.0;
}
// `ms` times time_scale(), for Qt's int milliseconds (QSignalSpy::wait, QTRY_*_WITH_TIMEOUT,
// QProcess::waitForFinished); at most INT_MAX. A negative `ms` (Qt's "no limit") stays as it is.
inline int scaled_ms(int ms) {
  if (ms < 0) return ms;
  const double v = static_cast<double>(ms) * time_scale();
  return v >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(v);
}

// Runs a program to completion: its exit code (-1 when it crashed or timed out, then err says
// "timed out"), stdout and stderr. The timeout is scaled (scaled_ms).
struct ProcessResult {
  int exit_code = -1;
  QString out, err;
};
ProcessResult run_process(const QString& program, const QStringList& args, int timeout_ms = 120000);

// Writes out_dir/config.json: config_dir's config.json with num_hidden_layers set to `layers` (a
// model of a real shape but of any size, for the memory checks; load it with LoadFormat::kDummy).
// Returns out_dir, or "" when a file could not be read or written.
std::string config_with_layers(const std::string& config_dir, const QString& out_dir, int layers);

}  // namespace lathe::test

// QVERIFY for Status / Result: fails with the error message.
// A GPU test without a usable GPU: skips (CI), or fails when LATHE_REQUIRE_GPU=1.
#define LATHE_GPU_MISSING(why)                                                      \
  do {                                                                              \
    const std::string lathe_why_text_ = (why);                                      \
    if (::lathe::test::gpu_required())                                              \
      QFAIL(("LATHE_REQUIRE_GPU=1 but no usable GPU: " + lathe_why_text_).c_str()); \
    QSKIP(lathe_why_text_.c_str());                                                 \
  } while (0)

#define LATHE_QVERIFY_OK(expr)                              \
  do {                                                      \
    const ::lathe::Status lathe_s_ = (expr);                \
    QVERIFY2(lathe_s_.is_ok(), lathe_s_.message().c_str()); \
  } while (0)
#define LATHE_QVERIFY_RESULT(res)                                    \
  do {                                                               \
    const auto& lathe_r_ = (res); /* evaluated once */               \
    QVERIFY2(lathe_r_.is_ok(), lathe_r_.status().message().c_str()); \
  } while (0)

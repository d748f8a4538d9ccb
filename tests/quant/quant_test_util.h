// Helpers of the quantization tests: random data, the Python tools' venv
// (scripts/fetch-quant-tools.sh) and running the scripts under scripts/quant/.
#pragma once

#include <QtTest>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"

namespace lathe::test {

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The venv's python (gguf-py + numpy), or "" when scripts/fetch-quant-tools.sh has not run.
inline std::string quant_venv_python() {
  std::string venv;
  if (const char* e = std::getenv("LATHE_QUANT_VENV"); e != nullptr && *e != '\0') {
    venv = e;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    venv = std::string(x) + "/lathe/venv-quant";
  } else {
    const char* home = std::getenv("HOME");
    venv = std::string(home != nullptr ? home : ".") + "/.cache/lathe/venv-quant";
  }
  const std::string py = venv + "/bin/python";
  std::error_code ec;
  return std::filesystem::exists(py, ec) ? py : std::string();
}

inline std::string quant_script(const std::string& name) {
  return std::string(LATHE_SOURCE_DIR) + "/scripts/quant/" + name;
}

inline ProcessResult run_python_script(const std::string& script, const QStringList& args,
                                       int timeout_ms = 120000) {
  return run_process(QString::fromStdString(quant_venv_python()),
                     QStringList{QString::fromStdString(quant_script(script))} + args, timeout_ms);
}

#define LATHE_SKIP_WITHOUT_QUANT_VENV()                                                           \
  do {                                                                                            \
    if (lathe::test::quant_venv_python().empty())                                                 \
      QSKIP("the Python quantization tools are not installed; run scripts/fetch-quant-tools.sh"); \
  } while (0)

}  // namespace lathe::test

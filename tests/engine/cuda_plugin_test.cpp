// The CUDA plugin loader (engine/runtime/cuda_plugin.h), without a GPU: the search order, the
// plugin of this build found in the build tree next to liblathe_engine.so, device selection through
// it, and fake plugins for every way loading can fail (missing CUDA library, other ABI, not a
// plugin) with the message the user gets.
#include <QtTest>

#include <filesystem>
#include <string>

#include "engine/runtime/cuda_plugin.h"
#include "engine/runtime/runner_factory.h"
#include "test_support.h"

using namespace lathe;
namespace cb = lathe::cuda_backend;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string folder_of(const std::string& file) {
  return std::filesystem::canonical(file).parent_path().string();
}

}  // namespace

class CudaPluginTest : public QObject {
  Q_OBJECT
 private slots:
  void override_is_the_only_candidate() {
    const auto paths = cb::search_paths("/opt/x/liblathe_cuda.so");
    QCOMPARE(paths.size(), size_t{1});
    QCOMPARE(paths[0], std::string("/opt/x/liblathe_cuda.so"));
  }

  void searches_next_to_the_engine_library_first() {
    const auto paths = cb::search_paths(nullptr);
    QVERIFY(!paths.empty());
    QCOMPARE(folder_of(LATHE_ENGINE_FILE) + "/liblathe_cuda.so", paths[0]);
  }

  void finds_this_builds_plugin_in_the_build_tree() {
    const cb::PluginStatus& p = cb::plugin();
    if (!cb::built()) {
      QCOMPARE(p.problem, cb::PluginProblem::kNotBuilt);
      QVERIFY(contains(p.message, "no CUDA backend"));
      return;
    }
    QVERIFY2(p.problem == cb::PluginProblem::kNone, p.message.c_str());
    QCOMPARE(folder_of(p.path), folder_of(LATHE_ENGINE_FILE));
    QVERIFY(p.api != nullptr);
  }

  void device_selection_goes_through_the_plugin() {
    DeviceConfig d;
    d.device = DeviceKind::kAuto;
    auto aut = select_device(d);
    LATHE_QVERIFY_RESULT(aut);
    std::string why;
    if (cb::usable(0, &why)) {
      QCOMPARE(aut->device, DeviceKind::kCuda);
      return;
    }
    QCOMPARE(aut->device, DeviceKind::kCpu);
    QVERIFY2(contains(aut->notice, why), aut->notice.c_str());  // the plugin's reason reaches it
    QCOMPARE(aut->is_fallback, cb::built());  // an unusable GPU build warns; CPU-only informs
    d.device = DeviceKind::kCuda;
    auto cuda = select_device(d);
    QVERIFY(!cuda.is_ok());
    QVERIFY2(contains(cuda.status().message(), why), cuda.status().message().c_str());
    QVERIFY(contains(cuda.status().message(), "--device cpu"));
    QVERIFY(!cb::properties(0).is_ok());
  }

  void loads_a_plugin_and_calls_it() {
    const cb::PluginStatus p = cb::load_file(FAKE_PLUGIN_OK);
    QVERIFY2(p.problem == cb::PluginProblem::kNone, p.message.c_str());
    std::string why;
    QVERIFY(!p.api->device_usable(3, &why));
    QCOMPARE(why, std::string("fake plugin: no device 3"));
    QCOMPARE(p.api->device_description(1), std::string("fake plugin device 1"));
  }

  void names_a_missing_cuda_library() {
    const cb::PluginStatus p = cb::load_file(FAKE_PLUGIN_NEEDS_RUNTIME);
    QCOMPARE(p.problem, cb::PluginProblem::kCannotLoad);
    QVERIFY(p.api == nullptr);
    QVERIFY2(contains(p.message, "libcublasLt_fake.so is missing; install"), p.message.c_str());
    QVERIFY2(contains(p.message, "NVIDIA"), p.message.c_str());
  }

  void rejects_another_abi() {
    const cb::PluginStatus p = cb::load_file(FAKE_PLUGIN_OTHER_ABI);
    QCOMPARE(p.problem, cb::PluginProblem::kCannotLoad);
    QVERIFY2(contains(p.message, "plugin ABI 9999"), p.message.c_str());
    QVERIFY2(contains(p.message, "lathe-cuda package of the same version"), p.message.c_str());
  }

  void rejects_a_library_without_the_entry_point() {
    const cb::PluginStatus p = cb::load_file(FAKE_RUNTIME);
    QCOMPARE(p.problem, cb::PluginProblem::kCannotLoad);
    QVERIFY2(contains(p.message, "is not a Lathe CUDA backend"), p.message.c_str());
  }

  void describes_other_load_errors() {
    const std::string m = cb::describe_load_error(
        "/usr/lib/lathe/liblathe_cuda.so",
        "/usr/lib/lathe/liblathe_cuda.so: undefined symbol: _ZN5lathe3fooEv");
    QVERIFY2(contains(m, "undefined symbol"), m.c_str());
    QVERIFY2(contains(m, "same version as lathe"), m.c_str());
    const std::string cudart = cb::describe_load_error(
        "/p/liblathe_cuda.so",
        "libcudart.so.13: cannot open shared object file: No such file or directory");
    QVERIFY2(contains(cudart, "libcudart.so.13 is missing; install the NVIDIA") ||
                 contains(cudart, "libcudart.so.13 is missing; install NVIDIA"),
             cudart.c_str());
  }
};

QTEST_GUILESS_MAIN(CudaPluginTest)
#include "cuda_plugin_test.moc"

// The official `openai` Python SDK (from PyPI) drives `lathe serve` (default model, CPU):
// openai_sdk_driver.py checks models.list, chat non-streaming and streaming, completions, logprobs,
// and that a wrong API key raises AuthenticationError (and n=17 BadRequestError, an unknown model
// NotFoundError); openai_features_driver.py checks n > 1, logit_bias, structured output, tool
// calls and echo. The SDK goes into a virtual environment of the test's own (LATHE_TEST_VENV in the
// build tree), created and filled with `pip install openai jsonschema` (jsonschema validates the
// structured output) on the first run and reused after.
#include <QtTest>

#include <filesystem>

#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

class OpenAiSdkTest : public QObject {
  Q_OBJECT

  QString venv_python() { return env_path("LATHE_TEST_VENV") + "/bin/python"; }

  // Creates the venv and installs the SDK unless it is already there.
  void ensure_sdk() {
    const QString venv = env_path("LATHE_TEST_VENV");
    QVERIFY2(!venv.isEmpty(), "LATHE_TEST_VENV is not set");
    std::string out;
    if (QFile::exists(venv_python()) &&
        run_program(venv_python(), {"-c", "import openai, jsonschema"}, 60000, &out) == 0)
      return;
    int code = run_program("python3", {"-m", "venv", venv}, 300000, &out);
    QVERIFY2(code == 0, ("python3 -m venv failed (install python3-venv): " + out).c_str());
    code =
        run_program(venv + "/bin/pip",
                    {"install", "--quiet", "--disable-pip-version-check", "openai", "jsonschema"},
                    600000, &out);
    QVERIFY2(code == 0,
             ("pip install openai failed (the test needs network access to PyPI): " + out).c_str());
  }

 private slots:
  void sdk_drives_the_server() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    QVERIFY2(!lathe_binary().isEmpty(), "LATHE_BIN is not set");
    ensure_sdk();
    BackgroundProcess serve(QDir::tempPath() + "/lathe_openai_sdk_serve.log");
    int port = 0;
    QVERIFY2(
        start_lathe_serve(serve, &port, {"--api-key", "sdk-test-key", "--max-model-len", "2048"}),
        serve.log().c_str());
    std::string out;
    const int code = run_program(venv_python(),
                                 {server_tests_dir() + "/openai_sdk_driver.py",
                                  QString("http://127.0.0.1:%1").arg(port), "sdk-test-key"},
                                 600000, &out);
    qInfo("%s", out.c_str());
    QVERIFY2(code == 0, (out + "\n--- server log ---\n" + serve.log()).c_str());
    QVERIFY(out.find("all checks passed") != std::string::npos);
    serve.terminate();
    QCOMPARE(serve.wait(15000), 0);
  }

  // openai_features_driver.py: n > 1, logit_bias, structured output, tool calls, echo.
  void sdk_drives_the_api_features() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    QVERIFY2(!lathe_binary().isEmpty(), "LATHE_BIN is not set");
    ensure_sdk();
    BackgroundProcess serve(QDir::tempPath() + "/lathe_openai_features_serve.log");
    int port = 0;
    QVERIFY2(start_lathe_serve(serve, &port, {"--api-key", "k", "--max-model-len", "2048"}),
             serve.log().c_str());
    std::string out;
    const int code = run_program(venv_python(),
                                 {server_tests_dir() + "/openai_features_driver.py",
                                  QString("http://127.0.0.1:%1").arg(port), "k"},
                                 800000, &out);
    qInfo("%s", out.c_str());
    QVERIFY2(code == 0, (out + "\n--- server log ---\n" + serve.log()).c_str());
    QVERIFY(out.find("all checks passed") != std::string::npos);
    serve.terminate();
    QCOMPARE(serve.wait(15000), 0);
  }
};

QTEST_GUILESS_MAIN(OpenAiSdkTest)
#include "openai_sdk_test.moc"

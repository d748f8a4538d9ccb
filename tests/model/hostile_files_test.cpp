// Hostile files as a new user would meet them (docs/RELIABILITY.md): each is refused with a clear
// error within seconds and bounded memory. Every case runs in a forked child, so its peak RSS is
// its own (wait4's rusage) and a crash or a hang fails the case instead of the whole test.
#include <QtTest>

#include <QTemporaryDir>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>

#include "engine/model/gguf_file.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors_file.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer_loader.h"
#include "test_support.h"

using namespace lathe;

namespace {

struct Outcome {
  bool exited = false;   // the child ended normally (no crash, no kill)
  bool refused = false;  // the call returned an error
  std::string message;   // its message
  double seconds = 0;    // wall time of the call
  double peak_mib = 0;   // the child's peak RSS
};

// Runs `call` (returns the error message, or "" when it succeeded) in a child process.
Outcome run_isolated(const std::function<std::string()>& call, int timeout_s = 60) {
  int fds[2];
  if (::pipe(fds) != 0) qFatal("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(static_cast<unsigned>(timeout_s));  // a hang ends the child (the case fails)
    const auto t0 = std::chrono::steady_clock::now();
    const std::string m = call();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string out = std::to_string(s) + "\n" + (m.empty() ? "" : "E" + m);
    (void)!::write(fds[1], out.data(), out.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  Outcome o;
  o.exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  o.peak_mib = ru.ru_maxrss / 1024.0;
  const size_t nl = out.find('\n');
  if (nl != std::string::npos) {
    o.seconds = std::atof(out.substr(0, nl).c_str());
    o.refused = out.size() > nl + 1 && out[nl + 1] == 'E';
    if (o.refused) o.message = out.substr(nl + 2);
  }
  return o;
}

void report(const char* what, const Outcome& o) {
  qInfo("%s: %s in %.2f s, peak RSS %.0f MiB: %s", what, o.refused ? "refused" : "accepted",
        o.seconds, o.peak_mib, o.message.c_str());
}

void put_u32(std::string& s, uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}
void put_u64(std::string& s, uint64_t v) {
  s.append(reinterpret_cast<const char*>(&v), 8);
}
void put_str(std::string& s, const std::string& v) {
  put_u64(s, v.size());
  s += v;
}

// A GGUF v3 file with general.architecture = llama and one f32 tensor of dims `ne`, whose data
// section holds `data_bytes` bytes.
std::string gguf_with_tensor(const std::vector<uint64_t>& ne, uint32_t ggml_type,
                             size_t data_bytes) {
  std::string s = "GGUF";
  put_u32(s, 3);
  put_u64(s, 1);  // tensors
  put_u64(s, 1);  // metadata
  put_str(s, "general.architecture");
  put_u32(s, 8);  // string
  put_str(s, "llama");
  put_str(s, "blk.0.attn_q.weight");
  put_u32(s, static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) put_u64(s, d);
  put_u32(s, ggml_type);
  put_u64(s, 0);  // offset
  s.resize((s.size() + 31) / 32 * 32, '\0');
  s.append(data_bytes, '\0');
  return s;
}

void write_file(const QString& path, const std::string& bytes) {
  std::ofstream out(path.toStdString(), std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  QVERIFY(out.good());
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 10.0;
#else
constexpr double kSanitizerSlowdown = 1.0;
#endif

class HostileFilesTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

  void expect_refused(const char* what, const Outcome& o, const std::string& needle, double max_s,
                      double max_mib) {
    report(what, o);
    QVERIFY2(o.exited, what);
    QVERIFY2(o.refused, what);
    QVERIFY2(o.message.find(needle) != std::string::npos, o.message.c_str());
    // Under AddressSanitizer (scripts/sanitize.sh) code runs several times slower and keeps shadow
    // memory: the bounds are the release build's, scaled.
    QVERIFY2(o.seconds < max_s * kSanitizerSlowdown, what);
    QVERIFY2(o.peak_mib < max_mib * kSanitizerSlowdown, what);
  }

 private slots:
  void gguf_with_a_2_62_element_tensor() {
    const QString path = m_dir.filePath("huge_tensor.gguf");
    // 2^31 x 2^31 f32: 2^62 elements, 2^64 bytes (does not fit an int64 byte count either).
    write_file(path, gguf_with_tensor({1ull << 31, 1ull << 31}, 0, 64));
    Outcome o = run_isolated([&] { return GgufFile::open(path.toStdString()).status().message(); });
    expect_refused("GGUF 2^62 f32 elements", o, "huge_tensor.gguf", 2.0, 256);
    // 2^62 elements of Q4_0 (2^62 / 32 * 18 bytes: fits in 64 bits, not in the file).
    write_file(path, gguf_with_tensor({1ull << 62}, 2, 64));
    o = run_isolated([&] { return GgufFile::open(path.toStdString()).status().message(); });
    expect_refused("GGUF 2^62 q4_0 elements", o, "huge_tensor.gguf", 2.0, 256);
    // The whole loader (as `lathe inspect` / the Studio would open it).
    o = run_isolated([&] {
      LoadOptions opts;
      opts.load_tokenizer = false;
      return load_model(path.toStdString(), opts).status().message();
    });
    expect_refused("load_model(GGUF 2^62 elements)", o, "huge_tensor.gguf", 2.0, 256);
  }

  void recursive_chat_template() {
    const std::vector<ChatMessage> messages = {{"user", "hi", ""}};
    struct Case {
      const char* what;
      std::string source;
    };
    const std::vector<Case> cases = {
        {"self-recursive macro", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"},
        {"branching recursion",
         "{% macro f(n) %}{% for i in range(50) %}{{ f(n + 1) }}{% endfor %}{% endmacro %}"
         "{{ f(0) }}"},
        {"mutual recursion",
         "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"},
        {"exponential output",
         "{% set s = namespace(x='ab') %}{% for i in range(64) %}"
         "{% set s.x = s.x ~ s.x %}{% endfor %}{{ s.x }}"},
    };
    for (const Case& c : cases) {
      const Outcome o = run_isolated([&] {
        Result<ChatTemplate> t = ChatTemplate::compile(c.source);
        if (!t.is_ok()) return t.status().message();
        Result<std::string> r = t->render(messages, {});
        return r.is_ok() ? std::string() : r.status().message();
      });
      expect_refused(c.what, o, "", 5.0, 512);
      QVERIFY2(o.message.find("chat template") != std::string::npos ||
                   o.message.find("limit") != std::string::npos,
               o.message.c_str());
    }
  }

  void tokenizer_json_with_ten_million_merges() {
    const QString folder = m_dir.filePath("merges");
    QVERIFY(QDir().mkpath(folder));
    {
      // A byte-level BPE vocabulary of 4 tokens and 10,000,000 merges "a b" (about 70 MB).
      std::ofstream out((folder + "/tokenizer.json").toStdString(), std::ios::binary);
      out << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, )"
          << R"("merges": [)";
      std::string chunk;
      for (int i = 0; i < 1000; ++i) chunk += "\"a b\",";
      for (int i = 0; i < 10000; ++i) out << chunk;
      out << R"("a b"]}, "pre_tokenizer": {"type": "ByteLevel"}})";
      QVERIFY(out.good());
    }
    const Outcome o =
        run_isolated([&] { return load_hf_tokenizer(folder.toStdString()).status().message(); });
    expect_refused("tokenizer.json with 10M merges", o, "merges", 10.0, 1024);
  }

  void safetensors_with_a_100_mb_header() {
    const QString path = m_dir.filePath("big_header.safetensors");
    // A header length of 100 MB + 1 in a file that really is that long (sparse: no disk used).
    {
      std::string head(8, '\0');
      const uint64_t n = 100'000'001;
      std::memcpy(head.data(), &n, 8);
      write_file(path, head + "{");
      QVERIFY(::truncate(path.toStdString().c_str(), 8 + n + 16) == 0);
    }
    Outcome o =
        run_isolated([&] { return SafetensorsFile::open(path.toStdString()).status().message(); });
    expect_refused("safetensors header of 100 MB", o, "big_header.safetensors", 2.0, 256);
    // A header length far past the file's end.
    {
      std::string head(8, '\0');
      const uint64_t n = 1ull << 62;
      std::memcpy(head.data(), &n, 8);
      write_file(path, head + "{}");
    }
    o = run_isolated([&] { return SafetensorsFile::open(path.toStdString()).status().message(); });
    expect_refused("safetensors header length 2^62", o, "big_header.safetensors", 2.0, 256);
  }
};

QTEST_GUILESS_MAIN(HostileFilesTest)
#include "hostile_files_test.moc"

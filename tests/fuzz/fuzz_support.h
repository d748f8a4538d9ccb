// Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target defines libFuzzer's entry
// point, LLVMFuzzerTestOneInput(data, size); it is built two ways (tests/fuzz/CMakeLists.txt):
// with clang's -fsanitize=fuzzer (the `fuzz` preset, scripts/fuzz.sh) and, in every test build,
// with replay_main.cpp, which feeds it each file of its checked-in corpus (a CTest).
//
// An entry point returns 0 for every input; a bug shows as a crash, a sanitizer report, an
// uncaught exception or a failed LATHE_FUZZ_CHECK (which aborts with the condition).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#define LATHE_FUZZ_CHECK(cond)                                           \
  do {                                                                   \
    if (!(cond)) ::lathe::fuzz::check_failed(#cond, __FILE__, __LINE__); \
  } while (0)

namespace lathe::fuzz {

[[noreturn]] void check_failed(const char* cond, const char* file, int line);

// Bytes as a file the readers can open by path: an anonymous in-memory file (memfd), reachable
// as /proc/self/fd/N while this object lives.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size);
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A folder of this process's own under $TMPDIR (or /tmp), emptied by clear(); removed at exit.
const std::string& scratch_folder();
void clear_scratch_folder();
void write_scratch_file(const std::string& name, std::string_view bytes);

// Splits `data` as [u32 little-endian n][n bytes][rest]; n is clamped to what is there.
void split_length_prefixed(const uint8_t* data, size_t size, std::string_view* first,
                           std::string_view* rest);

}  // namespace lathe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

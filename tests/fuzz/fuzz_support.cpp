#include "tests/fuzz/fuzz_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace lathe::fuzz {

void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, cond);
  std::abort();
}

MemoryFile::MemoryFile(const uint8_t* data, size_t size) {
  fd_ = ::memfd_create("lathe-fuzz", 0);
  if (fd_ < 0) check_failed("memfd_create", __FILE__, __LINE__);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, data + done, size - done);
    if (n <= 0) check_failed("write to memfd", __FILE__, __LINE__);
    done += static_cast<size_t>(n);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemoryFile::~MemoryFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

struct Scratch {
  std::string path;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    path = (fs::path(tmp && *tmp ? tmp : "/tmp") / ("lathe-fuzz-" + std::to_string(::getpid())))
               .string();
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

}  // namespace

const std::string& scratch_folder() {
  return scratch().path;
}

void clear_scratch_folder() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(scratch_folder(), ec))
    fs::remove_all(entry.path(), ec);
}

void write_scratch_file(const std::string& name, std::string_view bytes) {
  std::ofstream out(fs::path(scratch_folder()) / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) check_failed("write scratch file", __FILE__, __LINE__);
}

void split_length_prefixed(const uint8_t* data, size_t size, std::string_view* first,
                           std::string_view* rest) {
  const char* p = reinterpret_cast<const char*>(data);
  if (size < 4) {
    *first = {};
    *rest = std::string_view(p, size);
    return;
  }
  uint64_t n = uint64_t(data[0]) | uint64_t(data[1]) << 8 | uint64_t(data[2]) << 16 |
               uint64_t(data[3]) << 24;
  if (n > size - 4) n = size - 4;
  *first = std::string_view(p + 4, n);
  *rest = std::string_view(p + 4 + n, size - 4 - n);
}

}  // namespace lathe::fuzz

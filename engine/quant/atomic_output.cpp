#include "engine/quant/atomic_output.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/core/atomic_file.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string os_error() {
  return std::strerror(errno);
}

fs::path parent_of(const std::string& path) {
  const fs::path p = fs::absolute(fs::path(path));
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

}  // namespace

Status check_output_path(const std::string& path, bool force) {
  if (path.empty()) return invalid_argument("no output path given");
  std::error_code ec;
  if (fs::exists(path, ec) && !force)
    return invalid_argument(path +
                            " exists; pass --force to replace it, or choose another output name");
  const fs::path parent = parent_of(path);
  if (!fs::is_directory(parent, ec))
    return not_found(parent.string() + ": the output's folder does not exist; create it first");
  if (::access(parent.c_str(), W_OK) != 0)
    return io_error(parent.string() + ": cannot write in the output's folder: " + os_error());
  return Status();
}

Status check_free_space(const std::string& path, int64_t bytes) {
  struct statvfs st {};
  if (::statvfs(parent_of(path).c_str(), &st) != 0) return Status();
  const long double free_bytes =
      static_cast<long double>(st.f_bavail) * static_cast<long double>(st.f_frsize);
  if (free_bytes < static_cast<long double>(bytes))
    return resource_exhausted(strformat(
        "%s: not enough disk space: the output needs about %s but the file system has %s free; "
        "free some space or write elsewhere",
        parent_of(path).string().c_str(), format_bytes(static_cast<double>(bytes)).c_str(),
        format_bytes(static_cast<double>(free_bytes)).c_str()));
  return Status();
}

Result<AtomicOutput> AtomicOutput::begin(const std::string& final_path, bool is_folder,
                                         bool force) {
  LATHE_RETURN_IF_ERROR(check_output_path(final_path, force));
  AtomicOutput out;
  out.final_ = final_path;
  out.temp_ = final_path + ".tmp-" + std::to_string(::getpid());
  out.is_folder_ = is_folder;
  out.force_ = force;
  std::error_code ec;
  fs::remove_all(out.temp_, ec);  // a leftover of a crashed run with the same pid
  // Leftovers of killed runs (possibly gigabytes of a half-written model), said once each.
  for (const std::string& stale : remove_stale_temporaries(final_path))
    log_info("removed the leftover of an interrupted run: " + stale);
  if (is_folder && !fs::create_directory(out.temp_, ec))
    return io_error(out.temp_ + ": cannot create the folder: " + ec.message());
  return out;
}

AtomicOutput::AtomicOutput(AtomicOutput&& o) noexcept
    : final_(std::move(o.final_)),
      temp_(std::move(o.temp_)),
      is_folder_(o.is_folder_),
      force_(o.force_),
      committed_(o.committed_) {
  o.committed_ = true;  // the moved-from object owns nothing
  o.temp_.clear();
}

AtomicOutput::~AtomicOutput() {
  if (committed_ || temp_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

Status AtomicOutput::commit() {
  if (committed_) return internal_error("output committed twice");
  std::error_code ec;
  if (is_folder_) {
    for (const auto& entry : fs::recursive_directory_iterator(temp_, ec))
      if (entry.is_regular_file()) LATHE_RETURN_IF_ERROR(fsync_path(entry.path().string(), false));
    LATHE_RETURN_IF_ERROR(fsync_path(temp_, true));
  } else {
    LATHE_RETURN_IF_ERROR(fsync_path(temp_, false));
  }
  // rename() replaces a file atomically but not a non-empty folder: move the old one aside first.
  std::string old;
  if (force_ && fs::exists(final_, ec)) {
    old = final_ + ".old-" + std::to_string(::getpid());
    fs::remove_all(old, ec);
    if (::rename(final_.c_str(), old.c_str()) != 0)
      return io_error(final_ + ": cannot move the existing output aside: " + os_error());
  }
  if (::rename(temp_.c_str(), final_.c_str()) != 0) {
    const std::string err = os_error();
    if (!old.empty()) (void)::rename(old.c_str(), final_.c_str());
    return io_error(final_ + ": cannot rename " + temp_ + " into place: " + err);
  }
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
  return fsync_path(parent_of(final_).string(), true);
}

Result<FileWriter> FileWriter::create(const std::string& path) {
  FileWriter w;
  w.path_ = path;
  w.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) return io_error(path + ": cannot create the file: " + os_error());
  return w;
}

FileWriter::FileWriter(FileWriter&& o) noexcept
    : fd_(o.fd_), pos_(o.pos_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

FileWriter& FileWriter::operator=(FileWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    pos_ = o.pos_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileWriter::write(const void* data, size_t n) {
  if (fd_ < 0) return internal_error(path_ + ": write after close");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSPC)
        return resource_exhausted(path_ + ": the disk is full; free some space and run again");
      return io_error(path_ + ": write failed: " + os_error());
    }
    p += w;
    n -= static_cast<size_t>(w);
    pos_ += static_cast<uint64_t>(w);
  }
  return Status();
}

Status FileWriter::write_zeros(size_t n) {
  static const std::vector<char> zeros(4096, 0);
  while (n > 0) {
    const size_t chunk = std::min(n, zeros.size());
    LATHE_RETURN_IF_ERROR(write(zeros.data(), chunk));
    n -= chunk;
  }
  return Status();
}

Status FileWriter::close(bool sync) {
  if (fd_ < 0) return Status();
  const int rc = sync ? ::fsync(fd_) : 0;
  const std::string err = rc != 0 ? os_error() : "";
  const int crc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return io_error(path_ + ": fsync failed: " + err);
  if (crc != 0) return io_error(path_ + ": close failed: " + os_error());
  return Status();
}

Status write_small_file(const std::string& path, const std::string& contents) {
  LATHE_ASSIGN_OR_RETURN(FileWriter w, FileWriter::create(path));
  LATHE_RETURN_IF_ERROR(w.write(contents.data(), contents.size()));
  return w.close();
}

}  // namespace lathe

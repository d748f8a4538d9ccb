#include "engine/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "engine/core/strings.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string parent_folder(const std::string& path) {
  const fs::path p = fs::absolute(fs::path(path));
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

Status os_failure(const std::string& what, int err) {
  std::string m = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT)
    return resource_exhausted(m +
                              "; free some disk space and try again (the previous file is "
                              "unchanged)");
  return io_error(m);
}

// The pid in "<name>.tmp-<pid>" or "<name>.tmp-<pid>-<n>" (`rest` is what follows ".tmp-"), or
// -1 when `rest` is not of that form.
long temporary_pid(std::string_view rest) {
  const size_t dash = rest.find('-');
  const std::string_view pid = rest.substr(0, dash);
  const std::string_view n =
      dash == std::string_view::npos ? std::string_view() : rest.substr(dash + 1);
  auto digits = [](std::string_view v) {
    return !v.empty() && v.size() <= 10 &&
           v.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (!digits(pid) || (dash != std::string_view::npos && !digits(n))) return -1;
  return std::stol(std::string(pid));
}

}  // namespace

std::vector<std::string> remove_stale_temporaries(const std::string& path) {
  std::vector<std::string> removed;
  const fs::path target = fs::absolute(fs::path(path));
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code ec;
  for (fs::directory_iterator it(target.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = temporary_pid(std::string_view(name).substr(prefix.size()));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (!rm) removed.push_back(it->path().string());
  }
  return removed;
}

Status fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) {
    if (directory) return Status();
    return os_failure(path + ": cannot open to sync", errno);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !directory) return os_failure(path + ": fsync failed", err);
  return Status();
}

Status write_file_atomically(const std::string& path, std::string_view contents) {
  static std::atomic<int> counter{0};
  remove_stale_temporaries(path);
  const std::string temp =
      strformat("%s.tmp-%d-%d", path.c_str(), static_cast<int>(::getpid()), counter.fetch_add(1));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_failure(path + ": cannot create " + temp, errno);
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(temp.c_str());
    return os_failure(path + ": " + what, err);
  };
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return os_failure(path + ": close failed", err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return os_failure(path + ": cannot rename " + temp + " into place", err);
  }
  return fsync_path(parent_folder(path), true);
}

Result<std::string> set_aside_corrupt_file(const std::string& path) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  std::string target = path + ".corrupt-" + stamp;
  std::error_code ec;
  for (int n = 1; fs::exists(target, ec) && n < 1000; ++n)
    target = path + ".corrupt-" + stamp + "-" + std::to_string(n);
  if (::rename(path.c_str(), target.c_str()) != 0)
    return os_failure(path + ": cannot rename the unreadable file aside", errno);
  return target;
}

}  // namespace lathe

// Durable, all-or-nothing output: a file or folder is written under a temporary name next to its
// final name ("<out>.tmp-<pid>"), every file is fsynced, and only then renamed into place, so an
// interrupted or failed run leaves nothing under the output name (and the temporary is removed
// when the AtomicOutput is destroyed without commit()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/core/status.h"

namespace lathe {

// Checks, before any work starts, that `path` can be written: it must not exist unless `force`
// (kInvalidArgument: "OUT exists; pass --force to replace it, or choose another output name"), and
// its parent folder must exist (kNotFound).
Status check_output_path(const std::string& path, bool force);

// kResourceExhausted when the file system of `path`'s parent folder has less than `bytes` free
// (the message gives both sizes); the check is skipped (ok) when the free space cannot be read.
Status check_free_space(const std::string& path, int64_t bytes);

class AtomicOutput {
 public:
  // Reserves the temporary name for `final_path` (a folder when is_folder: it is created).
  // check_output_path() first.
  static Result<AtomicOutput> begin(const std::string& final_path, bool is_folder, bool force);

  AtomicOutput(AtomicOutput&& other) noexcept;
  AtomicOutput& operator=(AtomicOutput&&) = delete;
  AtomicOutput(const AtomicOutput&) = delete;
  ~AtomicOutput();  // removes the temporary unless committed

  // Where to write: the temporary file, or the temporary folder (write its files inside).
  const std::string& temp_path() const { return temp_; }
  const std::string& final_path() const { return final_; }

  // fsyncs the temporary (every file of a folder, and the folder), renames it to the final name
  // (replacing an existing one when `force` was given), and fsyncs the parent folder.
  Status commit();

 private:
  AtomicOutput() = default;
  std::string final_;
  std::string temp_;
  bool is_folder_ = false;
  bool force_ = false;
  bool committed_ = false;
};

// A file opened for writing with errors as values; every write reports a full disk or an I/O
// error naming the file.
class FileWriter {
 public:
  static Result<FileWriter> create(const std::string& path);
  FileWriter(FileWriter&& other) noexcept;
  FileWriter& operator=(FileWriter&& other) noexcept;
  FileWriter(const FileWriter&) = delete;
  ~FileWriter();

  Status write(const void* data, size_t n);
  Status write_zeros(size_t n);
  uint64_t position() const { return pos_; }
  // fsync (unless `sync` is false: scratch files, e.g. benchmark inputs, whose loss in a crash
  // costs nothing) and close; the destructor closes without syncing.
  Status close(bool sync = true);
  const std::string& path() const { return path_; }

 private:
  FileWriter() = default;
  int fd_ = -1;
  uint64_t pos_ = 0;
  std::string path_;
};

// Writes a whole small file (configs, tokenizer files) through FileWriter.
Status write_small_file(const std::string& path, const std::string& contents);

}  // namespace lathe

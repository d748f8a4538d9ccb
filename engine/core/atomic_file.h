// Crash-safe small files: every file Lathe writes that a user cares about (benchmark results,
// quantized models through engine/quant/atomic_output.h) is written under a temporary name in the
// same folder, fsynced, renamed over the final name and the folder fsynced, so a crash, a kill or
// a full disk at any point leaves either the previous file or the new one, never a torn mix.
// (The Studio's conversations, presets and settings go through Qt's QSaveFile / QSettings, which
// follow the same protocol; tests/ui/crash_safety_test.cpp kills writers of each.)
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

// fsync of a file, or of a folder (for a rename to be durable). A folder's fsync failure is
// ignored (some file systems refuse it); a file's is kIoError naming it.
Status fsync_path(const std::string& path, bool directory);

// Replaces (or creates) `path` with `contents` atomically (see the file comment). The temporary
// is "<path>.tmp-<pid>-<n>"; it is removed when any step fails, and stale ones of killed writers
// are removed first (remove_stale_temporaries). Errors (kIoError, or
// kResourceExhausted for a full disk) name the file and the OS reason; the previous file is then
// untouched.
Status write_file_atomically(const std::string& path, std::string_view contents);

// Removes what killed writers of `path` left next to it: "<name>.tmp-<pid>" and
// "<name>.tmp-<pid>-<n>" (files, or folders of a quantized model) whose process <pid> no longer
// runs. A temporary of a running process (a writer at work) is kept. Returns the removed paths;
// what cannot be removed is left, silently (the next write tries again).
std::vector<std::string> remove_stale_temporaries(const std::string& path);

// Moves a file that could not be read out of the way, as "<path>.corrupt-<YYYYmmdd-HHMMSS>"
// (plus "-<n>" if that exists), so the reader can go on, nothing is lost, and the user can look
// at it. Returns the new name.
Result<std::string> set_aside_corrupt_file(const std::string& path);

}  // namespace lathe

// Reading a whole (small) file into memory: configs, JSON sidecars, tokenizer files. Model weights
// are memory-mapped instead (mapped_file.h).
#pragma once

#include <string>

#include "engine/core/status.h"

namespace lathe {

// The file's bytes. Errors (kIoError) name the file: "<path>: cannot open the file for reading",
// "<path>: read failed".
Result<std::string> read_file(const std::string& path);

}  // namespace lathe

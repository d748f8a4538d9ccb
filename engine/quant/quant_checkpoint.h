// The resumable work folder of a calibrated `lathe quantize` run (gptq, awq): "<out>.partial/",
// next to the output. Each finished block is saved there, so a run that is interrupted (Ctrl-C, a
// crash, a full disk, a killed process) continues from its last finished block when the same
// command is run again, and writes exactly the output an uninterrupted run writes.
//
//   manifest.json   {"format": "lathe-quantize-checkpoint", "version": 1, "job": {...},
//                    "finished_layers": F, "state": "state.F.bin"}
//                   `job` is the run's identity (quant_job_identity.h): the source files' sizes
//                   and times, the scheme and its flags, a hash of the calibration tokens; a run
//                   whose job differs refuses the folder and names the fields that differ.
//   blk.L.bin       block L's result (CalibratedBlock: codes, scales, zero points, g_idx of its
//                   seven linears, the float tensors AWQ changed, notes, errors), L < F
//   state.F.bin     the calibration hidden states entering block F ([rows, hidden] float32)
//
// Every file is written under a temporary name, fsynced and renamed; the manifest is written after
// the block and state files it names, and the previous state is removed after it, so the folder is
// consistent after a crash at any point. Binary files start with a magic and a version and end
// with a 64-bit FNV-1a checksum of what precedes it; a damaged one is an error that names the file
// and says to pass --restart.
//
// Cost: a block file is about the block's quantized size (4-bit codes packed two to a byte); a
// state file is rows x hidden x 4 bytes (128 x 512 tokens: 151 MB for SmolLM2's 576, 1 GiB for an
// 8B model's 4096), written once per block and at most two kept at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"
#include "engine/quant/calibrated_quantizer.h"

namespace lathe {

class QuantCheckpoint {
 public:
  // "<output>.partial".
  static std::string folder_for(const std::string& output);

  // Opens the work folder of `output` for the run `job`. No folder: a fresh checkpoint (no block
  // finished; the folder is created by the first save()). `restart`: an existing folder is removed
  // first. Errors: a manifest that cannot be read (kCorruptFile) or that belongs to another job
  // (kInvalidArgument, naming the fields that differ), each saying to pass --restart.
  static Result<QuantCheckpoint> open(const std::string& output, const nlohmann::ordered_json& job,
                                      bool restart);

  const std::string& folder() const { return folder_; }
  // Blocks 0 .. finished_layers() - 1 are saved.
  int64_t finished_layers() const { return finished_; }

  // Block `layer` (< finished_layers()) as it was saved. kCorruptFile when damaged.
  Result<CalibratedBlock> read_block(int64_t layer) const;
  // The hidden states entering block finished_layers(). kCorruptFile when damaged.
  Result<std::vector<float>> read_state() const;

  // Saves block `layer` (== finished_layers()) and the state entering `layer + 1`, then the
  // manifest; finished_layers() becomes layer + 1.
  Status save(int64_t layer, const CalibratedBlock& block, const std::vector<float>& state);

  // Removes the folder (after the output is committed).
  Status remove();

 private:
  QuantCheckpoint() = default;
  Status write_manifest() const;
  std::string folder_;
  nlohmann::ordered_json job_;
  int64_t finished_ = 0;
};

// Serialization of one block (the body of blk.L.bin, without the checksum framing), exposed for
// tests: decode(encode(b)) == b.
std::string encode_calibrated_block(const CalibratedBlock& b);
Result<CalibratedBlock> decode_calibrated_block(const std::string& bytes, const std::string& what);

}  // namespace lathe

// The backend-neutral contract of one step's ModelInput (model_io.h), checked by every backend
// before it touches memory: what the kernels index with must be in range.
#pragma once

#include <cstdint>

#include "engine/core/status.h"
#include "engine/runtime/model_io.h"

namespace lathe {

// The KV cache and vocabulary a step runs against.
struct ModelInputBounds {
  int32_t num_blocks = 0;   // blocks in the KV cache
  int32_t block_size = 16;  // positions per block
  int64_t vocab_size = 0;
};

// Checks: at least one token and one sequence; token_ids, positions and slot_mapping of one length;
// query_start from 0 to num_tokens with num_seqs + 1 entries, each sequence with >= 1 query token
// and a context (seq_lens) at least that long; block_tables of num_seqs rows of max_blocks_per_seq,
// covering each context with block ids inside the cache; positions following from seq_lens; slots
// (>= 0) matching the block table, negative ones not written; token ids inside the vocabulary;
// sample_seqs ascending indices of scheduled sequences; sample_counts empty or one count per
// sampled sequence, each in [1, its query length]; one sampling row per sampled row. Every error
// names the offending sequence or token. `total_pages` (optional) receives the number of KV pages
// the step references (the sum over sequences of ceil(seq_len / block_size)).
Status check_model_input(const ModelInput& in, const ModelInputBounds& bounds,
                         int64_t* total_pages = nullptr);

}  // namespace lathe

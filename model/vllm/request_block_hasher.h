// RequestBlockHasher: vLLM's get_request_block_hasher — hashes the full blocks of a request that
// have no hash yet — and generate_block_hash_extra_keys, the per-block extra keys.
//
// Block i covers tokens [s, e) = [i*B, (i+1)*B) and hashes (parent, tokens[s:e], extra_keys)
// with parent = hash of block i-1 (NONE_HASH for block 0). extra_keys is the tuple
//   LoRA name (every block of a LoRA request)
//   + identifiers of the mm inputs the block overlaps
//   + cache salt (only the block with s == 0)
// or None when empty. The mm walk starts at index `curr_mm_idx` and carries it from block to
// block: an input [o, o+l) is added if e > o and not s > o+l (so a block starting exactly at
// o+l still includes it); the walk advances past an input once e >= o+l. A hasher call that
// starts at s > 0 (blocks completed by appended tokens) starts the walk at -1, the LAST input:
//
//   mm input X = [16, 32), block size 16, prompt of 32 tokens, then 16 decode tokens:
//     at creation   block 1 [16,32): X ; walk advances to index 1 (past the end)
//     after append  block 2 [32,48): starts at -1 → X again, since 32 > 32 is false → key (X)
//   whereas a prompt of 48 tokens hashed at creation gives block 2 the key None (quirk 19 of the
//   golden README: same tokens, different hash).
//
// A memo (BlockHashMemo) skips re-hashing repeated content (multi-turn prompts re-send the
// previous turn); it is exact and bounded.
//
// Threading: one hasher per thread (it owns scratch buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/vllm/block_hash_memo.h"
#include "model/vllm/hashing.h"
#include "model/vllm/request.h"

namespace kvtwin::model::vllm {

// Fills *out with the extra keys of block [start_token_idx, end_token_idx) (empty = None) and
// returns the next mm index (vLLM's generate_block_hash_extra_keys).
int generate_block_hash_extra_keys(const Request& request, int64_t start_token_idx,
                                   int64_t end_token_idx, int start_mm_idx, ExtraKeys* out);

class RequestBlockHasher {
 public:
  // memo_bytes: memory budget of the (parent, tokens) memo; 0 disables it.
  RequestBlockHasher(int block_size, BlockHasher hasher, size_t memo_bytes = 64u << 20);
  // Not copyable: requests point to their hasher.
  RequestBlockHasher(const RequestBlockHasher&) = delete;
  RequestBlockHasher& operator=(const RequestBlockHasher&) = delete;

  int block_size() const { return block_size_; }
  BlockHasher& hasher() { return hasher_; }

  // Appends the hashes of the request's full blocks beyond request.block_hashes() to *out.
  void hash_new_blocks(const Request& request, std::vector<BlockHash>* out);

  const BlockHashMemo& memo() const { return memo_; }

 private:
  int block_size_;
  BlockHasher hasher_;
  BlockHashMemo memo_;
  ExtraKeys extra_keys_;
};

}  // namespace kvtwin::model::vllm

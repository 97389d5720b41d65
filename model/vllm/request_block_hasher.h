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
// A memo of (parent, tokens) → hash for blocks without extra keys skips re-hashing repeated
// content (multi-turn prompts re-send the previous turn). It is exact: an entry is used only when
// the parent bytes and every token match; memory is bounded (a direct-mapped table of fixed size).
//
// Threading: one hasher per thread (it owns scratch buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

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
  // Not copyable: requests point to their hasher, and memo slots are aligned to the buffer.
  RequestBlockHasher(const RequestBlockHasher&) = delete;
  RequestBlockHasher& operator=(const RequestBlockHasher&) = delete;

  int block_size() const { return block_size_; }
  BlockHasher& hasher() { return hasher_; }

  // Appends the hashes of the request's full blocks beyond request.block_hashes() to *out.
  void hash_new_blocks(const Request& request, std::vector<BlockHash>* out);

  struct MemoStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };
  const MemoStats& memo_stats() const { return memo_stats_; }

 private:
  // The memo slot of a block's tokens (fingerprint of the tokens only, so that the slots of a
  // request's blocks are known before their parents are hashed and can be prefetched).
  uint64_t memo_fingerprint(std::span<const TokenId> tokens) const;
  // The set of a fingerprint: kMemoWays consecutive slots (sets start at the first 64-byte
  // boundary of memo_).
  uint8_t* memo_set(uint64_t fingerprint) const {
    return memo_.get() + (fingerprint & memo_mask_) * kMemoWays * memo_stride_;
  }
  bool has_memo() const { return memo_ != nullptr; }
  BlockHash hash_block(const BlockHash& parent, std::span<const TokenId> tokens,
                       const ExtraKeys* extra_keys, uint64_t fingerprint);

  // Memo slot layout (memo_stride_ bytes, cache-line aligned): MemoHeader, then block_size
  // int32 tokens. A slot is empty while its hash is empty. Two ways per set, so that blocks with
  // equal tokens under different parents (a prompt repeated with another cache salt) coexist.
  static constexpr size_t kMemoWays = 2;
  struct MemoHeader {
    uint64_t fingerprint;
    BlockHash parent;
    BlockHash hash;
  };

  int block_size_;
  BlockHasher hasher_;
  ExtraKeys extra_keys_;
  struct FreeMemo {
    void operator()(uint8_t* p) const;
  };
  // Sets of kMemoWays slots, 2 MiB aligned (huge pages when the OS grants them: the memo is
  // read at random, so TLB misses would otherwise dominate); null = no memo.
  std::unique_ptr<uint8_t[], FreeMemo> memo_;
  size_t memo_stride_ = 0;
  size_t memo_mask_ = 0;
  MemoStats memo_stats_;
  std::vector<uint64_t> fingerprints_;  // scratch of hash_new_blocks
};

}  // namespace kvtwin::model::vllm

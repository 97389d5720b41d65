// PromptHashMemo: the vLLM block hashes of a trace request's prompt, memoised per trace block.
//
// TokenSynthesizer makes token j of a trace block a pure function of (seed, block id, j). So
// with the hash block size B dividing the trace block size T, the hashes of the T/B hash blocks
// inside trace block i depend only on (hash of the block before it, id i), and a conversation
// that re-sends its history re-hashes the same trace blocks turn after turn. The memo keeps,
// per (parent hash, id, T), the hashes of the trace block's hash blocks computed so far:
//
//   prompt:  | id 7 (T tokens)        | id 9 (T tokens)        | id 4 (partial) |unique..|
//   hashes:  | h0 h1 ... h(T/B-1)     | ...                    | h h | (straddling / unique
//            |  key (NONE, 7)         |  key (h(T/B-1), 9)     |  key(.., 4)     blocks: not
//                                                                                here)
//
// It is exact: a memoised hash is one that hash_block_tokens gave for the same parent and the
// same tokens, since equal (id, position) means equal tokens. Only blocks wholly inside an id's
// covered tokens are served; the rest of the prompt (a block straddling the covered end, unique
// tokens) is left to RequestBlockHasher. Requests with extra keys (LoRA, multimodal inputs, cache
// salt) must not use it (vLLM hashes those keys into the blocks).
//
// Memory is bounded: a table of `slots` entries of T/B hashes each, in sets of `ways` entries; a
// key maps to one set, and a new key replaces the set's empty or least recently used entry (the
// memo changes speed, never results). On the Mooncake conversation trace (8 instances) a
// direct-mapped table of 16,384 entries served 1.9 M of 9.0 M hashes; the default 65,536 entries
// in sets of 4 serve 3.2 M (1.3 M fewer hashes computed, for a 52 MB larger table at T/B = 32).
//
// Threading: one per simulation thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/vllm/hashing.h"
#include "sim/workload/trace_request.h"

namespace kvtwin::sim::engine {

class PromptHashMemo {
 public:
  // `hasher` must be the one the requests' RequestBlockHasher uses (same function, NONE_HASH).
  // REQUIRES: hash_block_size >= 1; ways >= 1; slots a multiple of ways, slots / ways a power of
  // two.
  PromptHashMemo(model::vllm::BlockHasher hasher, int hash_block_size, size_t slots = 65536,
                 size_t ways = 4);

  // Appends to *out the hashes of the leading full hash blocks of `prompt` that lie wholly inside
  // the id-covered tokens of `t` (none when B does not divide t.block_size). `prompt` is the
  // request's prompt as TokenSynthesizer made it from `t`.
  void prompt_hashes(const workload::TraceRequest& t, std::span<const model::vllm::TokenId> prompt,
                     std::vector<model::vllm::BlockHash>* out);

  struct Stats {
    uint64_t hits = 0;    // hashes served from the memo
    uint64_t hashed = 0;  // hashes computed
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Slot {
    model::vllm::BlockHash parent;
    uint64_t id = 0;
    int32_t trace_block_size = 0;  // 0: empty
    int32_t count = 0;             // valid hashes in this slot's run of hashes_
  };
  // A slot's lookup data, apart so that a set's ways share a cache line or two.
  struct Way {
    uint64_t tag = 0;   // the key's fingerprint | 1 (0: empty); equal keys, equal tags
    uint64_t used = 0;  // clock_ at the last lookup that found or filled the slot
  };

  // The slot holding (parent, id, T), or the one it replaces (then reset to the key, count 0).
  size_t find_or_claim(const model::vllm::BlockHash& parent, uint64_t id, int32_t T);

  model::vllm::BlockHasher hasher_;
  int block_size_;
  size_t ways_;
  int32_t per_slot_ = 0;  // T / B of the table's current layout
  uint64_t clock_ = 0;
  std::vector<Way> ways_meta_;  // by slot
  std::vector<Slot> slots_;
  std::vector<model::vllm::BlockHash> hashes_;  // slot s: [s*per_slot_, (s+1)*per_slot_)
  Stats stats_;
};

}  // namespace kvtwin::sim::engine

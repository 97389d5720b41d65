// BlockHashMemo: an exact, bounded memo of hash_block_tokens — (parent, tokens, extra keys) →
// block hash — so that content hashed before (a shared system prompt, the previous turn of a
// chat) is not hashed again.
//
// Entries are appended to a ring in hashing order, so a chain of blocks hashed one after the
// other sits contiguously; a lookup first tries the entry right after the previous block's
// ("the chain continues"), a sequential read, and only at a junction goes through the index,
// a direct-mapped table from a fingerprint of the key to a ring slot:
//
//   ring:   ... | P→A | A→B | B→C | X→Y | C→D | ...      (parent→hash, with the tokens)
//   lookup(B, tokens) after using slot "A→B": try the next slot "B→C" first.
//
// Exactness: an entry is used only when its parent bytes, extra-key tuple and every token equal
// the key, so overwritten ring slots and index collisions can only cause misses. A block whose
// parent was itself a miss skips the lookup (its parent hash is new, so an entry with that parent
// can only exist if the parent's own entry was overwritten since): it is hashed and appended
// directly, saving the two cold reads of a lookup that would miss anyway. Extra-key tuples
// are interned (up to kMaxExtraKeyTuples distinct tuples; blocks with further tuples bypass the
// memo). Tokens are stored as int32; blocks with larger ids bypass the memo.
//
// Memory: the ring and the index are zero-filled anonymous mappings, so pages are only touched
// (and faulted in) as entries are written; a short replay never pays for the whole budget.
//
// Threading: none.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/vllm/hashing.h"

namespace kvtwin::model::vllm {

class BlockHashMemo {
 public:
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static constexpr size_t kMaxExtraKeyTuples = 4096;

  // memory_bytes: budget for the ring and its index; block_size: tokens per entry.
  BlockHashMemo(size_t memory_bytes, int block_size);
  BlockHashMemo(const BlockHashMemo&) = delete;
  BlockHashMemo& operator=(const BlockHashMemo&) = delete;

  // Whether the budget allows a memo at all.
  bool enabled() const { return capacity_ > 0; }

  // The hash of (parent, tokens, extra_keys), from the memo or computed by `hasher` (and then
  // remembered). *slot carries a chain cursor from the previous block of the same chain in
  // (kNoSlot for a chain's first block) and this block's out; callers only pass it along.
  BlockHash hash(BlockHasher& hasher, const BlockHash& parent, std::span<const TokenId> tokens,
                 const ExtraKeys* extra_keys, uint32_t* slot);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  // A ring slot is an Entry followed by block_size_ int32 tokens (stride_ bytes in all).
  struct Entry {
    BlockHash parent;
    BlockHash hash;     // empty: the slot was never written
    uint32_t extra_id;  // interned extra-key tuple; 0 = None
  };
  struct IndexSlot {
    uint32_t tag = 0;   // high 32 bits of the fingerprint
    uint32_t slot = 0;  // ring slot + 1; 0 = empty
  };
  // All-zero bytes are an empty Entry / IndexSlot (the mappings start zero-filled).
  Entry* entry(uint32_t slot) const {
    return reinterpret_cast<Entry*>(ring_.get() + static_cast<size_t>(slot) * stride_);
  }
  static int32_t* tokens_of(Entry* e) {
    return reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(e) + sizeof(Entry));
  }
  // 0 for None; kNoSlot when the tuple cannot be interned.
  uint32_t intern(const ExtraKeys* extra_keys);
  bool matches(const Entry& e, const BlockHash& parent, std::span<const TokenId> tokens,
               uint32_t extra_id) const;

  // Chain cursor: a ring slot, with kMissBit set when that block was a miss.
  static constexpr uint32_t kMissBit = uint32_t{1} << 31;

  // A zero-filled anonymous mapping, aligned to 2 MiB (huge pages are a hint only).
  class ZeroedBytes {
   public:
    ZeroedBytes() = default;
    ZeroedBytes(const ZeroedBytes&) = delete;
    ZeroedBytes& operator=(const ZeroedBytes&) = delete;
    ~ZeroedBytes();
    uint8_t* get() const { return data_; }
    // REQUIRES: nothing mapped yet.
    void map(size_t bytes);

   private:
    void* map_ = nullptr;
    size_t map_bytes_ = 0;
    uint8_t* data_ = nullptr;
  };
  int block_size_;
  size_t stride_ = 0;
  uint32_t capacity_ = 0;  // ring slots, a power of two (at most 2^30: kMissBit stays free)
  uint64_t next_ = 0;      // ring position of the next insertion
  ZeroedBytes ring_;
  ZeroedBytes index_bytes_;
  IndexSlot* index_ = nullptr;  // 2 * capacity_ slots in index_bytes_
  uint64_t index_mask_ = 0;
  std::unordered_map<std::string, uint32_t> extra_ids_;
  std::string extra_scratch_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace kvtwin::model::vllm

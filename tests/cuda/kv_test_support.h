// Test support for the paged <-> chunk copies: one point of the test matrix (KvCase), host
// buffers with guard bytes around every layer and chunk (HostKvArena), an independent index model
// of every layout (naive_kv_copy), and the poison protocol that proves "every named byte written,
// nothing else touched". Shared by the CPU tests, the GPU tests and the benchmarks.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/kv_layout.h"

namespace kvtwin::cuda::testing {

// splitmix64: a seeded 64-bit generator (no std:: distributions; they differ between libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

void fill_random(uint8_t* data, size_t bytes, uint64_t seed);

// One point of the copy matrix.
struct KvCase {
  PagedKind kind = PagedKind::kNHD;
  ChunkFormat format = ChunkFormat::kKV_2LTD;
  CopyDirection direction = CopyDirection::kPagedToChunk;
  int32_t elem_bytes = 2;
  int32_t head_size = 128;
  int32_t num_heads = 2;
  int32_t num_layers = 3;  // chunk layers (1 for KV_T2D / KV_2TD)
  int32_t block_size = 16;
  int64_t num_blocks = 8;
  int64_t num_tokens = 40;
  int64_t tokens_per_chunk = 16;
  uint32_t skip_percent = 10;   // tokens whose slot is -1
  uint32_t chunk_misalign = 0;  // bytes added to every chunk base (forces narrower units)
  uint64_t seed = 1;

  PagedLayout paged() const;
  std::string name() const;
};

// gtest prints parameters with this (instead of their bytes).
inline void PrintTo(const KvCase& c, std::ostream* os) {
  *os << c.name();
}

// Every paged kind x compatible chunk format x direction x element size (1, 2, 4 bytes), with
// ordinary and odd head sizes (128 / 66; MLA 576 / 66), partial last chunks and skipped slots.
std::vector<KvCase> full_kv_matrix();

// Distinct slots for `num_tokens` tokens: whole blocks in a shuffled order, consecutive offsets
// inside a block, and about skip_percent% of tokens set to -1.
std::vector<int64_t> make_slots(const KvCase& kv_case);

// Host buffers of one case: L paged layers then C chunk objects, each preceded and followed by
// kGuardBytes of guard, in one arena. Copying the arena copies the whole state.
class HostKvArena {
 public:
  static constexpr size_t kGuardBytes = 64;

  explicit HostKvArena(const KvCase& kv_case);
  HostKvArena(const HostKvArena&) = delete;  // requests point into the arena's own tables
  HostKvArena& operator=(const HostKvArena&) = delete;

  // Fills everything with random bytes, then the destination side of the case's direction
  // (chunks for a gather, layers for a scatter) with `poison`.
  void reset(uint8_t poison);

  // A request over this arena's own bytes (host pointers into data()); valid while the arena lives.
  KvCopyRequest request();
  const std::vector<int64_t>& slots() const { return slots_; }
  std::vector<uint8_t*> layer_pointers();
  std::vector<uint8_t*> chunk_pointers();
  size_t layer_offset(int l) const { return layer_offsets_[l]; }
  size_t chunk_offset(int64_t c) const { return chunk_offsets_[c]; }
  int64_t layer_bytes() const { return paged_.layer_bytes(); }
  int64_t chunk_bytes(int64_t c) const;

  uint8_t* data() { return data_; }
  size_t size() const { return size_; }
  std::vector<uint8_t> snapshot() const { return {data_, data_ + size_}; }
  void restore(const std::vector<uint8_t>& bytes);

  const KvCase& kv_case() const { return case_; }

 private:
  KvCase case_;
  PagedLayout paged_;
  std::vector<int64_t> slots_;
  std::vector<size_t> layer_offsets_;
  std::vector<size_t> chunk_offsets_;
  std::vector<uint8_t> storage_;
  std::vector<uint8_t*> layer_ptrs_;
  std::vector<uint8_t*> chunk_ptrs_;
  uint8_t* data_ = nullptr;  // 64-byte-aligned start inside storage_
  size_t size_ = 0;
};

// The independent model: element by element, through shapes spelled as axis lists (not through
// kv_layout.h's formulas). Host pointers only.
void naive_kv_copy(const KvCopyRequest& req);

// The poison protocol. For each of two poisons (0xA5, 0x5A): reset the arena, run `oracle` and keep
// the state; reset again, run `implementation`, and compare every byte of the arena (guards,
// source and destination). A named byte left unwritten shows as a poison under one of the two
// runs; a stray write shows anywhere. Returns "" on a match, else where the first difference is.
std::string compare_with_oracle(HostKvArena& arena, const std::function<void(HostKvArena&)>& oracle,
                                const std::function<void(HostKvArena&)>& implementation);

// Where byte `offset` of the arena lies: "layer l + n", "chunk c + n" or "guard".
std::string describe_arena_offset(const HostKvArena& arena, size_t offset);

// Index of the first differing byte, or -1 when equal (sizes must match).
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

}  // namespace kvtwin::cuda::testing

// vLLM v0.17.0 block hashing, byte for byte (../shared/golden/README.md §5).
//
// A block's hash is hash_fn((parent, tuple(tokens), extra_keys)) where hash_fn serialises the
// 3-tuple with pickle protocol 5 (sha256, xxhash) or canonical CBOR (sha256_cbor, xxhash_cbor)
// and digests it with SHA-256 (32 bytes) or XXH3-128 (16 bytes, big-endian canonical form).
// The first block's parent is NONE_HASH = hash_fn(<PYTHONHASHSEED string>).
//
//   sha256_cbor key of a 4-token block [0,1,2,3] with no extra keys:
//     83                  array(3)
//     58 20 <32 bytes>    parent as a byte string
//     84 00 01 02 03      the token tuple as array(4) of shortest-form ints
//     f6                  extra_keys = None
//
// LMCache's chunk hashing (pre_caching_hash_algorithm = sha256_cbor) is this same function with
// chunks instead of blocks; model/lmcache calls it rather than keeping a second copy.
//
// Threading: BlockHasher owns a scratch buffer; use one per thread. The free functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/vllm/block_hash.h"

namespace kvtwin::model::vllm {

// vLLM's `get_hash_fn_by_name` names.
enum class HashFn { kSha256, kSha256Cbor, kXxhash, kXxhashCbor };

std::optional<HashFn> hash_fn_from_name(std::string_view name);
std::string_view hash_fn_name(HashFn fn);
// 32 for the sha256 family, 16 for xxhash.
size_t hash_fn_digest_size(HashFn fn);
bool hash_fn_uses_cbor(HashFn fn);

using TokenId = int64_t;

// One element of a block's extra_keys tuple: a str (LoRA name, multimodal identifier, cache
// salt) or a bytes value (prompt-embeds hashes).
struct ExtraKey {
  std::string value;
  bool is_bytes = false;
  friend bool operator==(const ExtraKey&, const ExtraKey&) = default;
};
// A block's extra keys; vLLM passes None instead of an empty tuple, so callers pass nullptr
// (None) when the list would be empty.
using ExtraKeys = std::vector<ExtraKey>;

// Serialisers of the hashed 3-tuple, appended to *out. `parent` must be non-empty (the caller
// substitutes NONE_HASH).
void encode_block_key_cbor(std::span<const uint8_t> parent, std::span<const TokenId> tokens,
                           const ExtraKeys* extra_keys, std::vector<uint8_t>* out);
void encode_block_key_pickle(std::span<const uint8_t> parent, std::span<const TokenId> tokens,
                             const ExtraKeys* extra_keys, std::vector<uint8_t>* out);
// Serialisation of a bare str (what NONE_HASH hashes).
void encode_str_cbor(std::string_view s, std::vector<uint8_t>* out);
void encode_str_pickle(std::string_view s, std::vector<uint8_t>* out);

// Digest of already-serialised bytes with fn's digest (SHA-256 or XXH3-128 canonical).
BlockHash digest_bytes(HashFn fn, std::span<const uint8_t> bytes);

// NONE_HASH = hash_fn(python_hash_seed) for a set PYTHONHASHSEED (vLLM's init_none_hash).
BlockHash none_hash(HashFn fn, std::string_view python_hash_seed);

// Hashes blocks for one hash function and one NONE_HASH, reusing a scratch buffer.
class BlockHasher {
 public:
  BlockHasher(HashFn fn, BlockHash none_hash);

  HashFn hash_fn() const { return fn_; }
  const BlockHash& none_hash() const { return none_hash_; }

  // vLLM's hash_block_tokens: an empty `parent` means "first block" and uses NONE_HASH.
  BlockHash hash_block_tokens(const BlockHash& parent, std::span<const TokenId> tokens,
                              const ExtraKeys* extra_keys);

 private:
  HashFn fn_;
  BlockHash none_hash_;
  std::vector<uint8_t> scratch_;
};

}  // namespace kvtwin::model::vllm

// CacheEngineKey and LayerCacheEngineKey (lmcache/utils.py): the identity of one chunk (or one
// layer of one chunk) in every tier.
//
//   key   = (model_name, world_size, worker_id, chunk_hash, dtype, tags)   (+ layer_id)
//   string: "<model>@<world_size>@<worker_id>@<hash hex>@<dtype>[@<layer>][@<tag>%<value>...]"
//           e.g. "toy-model@1@0@4e11...3e@half@user%alice"
//   disk file: the string with '/' replaced by '-', plus ".pt"
//
// `tags` are the request configs whose name starts with "lmcache.tag.", in insertion order, with
// the prefix stripped; other request configs are not part of the key. The hash prints as
// bytes.hex() for a digest (sha256_cbor: 64 hex digits) and as format(h, "x") for a builtin int
// hash (a negative value prints with a leading '-').
//
// A key is small: the chunk hash, the layer id (-1 for a plain CacheEngineKey; upstream's two
// classes never compare equal) and a pointer to an interned KeyScope holding the rest. Scopes are
// interned by a KeyScopeRegistry; keys stay valid while their registry lives. Equality and hashing
// use the scope's content, so keys from two registries compare correctly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/lmcache/dtype.h"
#include "model/lmcache/request_configs.h"
#include "model/vllm/block_hash.h"

namespace kvtwin::model::lmcache {

// A chunk hash: digest bytes (the vLLM hash functions) or a Python int (builtin hash).
class ChunkHash {
 public:
  ChunkHash() = default;
  static ChunkHash from_digest(const vllm::BlockHash& digest);
  static ChunkHash from_int(int64_t value);

  bool is_digest() const { return !is_int_; }
  const vllm::BlockHash& digest() const { return digest_; }
  int64_t int_value() const { return int_value_; }
  // CacheEngineKey.chunk_hash_hex.
  std::string hex() const;
  void append_hex(std::string* out) const;
  uint64_t fingerprint() const { return fingerprint_; }

  friend bool operator==(const ChunkHash& a, const ChunkHash& b) {
    return a.fingerprint_ == b.fingerprint_ && a.is_int_ == b.is_int_ &&
           (a.is_int_ ? a.int_value_ == b.int_value_ : a.digest_ == b.digest_);
  }

 private:
  vllm::BlockHash digest_;
  int64_t int_value_ = 0;
  bool is_int_ = false;
  uint64_t fingerprint_ = 0;
};

struct KeyTag {
  std::string name;  // without "lmcache.tag."
  ConfigValue value;
  friend bool operator==(const KeyTag&, const KeyTag&) = default;
};

// Everything in a key except the hash and the layer.
struct KeyScope {
  std::string model_name;
  int world_size = 1;
  int worker_id = 0;
  KvDtype dtype = KvDtype::kHalf;
  std::vector<KeyTag> tags;
  // Derived text: "<model>@<ws>@<worker>@" and "@k%v@k2%v2" (empty without tags).
  std::string prefix;
  std::string tag_suffix;
  uint64_t fingerprint = 0;

  bool same_content(const KeyScope& o) const {
    return world_size == o.world_size && worker_id == o.worker_id && dtype == o.dtype &&
           model_name == o.model_name && tags == o.tags;
  }
};

// The tags of a request's configs, in insertion order.
std::vector<KeyTag> tags_of(const RequestConfigs* configs);

class KeyScopeRegistry {
 public:
  const KeyScope* intern(std::string_view model_name, int world_size, int worker_id, KvDtype dtype,
                         std::vector<KeyTag> tags);
  size_t size() const { return scopes_.size(); }

 private:
  std::unordered_map<std::string, std::unique_ptr<KeyScope>> scopes_;
};

struct CacheEngineKey {
  const KeyScope* scope = nullptr;
  ChunkHash chunk_hash;
  int32_t layer_id = -1;  // -1: CacheEngineKey; >= 0: LayerCacheEngineKey

  bool is_layer_key() const { return layer_id >= 0; }
  // LayerCacheEngineKey(..., layer_id) of this chunk.
  CacheEngineKey layer(int layer) const { return {scope, chunk_hash, layer}; }
  std::vector<CacheEngineKey> split_layers(int num_layers) const;
  CacheEngineKey get_first_layer() const { return layer(0); }

  std::string to_string() const;
  // to_string() without the "<model>@<ws>@<worker>@" prefix (the golden logs' key id).
  std::string kid() const;
  // "<to_string() with '/' -> '-'>.pt"
  std::string disk_file_name() const;
  // Appends kid() to *s.
  void append_kid(std::string* s) const;
  uint64_t fingerprint() const {
    return chunk_hash.fingerprint() ^ (scope->fingerprint * 0x9e3779b97f4a7c15ULL) ^
           (static_cast<uint64_t>(layer_id + 1) * 0xc2b2ae3d27d4eb4fULL);
  }

  friend bool operator==(const CacheEngineKey& a, const CacheEngineKey& b) {
    return a.layer_id == b.layer_id && a.chunk_hash == b.chunk_hash &&
           (a.scope == b.scope || a.scope->same_content(*b.scope));
  }
};

struct CacheEngineKeyHash {
  size_t operator()(const CacheEngineKey& k) const { return static_cast<size_t>(k.fingerprint()); }
};

}  // namespace kvtwin::model::lmcache

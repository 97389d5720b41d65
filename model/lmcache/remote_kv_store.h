// RemoteKvStore: the Redis keyspace LMCache's RedisConnector writes, as logic. Shared by every rank
// (and every engine) that points at the same server.
//
// Per chunk two Redis keys: "<key string>kv_bytes" (the raw object bytes: here their length and
// logical content) and "<key string>metadata" (28 bytes: seven little-endian int32 — byte length,
// memory format, dtype code, 4 shape dims). Redis never evicts on LMCache's behalf; faults delete
// either key (golden remote_evict).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace kvtwin::model::lmcache {

using RemoteMetadataBytes = std::array<uint8_t, 28>;

class RemoteKvStore {
 public:
  struct KvBytes {
    uint64_t length = 0;
    uint64_t content = 0;
  };
  struct Entry {
    std::optional<KvBytes> kv_bytes;
    std::optional<RemoteMetadataBytes> metadata;
  };

  void set_kv_bytes(const std::string& key, KvBytes v) { put_kv(entries_[key], v); }
  void set_metadata(const std::string& key, const RemoteMetadataBytes& m) {
    entries_[key].metadata = m;
  }
  // set_kv_bytes then set_metadata, with one lookup.
  void set_both(std::string key, KvBytes v, const RemoteMetadataBytes& m) {
    Entry& e = entries_[std::move(key)];
    put_kv(e, v);
    e.metadata = m;
  }
  const KvBytes* kv_bytes(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() || !it->second.kv_bytes ? nullptr : &*it->second.kv_bytes;
  }
  const RemoteMetadataBytes* metadata(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() || !it->second.metadata ? nullptr : &*it->second.metadata;
  }
  // DEL of one Redis key; returns how many were deleted (0 or 1).
  int delete_kv_bytes(const std::string& key) { return erase_part(key, true); }
  int delete_metadata(const std::string& key) { return erase_part(key, false); }
  // Number of keys holding at least one part.
  size_t size() const { return entries_.size(); }
  // Sum of the lengths of every kv_bytes value held (what the server stores, metadata aside).
  uint64_t kv_bytes_total() const { return kv_bytes_total_; }
  // Key strings in sorted order with their parts: a copy, for dumps and tests (the store itself
  // is a hash table, so that a server with hundreds of thousands of keys answers in O(1)).
  std::map<std::string, Entry> entries() const { return {entries_.begin(), entries_.end()}; }

 private:
  int erase_part(const std::string& key, bool kv) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return 0;
    int n = 0;
    if (kv && it->second.kv_bytes) {
      kv_bytes_total_ -= it->second.kv_bytes->length;
      it->second.kv_bytes.reset();
      n = 1;
    }
    if (!kv && it->second.metadata) {
      it->second.metadata.reset();
      n = 1;
    }
    if (!it->second.kv_bytes && !it->second.metadata) entries_.erase(it);
    return n;
  }

  void put_kv(Entry& e, KvBytes v) {
    if (e.kv_bytes) kv_bytes_total_ -= e.kv_bytes->length;  // a SET replaces the value
    e.kv_bytes = v;
    kv_bytes_total_ += v.length;
  }

  std::unordered_map<std::string, Entry> entries_;
  uint64_t kv_bytes_total_ = 0;  // invariant: the sum of kv_bytes->length over entries_
};

}  // namespace kvtwin::model::lmcache

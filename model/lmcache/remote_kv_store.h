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
#include <string_view>

#include "model/lmcache/string_table.h"

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

  void set_kv_bytes(std::string key, KvBytes v) { put_kv(entries_.upsert(std::move(key)), v); }
  void set_metadata(std::string key, const RemoteMetadataBytes& m) {
    entries_.upsert(std::move(key)).metadata = m;
  }
  // set_kv_bytes then set_metadata, with one lookup.
  void set_both(std::string key, KvBytes v, const RemoteMetadataBytes& m) {
    Entry& e = entries_.upsert(std::move(key));
    put_kv(e, v);
    e.metadata = m;
  }
  // Valid until the next set or delete.
  const KvBytes* kv_bytes(std::string_view key) const {
    const Entry* e = entries_.find(key);
    return e == nullptr || !e->kv_bytes ? nullptr : &*e->kv_bytes;
  }
  const RemoteMetadataBytes* metadata(std::string_view key) const {
    const Entry* e = entries_.find(key);
    return e == nullptr || !e->metadata ? nullptr : &*e->metadata;
  }
  // DEL of one Redis key; returns how many were deleted (0 or 1).
  int delete_kv_bytes(std::string_view key) { return erase_part(key, true); }
  int delete_metadata(std::string_view key) { return erase_part(key, false); }
  // Number of keys holding at least one part.
  size_t size() const { return entries_.size(); }
  // Sum of the lengths of every kv_bytes value held (what the server stores, metadata aside).
  uint64_t kv_bytes_total() const { return kv_bytes_total_; }
  // Key strings in sorted order with their parts: a copy, for dumps and tests (the store itself
  // is a hash table, so that a server with millions of keys answers in O(1)).
  std::map<std::string, Entry> entries() const {
    std::map<std::string, Entry> out;
    entries_.for_each([&](std::string_view k, const Entry& e) { out.emplace(k, e); });
    return out;
  }

 private:
  int erase_part(std::string_view key, bool kv) {
    Entry* e = entries_.find(key);
    if (e == nullptr) return 0;
    int n = 0;
    if (kv && e->kv_bytes) {
      kv_bytes_total_ -= e->kv_bytes->length;
      e->kv_bytes.reset();
      n = 1;
    }
    if (!kv && e->metadata) {
      e->metadata.reset();
      n = 1;
    }
    if (!e->kv_bytes && !e->metadata) entries_.erase(key);
    return n;
  }

  void put_kv(Entry& e, KvBytes v) {
    if (e.kv_bytes) kv_bytes_total_ -= e.kv_bytes->length;  // a SET replaces the value
    e.kv_bytes = v;
    kv_bytes_total_ += v.length;
  }

  StringTable<Entry> entries_;
  uint64_t kv_bytes_total_ = 0;  // invariant: the sum of kv_bytes->length over entries_
};

}  // namespace kvtwin::model::lmcache

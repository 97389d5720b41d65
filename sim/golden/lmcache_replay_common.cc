// LMCache golden replayer: output writers, snapshots and the ops both case kinds share.
#include "model/lmcache/remote_backend.h"
#include "model/vllm/block_hash.h"
#include "sim/golden/lmcache_replay_state.h"

namespace kvtwin::sim::golden::lmcache_replay {

std::string kid(const lm::CacheEngineKey& key, bool with_rank, int rank) {
  if (!with_rank) return key.kid();
  return "rank" + std::to_string(rank) + ":" + key.kid();
}

void write_ranges(JsonWriter& w, const std::vector<lm::TokenRange>& ranges) {
  w.begin_array();
  for (const lm::TokenRange& r : ranges) w.begin_array().value(r.start).value(r.end).end_array();
  w.end_array();
}

void write_pin_map(JsonWriter& w, const lm::PinMap& pins) {
  w.begin_array();
  for (const auto& [location, keys] : pins)
    w.begin_array().value(location).value(static_cast<int64_t>(keys.size())).end_array();
  w.end_array();
}

bool any_removed(const CaseState& state) {
  for (const auto& [rank, e] : state.engines) {
    if (!e->storage_manager().events().removed.empty()) return true;
  }
  return false;
}

void write_removed(JsonWriter& w, CaseState& state, bool multi_rank) {
  std::vector<std::string> cpu, disk;
  for (auto& [rank, e] : state.engines) {
    for (const lm::StorageEvents::Removed& r : e->storage_manager().events().removed) {
      (r.tier == lm::Tier::kCpu ? cpu : disk).push_back(kid(r.key, multi_rank, r.worker_id));
    }
    e->storage_manager().events().removed.clear();
  }
  w.begin_object();
  if (!cpu.empty()) {
    w.key("cpu").begin_array();
    for (const std::string& k : cpu) w.value(k);
    w.end_array();
  }
  if (!disk.empty()) {
    w.key("disk").begin_array();
    for (const std::string& k : disk) w.value(k);
    w.end_array();
  }
  w.end_object();
}

void write_writes(JsonWriter& w, CaseState& state) {
  int disk = 0, remote = 0;
  for (auto& [rank, e] : state.engines) {
    lm::StorageEvents& ev = e->storage_manager().events();
    disk += ev.disk_writes_submitted;
    remote += ev.remote_writes_submitted;
    ev.disk_writes_submitted = 0;
    ev.remote_writes_submitted = 0;
  }
  if (disk == 0 && remote == 0) return;
  w.key("writes").begin_object();
  if (disk != 0) w.key("disk").value(disk);
  if (remote != 0) w.key("remote").value(remote);
  w.end_object();
}

void drain_events(CaseState& state) {
  for (auto& [rank, e] : state.engines) e->storage_manager().events().clear();
}

// ----------------------------------------------------------------------------- snapshots

namespace {

void write_lfu(JsonWriter& w, const lm::CachePolicy& policy) {
  if (policy.kind() != lm::CachePolicyKind::kLfu) return;
  w.key("lfu").begin_array();
  for (const auto& [freq, keys] : policy.frequency_buckets()) {
    w.begin_array().value(freq).begin_array();
    for (const lm::CacheEngineKey& k : keys) w.value(k.kid());
    w.end_array().end_array();
  }
  w.end_array();
}

void write_cpu(JsonWriter& w, lm::LMCacheEngine& e) {
  const lm::LocalCPUBackend& cpu = e.storage_manager().local_cpu();
  const lm::TensorMemoryAllocator& a = cpu.allocator();
  w.key("cpu").begin_object().key("entries").begin_array();
  for (const auto& [key, id] : cpu.entries()) {
    const lm::MemoryObj& o = a.obj(id);
    w.begin_array()
        .value(key.kid())
        .value(static_cast<int64_t>(o.ref_count))
        .value(static_cast<int64_t>(o.pin_count))
        .value(o.address)
        .value(o.phy_size)
        .value(o.size)
        .end_array();
  }
  w.end_array().key("free").begin_array();
  for (const lm::FreeBlock& b : a.address_manager().free_blocks())
    w.begin_array().value(b.start).value(b.size).end_array();
  w.end_array().key("allocated_bytes").value(a.total_allocated_size());
  write_lfu(w, cpu.cache_policy());
  w.end_object();
}

void write_disk(JsonWriter& w, lm::LMCacheEngine& e) {
  const lm::LocalDiskBackend* disk = e.storage_manager().local_disk();
  w.key("disk").begin_object().key("entries").begin_array();
  for (const auto& [key, m] : disk->entries())
    w.begin_array()
        .value(key.kid())
        .value(m.size)
        .value(static_cast<int64_t>(m.pin_count))
        .end_array();
  w.end_array();
  w.key("reserved_bytes").value(disk->current_cache_size());
  w.key("written_bytes").value(disk->usage());
  std::string prefix = e.token_database().key_scope(nullptr)->prefix;
  for (char& ch : prefix) {
    if (ch == '/') ch = '-';
  }
  w.key("files").value(static_cast<uint64_t>(disk->directory().count_with_prefix(prefix)));
  w.key("in_flight").begin_array();
  for (const lm::CacheEngineKey& k : disk->in_flight()) w.value(k.kid());
  w.end_array();
  write_lfu(w, disk->cache_policy());
  w.end_object();
}

void write_remote(JsonWriter& w, const lm::RemoteKvStore& store) {
  w.key("remote").begin_array();
  for (const auto& [key, entry] : store.entries()) {
    w.begin_array().value(key);
    if (entry.kv_bytes) {
      w.value(entry.kv_bytes->length);
    } else {
      w.null();
    }
    if (entry.metadata) {
      w.value(model::vllm::to_hex(*entry.metadata));
    } else {
      w.null();
    }
    w.end_array();
  }
  w.end_array();
}

void write_pins(JsonWriter& w, const lm::LMCacheEngine& e) {
  w.key("pins").begin_array();
  for (const auto& [id, pins] : e.lookup_pins()) {
    w.begin_array().value(id);
    write_pin_map(w, pins);
    w.end_array();
  }
  w.end_array();
}

}  // namespace

void write_snapshot(JsonWriter& w, const OpFields& op, CaseState& state) {
  lm::LMCacheEngine& e = state.engine(op_rank(op, state));
  std::vector<std::string> parts;
  if (op.has_value("parts")) {
    for (simdjson::dom::element p : op.array("parts")) parts.emplace_back(op.as_str(p, "parts"));
  } else {
    parts.push_back("cpu");
    if (e.storage_manager().local_disk() != nullptr) parts.push_back("disk");
    if (e.storage_manager().remote() != nullptr) parts.push_back("remote");
  }
  w.begin_object();
  for (const std::string& part : parts) {
    if (part == "cpu") {
      write_cpu(w, e);
    } else if (part == "disk") {
      if (e.storage_manager().local_disk() == nullptr) op.fail("parts", "no disk tier");
      write_disk(w, e);
    } else if (part == "remote") {
      write_remote(w, *state.shared.remote);
    } else if (part == "pins") {
      write_pins(w, e);
    } else {
      op.fail("parts", "unknown snapshot part '" + part + "'");
    }
  }
  w.end_object();
}

// ----------------------------------------------------------------------------- common ops

namespace {

lm::CacheEngineKey chunk_key(const OpFields& op, CaseState& state, lm::LMCacheEngine& e) {
  std::vector<lm::TokenId> tokens = read_tokens(op, state);
  std::optional<lm::RequestConfigs> configs = read_request_configs(op, "request_configs");
  std::vector<lm::ChunkInfo> infos = e.chunk_infos(tokens, configs ? &*configs : nullptr);
  int64_t chunk = op.i64("chunk");
  if (chunk < 0 || chunk >= static_cast<int64_t>(infos.size()))
    op.fail("chunk",
            "chunk index outside the sequence's " + std::to_string(infos.size()) + " chunks");
  lm::CacheEngineKey key = infos[static_cast<size_t>(chunk)].key;
  if (op.has_value("layer")) key = key.layer(static_cast<int>(op.i64("layer")));
  return key;
}

}  // namespace

std::optional<std::string> common_op(std::string_view name, const OpFields& op, CaseState& state) {
  JsonWriter w;
  if (name == "def_seq") {
    state.seqs[std::string(op.str("name"))] = read_token_list(op, op.element("tokens"), "tokens");
    return std::string();
  }
  if (name == "quiesce") {
    int disk = 0, remote = 0;
    for (auto& [rank, e] : state.engines) {
      lm::StorageManager::Completed c = e->storage_manager().complete_all_writes();
      disk += c.disk;
      remote += c.remote;
    }
    w.begin_object().key("completed").begin_object().key("disk").value(disk);
    w.key("remote").value(remote).end_object();
    if (any_removed(state)) {
      w.key("removed");
      write_removed(w, state, state.engines.size() > 1);
    }
    w.end_object();
    drain_events(state);
    return w.take();
  }
  if (name == "snapshot") {
    write_snapshot(w, op, state);
    return w.take();
  }
  if (name == "disk_unlink") {
    lm::LMCacheEngine& e = state.engine(op_rank(op, state));
    lm::CacheEngineKey key = chunk_key(op, state, e);
    bool existed = state.shared.disk->remove(key.disk_file_name());
    w.begin_object().key("existed").value(existed).end_object();
    return w.take();
  }
  if (name == "remote_evict") {
    lm::LMCacheEngine& e = state.engine(op_rank(op, state));
    lm::CacheEngineKey key = chunk_key(op, state, e);
    std::string k = key.to_string();
    std::string_view part = op.str("part");
    int deleted = 0;
    if (part == "kv_bytes" || part == "both") deleted += state.shared.remote->delete_kv_bytes(k);
    if (part == "metadata" || part == "both") deleted += state.shared.remote->delete_metadata(k);
    if (part != "kv_bytes" && part != "metadata" && part != "both")
      op.fail("part", "expected kv_bytes, metadata or both");
    w.begin_object().key("deleted").value(deleted).end_object();
    return w.take();
  }
  return std::nullopt;
}

}  // namespace kvtwin::sim::golden::lmcache_replay

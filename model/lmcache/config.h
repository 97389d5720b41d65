// LMCacheEngineConfig: the LMCache settings the model honours (v1/config.py names, sizes in bytes
// instead of GB: upstream's int(GB * 2^30)), plus the quirk switches.
//
// Not modelled: blending, PD, P2P, NIXL, GDS, CacheGen/KIVI serde, the controller, health-monitor
// timing, PinMonitor timeouts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/lmcache/quirks.h"

namespace kvtwin::model::lmcache {

enum class CachePolicyKind {
  kLru,
  kLfu,
  kFifo,
  kMru,
  // Extension beyond upstream f4261ef6 (S3-FIFO arrived in LMCache in July 2026): small FIFO +
  // main FIFO + ghost list, see s3fifo_policy.h.
  kS3Fifo,
};

std::optional<CachePolicyKind> cache_policy_from_name(std::string_view name);  // case-insensitive
std::string_view cache_policy_name(CachePolicyKind kind);

struct LMCacheEngineConfig {
  int chunk_size = 256;
  bool save_unfull_chunk = false;
  std::string pre_caching_hash_algorithm = "builtin";
  std::string python_hash_seed = "0";

  bool local_cpu = true;  // hot cache on; false: the CPU pool only stages I/O
  uint64_t max_local_cpu_size_bytes = 5ULL << 30;
  bool local_disk = false;
  uint64_t max_local_disk_size_bytes = 0;
  bool remote = false;  // remote_url set: a Redis connector with naive serde
  CachePolicyKind cache_policy = CachePolicyKind::kLru;

  bool use_layerwise = false;
  bool save_decode_cache = false;
  bool force_store_wait = false;  // extra_config: stores busy-wait for memory
  // Scheduler-driven lookup + prefetch (async_prefetch.h). The lookup client answers "pending"
  // until every rank answered; after lookup_timeout_ms it answers 0. lookup_backoff_time_s
  // (extra_config) is the scheduler's sleep after sending a lookup and on each pending check.
  bool enable_async_loading = false;
  int64_t lookup_timeout_ms = 3000;
  double lookup_backoff_time_s = 0.01;
  // extra_config save_only_first_rank / remote_enable_mla_worker_id_as0; unset = use_mla.
  std::optional<bool> save_only_first_rank;
  std::optional<bool> remote_enable_mla_worker_id_as0;

  // Adapter settings.
  int min_retrieve_tokens = 0;
  std::optional<int64_t> priority_limit;

  Quirks quirks;
};

}  // namespace kvtwin::model::lmcache

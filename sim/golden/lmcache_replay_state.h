// Internal to the LMCache golden replayer: the state of one case and the helpers its op handlers
// share (lmcache_replay*.cc). Not a public interface.
//
// Schedule (golden README §4): writes are held until `quiesce` (disk in submission order, then
// remote); remote gets run in key order; after every op the executor results are released
// (LMCacheEngine::end_of_operation), which together with the model's Python-reference counting
// reproduces "leaked objects are reclaimed at the end of the op".
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/lmcache/cache_engine.h"
#include "model/lmcache/lookup_client.h"
#include "model/lmcache/vllm_scheduler_adapter.h"
#include "model/lmcache/vllm_worker_adapter.h"
#include "sim/golden/json.h"
#include "sim/golden/oplog.h"

namespace kvtwin::sim::golden::lmcache_replay {

namespace lm = kvtwin::model::lmcache;

struct CaseState {
  bool connector = false;
  lm::LMCacheEngineConfig config;
  lm::AdapterConfig adapter;
  std::vector<lm::LMCacheMetadata> rank_metadata;  // per rank, in `ranks` order
  std::vector<int> ranks;
  lm::SharedStorage shared;
  std::shared_ptr<lm::KeyScopeRegistry> registry = std::make_shared<lm::KeyScopeRegistry>();
  std::map<int, std::unique_ptr<lm::LMCacheEngine>> engines;
  std::map<std::string, std::vector<lm::TokenId>> seqs;

  // Connector kind.
  std::unique_ptr<lm::LMCacheLookupClient> lookup_client;
  std::unique_ptr<lm::LMCacheSchedulerAdapter> scheduler;
  std::map<int, std::unique_ptr<lm::LMCacheWorkerAdapter>> workers;
  std::unordered_map<std::string, std::unique_ptr<lm::VllmRequest>> requests;
  lm::ConnectorMetadata meta;

  int default_rank() const { return ranks.front(); }
  lm::LMCacheEngine& engine(int rank);
};

// Builds the engines (and adapters) from the header; throws InputError on bad config and on a
// `derived` value the model disagrees with.
void setup_case(const OpFields& header, CaseState* state);

// Token inputs ("tokens" or "token_parts").
std::vector<lm::TokenId> read_tokens(const OpFields& op, const CaseState& state);
std::vector<lm::TokenId> read_token_list(const OpFields& op, simdjson::dom::element e,
                                         std::string_view field);
// "request_configs" (absent or null -> nullopt), in insertion order.
std::optional<lm::RequestConfigs> read_request_configs(const OpFields& op, std::string_view field);
int op_rank(const OpFields& op, const CaseState& state);

// Writers.
std::string kid(const lm::CacheEngineKey& key, bool with_rank, int rank);
void write_ranges(JsonWriter& w, const std::vector<lm::TokenRange>& ranges);
void write_pin_map(JsonWriter& w, const lm::PinMap& pins);
// "removed": {"cpu": [...], "disk": [...]} from every engine's events (drained); keys get a
// "rank<r>:" prefix when `multi_rank`.
void write_removed(JsonWriter& w, CaseState& state, bool multi_rank);
bool any_removed(const CaseState& state);
// "writes": {"disk": n, "remote": n} without zero entries; nothing when both are zero. Drains the
// counters.
void write_writes(JsonWriter& w, CaseState& state);
void drain_events(CaseState& state);
void write_snapshot(JsonWriter& w, const OpFields& op, CaseState& state);

// Op handlers: each returns the actual output JSON, or "" for ops without output.
std::string engine_op(std::string_view name, const OpFields& op, CaseState& state);
std::string connector_op(std::string_view name, const OpFields& op, CaseState& state);
// Ops both kinds share (def_seq, quiesce, snapshot, remote_evict, disk_unlink); nullopt when
// `name` is not one of them.
std::optional<std::string> common_op(std::string_view name, const OpFields& op, CaseState& state);

}  // namespace kvtwin::sim::golden::lmcache_replay

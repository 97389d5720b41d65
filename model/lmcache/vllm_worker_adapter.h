// The worker side of LMCache's vLLM v1 connector (LMCacheConnectorV1Impl, worker role) for one
// rank, as pure decisions over that rank's LMCacheEngine.
//
//   start_load_kv(meta)    per request with a LoadSpec: retrieve tokens[:lmcache_cached] with the
//                          first floor(vllm_cached / C) * C tokens masked (chunk-granular: it may
//                          reload tokens vLLM already holds). Fewer tokens than
//                          lmcache_cached - vllm_cached -> the vLLM blocks of the missing positions
//                          are reported (get_block_ids_with_load_errors). Layerwise: a
//                          retrieve_layer generator per request, advanced twice.
//   wait_for_layer_load()  layerwise: advance every retriever once.
//   save_kv_layer(meta)    layerwise: at layer 0 create a store_layer generator per saving request;
//                          advance every storer once per layer.
//   wait_for_save(meta)    layerwise: advance the storers once more, then unpin every request's
//                          lookup. Otherwise per request: unpin its lookup, then store its tokens
//                          (a non-final prefill step is cut to a chunk multiple) with the first
//                          skip_leading_tokens (rounded down to a chunk) masked.
//
// An UpstreamError from the engine propagates (the caller ends the rank's step, as upstream's
// exception would). `log` receives every engine call the adapter makes, for the golden replay and
// the simulator's accounting; a bulk store that raises after its GPU -> CPU copy still adds the
// copied chunks to `log->stored` (no call is logged for it).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/lmcache/cache_engine.h"
#include "model/lmcache/layerwise_tasks.h"
#include "model/lmcache/vllm_scheduler_adapter.h"

namespace kvtwin::model::lmcache {

struct AdapterCall {
  enum class Kind { kRetrieve, kStore, kRetrieveLayer, kStoreLayer, kUnpin };
  Kind kind = Kind::kRetrieve;
  std::optional<std::string> req_id;  // null for retrieve_layer (upstream passes no req_id)
  int64_t num_tokens = 0;
  int64_t num_masked = 0;
  int64_t ret_tokens = 0;          // retrieve
  size_t num_loaded = 0;           // retrieve, retrieve_layer: its chunks in WorkerLog::loaded
  std::vector<TokenRange> stored;  // store
  PinMap unpinned;                 // unpin
};

struct WorkerLog {
  std::vector<AdapterCall> calls;
  std::vector<TokenRange> stored;
  std::vector<LoadedChunk> loaded;
};

class LMCacheWorkerAdapter {
 public:
  LMCacheWorkerAdapter(LMCacheEngine* engine, const AdapterConfig& adapter);

  void start_load_kv(ConnectorMetadata& meta, WorkerLog* log);
  void wait_for_layer_load(WorkerLog* log);
  void save_kv_layer(ConnectorMetadata& meta, WorkerLog* log);
  void wait_for_save(ConnectorMetadata& meta, WorkerLog* log);
  // Not upstream: a layerwise store of this step raised (upstream's engine would stop there), and
  // the simulator goes on without the step's stores. They are dropped, so that later
  // save_kv_layer calls and wait_for_save neither advance them nor raise (wait_for_save still
  // unpins). Returns, per chunk a dropped store had allocated, the layers it had copied off the
  // GPU: the layers it had put, and the one whose put raised (its objects were copied first, and
  // some may be in the CPU tier and behind it on disk or in Redis).
  std::vector<std::pair<TokenRange, int>> abandon_stores();
  // The vLLM block ids whose load failed since the last call (sorted).
  std::vector<int64_t> get_block_ids_with_load_errors();

  LMCacheEngine& engine() { return *engine_; }

 private:
  void unpin(const std::string& req_id, WorkerLog* log);
  LMCacheEngine* engine_;
  AdapterConfig adapter_;
  int chunk_size_;
  int current_layer_ = 0;
  std::vector<std::unique_ptr<RetrieveLayerTask>> retrievers_;
  std::vector<std::unique_ptr<StoreLayerTask>> storers_;
  std::set<int64_t> invalid_block_ids_;
};

}  // namespace kvtwin::model::lmcache

// StoreLayerTask and RetrieveLayerTask: LMCacheEngine.store_layer / retrieve_layer, which upstream
// are Python generators driven one step per attention layer by the vLLM adapter. Each next() runs
// the generator to its next yield and returns true, or returns false where Python raises
// StopIteration. An UpstreamError thrown from next() finishes the generator, as an exception does.
//
// store_layer (L layers; L+1 yields):
//   next #1      for each chunk: skip it if its layer-0 key is in any tier (`continue`); else
//                batched_allocate L layer objects in one block (stop at the first failure);
//                start copying layer 0                                              -> yield
//   next #2..L+1 put layer i-2 of every chunk (StorageManager.batched_put)           -> yield
//   with nothing to store: L + 1 empty yields; frozen: L empty yields.
//
// retrieve_layer (L + 2 yields):
//   next #1      prefix of chunks whose layer-0 key is in a tier — all must be in the SAME tier
//                (AssertionError otherwise); request layer 0 from that tier      -> yield hit
//                tokens
//   next #2..L   load layer i-2 into the GPU, request layer i-1                    -> yield None
//   next #L+1    load layer L-1; ref_count_down every object                       -> yield None
//   next #L+2                                                                      -> yield mask
//   with zero hits: L + 1 empty yields, then the last step references an undefined consumer
//   (UnboundLocalError; Quirks::retrieve_layer_zero_hits_unbound).
//   A tier that answers a layer with a miss (only the fixed disk tier does: a missing file) ends
//   the load at that chunk: its mask bits and those of later chunks are cleared and later layers
//   are requested for the earlier chunks only.
//
// The tasks hold Python references to their objects, as the generator frames do; destroying a
// task abandons the generator (objects whose last reference it held are then reclaimed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache {

class StoreLayerTask {
 public:
  StoreLayerTask(LMCacheEngine* engine, const StoreRequest& req);
  bool next();
  int yields() const { return yields_; }
  // Chunks allocated (filled after the first next()).
  const std::vector<TokenRange>& stored() const { return stored_; }
  // Layers of those chunks put into the storage manager so far (0 … num_layers).
  int layers_put() const { return layer_; }
  // Layers copied off the GPU so far: upstream copies a layer (batched_from_gpu's next step) just
  // before putting it, so after a put that raised this is layers_put() + 1 (that layer's objects
  // were copied, and the put may have placed some of them in the tiers).
  int layers_copied() const { return copied_; }

 private:
  enum class Phase { kStart, kKeys, kEmpty, kFrozen, kFinal, kDone };
  void start();
  LMCacheEngine* engine_;
  std::vector<TokenId> tokens_;
  int64_t num_masked_;
  RequestConfigs configs_;
  bool has_configs_;
  Phase phase_ = Phase::kStart;
  int yields_ = 0;
  int layer_ = 0;
  int copied_ = 0;
  std::vector<TokenRange> stored_;
  std::vector<std::vector<CacheEngineKey>> keys_;  // [layer][chunk]
  std::vector<std::vector<PyRef>> objs_;           // [layer][chunk]
};

class RetrieveLayerTask {
 public:
  RetrieveLayerTask(LMCacheEngine* engine, const RetrieveRequest& req);
  bool next();
  int yields() const { return yields_; }
  // The value of the first yield (hit tokens), and the final mask once yielded.
  int64_t first_yield() const { return first_yield_; }
  bool mask_yielded() const { return mask_yielded_; }
  const std::vector<TokenRange>& ret_mask() const { return ret_mask_runs_; }
  int64_t ret_tokens() const { return ret_tokens_; }
  const std::vector<LoadedChunk>& loaded() const { return loaded_; }
  const std::vector<GetCall>& gets() const { return gets_; }

 private:
  enum class Phase { kStart, kKeys, kSync, kMask, kEmpty, kEmptyTail, kUnhealthy, kDone };
  void start();
  void load_layer(std::vector<PyRef>& objs, int layer);
  void truncate(size_t first_missing);
  void yield_mask();
  LMCacheEngine* engine_;
  std::vector<TokenId> tokens_;
  int64_t num_masked_;
  RequestConfigs configs_;
  bool has_configs_;
  Phase phase_ = Phase::kStart;
  int yields_ = 0;
  int layer_ = 0;
  int64_t first_yield_ = 0;
  bool mask_yielded_ = false;
  std::vector<char> ret_mask_;
  std::vector<TokenRange> ret_mask_runs_;
  int64_t ret_tokens_ = 0;
  std::string location_;
  std::vector<std::vector<CacheEngineKey>> keys_;  // [layer][chunk]
  std::vector<TokenRange> ranges_;                 // per chunk
  std::vector<PyRef> pending_;                     // the layer requested last
  std::vector<PyRef> to_count_down_;
  std::vector<LoadedChunk> loaded_;
  std::vector<GetCall> gets_;
};

}  // namespace kvtwin::model::lmcache

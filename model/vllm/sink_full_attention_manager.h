// SinkFullAttentionManager: full attention plus sink_len attention-sink tokens whose blocks are
// taken from the free-queue head when the manager is built and never returned (vLLM's
// SinkFullAttentionManager). They keep ref_cnt 0 outside the queue, count as used in usage, and
// make reset_prefix_cache fail forever (it requires the null block to be the only used block).
#pragma once

#include <vector>

#include "model/vllm/full_attention_manager.h"

namespace kvtwin::model::vllm {

class SinkFullAttentionManager : public FullAttentionManager {
 public:
  // REQUIRES: sink_len > 0 and a multiple of the block size.
  explicit SinkFullAttentionManager(const SingleTypeManagerOptions& options);

  const std::vector<BlockId>& sink_blocks() const { return sink_blocks_; }

 private:
  std::vector<BlockId> sink_blocks_;
};

}  // namespace kvtwin::model::vllm

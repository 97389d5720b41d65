#include "model/vllm/sink_full_attention_manager.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

SinkFullAttentionManager::SinkFullAttentionManager(const SingleTypeManagerOptions& options)
    : FullAttentionManager(options) {
  int sink_len = spec_.sink_len;
  KVTWIN_CHECK(sink_len > 0 && sink_len % block_size_ == 0)
      << "sink_len " << sink_len << " with block size " << block_size_;
  block_pool_->mutable_free_block_queue().popleft_n(sink_len / block_size_, &sink_blocks_);
  block_pool_->mark_detached(sink_blocks_);
}

}  // namespace kvtwin::model::vllm

#include "model/vllm/request.h"

#include <algorithm>

#include "model/check.h"
#include "model/vllm/request_block_hasher.h"

namespace kvtwin::model::vllm {

Request::Request(std::string request_id, std::vector<TokenId> prompt_token_ids,
                 RequestOptions options, RequestBlockHasher* block_hasher)
    : request_id_(std::move(request_id)),
      options_(std::move(options)),
      all_token_ids_(std::move(prompt_token_ids)),
      num_prompt_tokens_(static_cast<int64_t>(all_token_ids_.size())),
      block_hasher_(block_hasher) {
  // Room for the outputs, so that decoding does not reallocate the prompt.
  if (options_.max_tokens > 0)
    all_token_ids_.reserve(all_token_ids_.size() +
                           static_cast<size_t>(std::min<int64_t>(options_.max_tokens, 4096)));
  update_block_hashes();
}

Request::Request(std::string request_id, std::vector<TokenId> prompt_token_ids,
                 RequestOptions options, RequestBlockHasher* block_hasher,
                 std::vector<BlockHash> known_block_hashes)
    : request_id_(std::move(request_id)),
      options_(std::move(options)),
      all_token_ids_(std::move(prompt_token_ids)),
      num_prompt_tokens_(static_cast<int64_t>(all_token_ids_.size())),
      block_hashes_(std::move(known_block_hashes)),
      block_hasher_(block_hasher) {
  KVTWIN_CHECK(!options_.lora_request && options_.mm_features.empty() && !options_.cache_salt)
      << "request " << request_id_ << ": known block hashes with extra keys";
  KVTWIN_CHECK(block_hasher_ != nullptr || block_hashes_.empty())
      << "request " << request_id_ << ": known block hashes without a hasher";
  if (block_hasher_ != nullptr)
    KVTWIN_CHECK_LE(static_cast<int64_t>(block_hashes_.size()) * block_hasher_->block_size(),
                    num_prompt_tokens_)
        << "request " << request_id_ << ": more known block hashes than full blocks";
  if (options_.max_tokens > 0)  // as above
    all_token_ids_.reserve(all_token_ids_.size() +
                           static_cast<size_t>(std::min<int64_t>(options_.max_tokens, 4096)));
  update_block_hashes();
}

size_t Request::append_output_token_ids(std::span<const TokenId> token_ids) {
  all_token_ids_.insert(all_token_ids_.end(), token_ids.begin(), token_ids.end());
  size_t before = block_hashes_.size();
  update_block_hashes();
  return block_hashes_.size() - before;
}

void Request::update_block_hashes() {
  if (block_hasher_ != nullptr) block_hasher_->hash_new_blocks(*this, &block_hashes_);
}

}  // namespace kvtwin::model::vllm

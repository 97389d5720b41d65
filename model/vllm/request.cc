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
  all_token_ids_.reserve(token_capacity(all_token_ids_.size(), options_.max_tokens));
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
  KVTWIN_CHECK(options_.mm_features.empty() || block_hashes_.empty())
      << "request " << request_id_ << ": known block hashes with multimodal inputs";
  KVTWIN_CHECK(block_hasher_ != nullptr || block_hashes_.empty())
      << "request " << request_id_ << ": known block hashes without a hasher";
  if (block_hasher_ != nullptr)
    KVTWIN_CHECK_LE(static_cast<int64_t>(block_hashes_.size()) * block_hasher_->block_size(),
                    num_prompt_tokens_)
        << "request " << request_id_ << ": more known block hashes than full blocks";
  all_token_ids_.reserve(token_capacity(all_token_ids_.size(), options_.max_tokens));  // as above
  update_block_hashes();
}

size_t Request::append_output_token_ids(std::span<const TokenId> token_ids) {
  if (token_ids.size() == 1) {  // decoding: one token per step
    all_token_ids_.push_back(token_ids[0]);
  } else {
    all_token_ids_.insert(all_token_ids_.end(), token_ids.begin(), token_ids.end());
  }
  if (block_hasher_ == nullptr) return 0;
  // Most appends complete no block: skip the hasher call.
  size_t before = block_hashes_.size();
  if ((before + 1) * static_cast<size_t>(block_hasher_->block_size()) > all_token_ids_.size())
    return 0;
  update_block_hashes();
  return block_hashes_.size() - before;
}

void Request::update_block_hashes() {
  if (block_hasher_ != nullptr) block_hasher_->hash_new_blocks(*this, &block_hashes_);
}

}  // namespace kvtwin::model::vllm

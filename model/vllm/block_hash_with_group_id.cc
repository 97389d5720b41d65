#include "model/vllm/block_hash_with_group_id.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

BlockHashWithGroupId::BlockHashWithGroupId(std::span<const uint8_t> hash_bytes, uint32_t group_id) {
  KVTWIN_CHECK(!hash_bytes.empty()) << "a block hash key needs hash bytes";
  size_ = static_cast<uint32_t>(hash_bytes.size() + 4);
  uint8_t* out = inline_.data();
  if (size_ > kInlineSize) {
    heap_ = std::make_unique<uint8_t[]>(size_);
    out = heap_.get();
  }
  std::memcpy(out, hash_bytes.data(), hash_bytes.size());
  out += hash_bytes.size();
  out[0] = static_cast<uint8_t>(group_id >> 24);
  out[1] = static_cast<uint8_t>(group_id >> 16);
  out[2] = static_cast<uint8_t>(group_id >> 8);
  out[3] = static_cast<uint8_t>(group_id);
}

uint32_t BlockHashWithGroupId::group_id() const {
  KVTWIN_CHECK_GE(size_, 4u);
  const uint8_t* g = data() + size_ - 4;
  return uint32_t{g[0]} << 24 | uint32_t{g[1]} << 16 | uint32_t{g[2]} << 8 | g[3];
}

BlockHashWithGroupId& BlockHashWithGroupId::operator=(const BlockHashWithGroupId& other) {
  if (this == &other) return *this;
  size_ = other.size_;
  inline_ = other.inline_;
  if (other.size_ > kInlineSize) {
    heap_ = std::make_unique<uint8_t[]>(other.size_);
    std::memcpy(heap_.get(), other.heap_.get(), other.size_);
  }
  return *this;
}

BlockHashListWithBlockSize::BlockHashListWithBlockSize(std::span<const BlockHash> block_hashes,
                                                       int hash_block_size, int target_block_size)
    : hashes_(block_hashes), scale_(target_block_size / hash_block_size) {
  KVTWIN_CHECK(hash_block_size > 0 && target_block_size % hash_block_size == 0)
      << "block size " << target_block_size << " is not a multiple of hash block size "
      << hash_block_size;
}

std::span<const uint8_t> BlockHashListWithBlockSize::merged_at(
    int i, std::vector<uint8_t>* scratch) const {
  KVTWIN_CHECK(i >= 0 && i < size()) << "block hash index " << i << " of " << size();
  if (scale_ == 1) return hashes_[static_cast<size_t>(i)].bytes();
  scratch->clear();
  size_t base = static_cast<size_t>(i) * static_cast<size_t>(scale_);
  for (size_t j = base; j < base + static_cast<size_t>(scale_); ++j) {
    auto b = hashes_[j].bytes();
    scratch->insert(scratch->end(), b.begin(), b.end());
  }
  return {scratch->data(), scratch->size()};
}

}  // namespace kvtwin::model::vllm

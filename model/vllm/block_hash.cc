#include "model/vllm/block_hash.h"

namespace kvtwin::model::vllm {
namespace {
constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void append_hex(std::span<const uint8_t> bytes, std::string* out) {
  size_t at = out->size();
  out->resize(at + 2 * bytes.size());
  for (uint8_t b : bytes) {
    (*out)[at++] = kHexDigits[b >> 4];
    (*out)[at++] = kHexDigits[b & 15];
  }
}

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string s;
  append_hex(bytes, &s);
  return s;
}

std::string BlockHash::hex() const {
  return to_hex(bytes());
}

bool BlockHash::from_hex(std::string_view hex, BlockHash* out) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() / 2 > kMaxSize) return false;
  BlockHash h;
  h.size_ = static_cast<uint8_t>(hex.size() / 2);
  for (size_t i = 0; i < h.size_; ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    h.data_[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *out = h;
  return true;
}

uint64_t BlockHash::low64() const {
  return int_block_hash(bytes());
}

}  // namespace kvtwin::model::vllm

#include "cuda/tiers/host_buffer.h"

#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kvtwin::cuda::tiers {

HostBuffer::HostBuffer(size_t size) : size_(size), capacity_(round_up_to_block(size)) {
  if (capacity_ == 0) return;
  void* p = std::aligned_alloc(kDirectIoAlign, capacity_);
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
  std::memset(data_, 0, capacity_);
}

HostBuffer::~HostBuffer() {
  std::free(data_);
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

namespace {

// splitmix64's output function applied to a counter: word i of the object seeded `seed`.
inline uint64_t content_word(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t content_seed(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

}  // namespace

void fill_content(std::string_view key, std::span<uint8_t> out) {
  const uint64_t seed = content_seed(key);
  const size_t num_words = out.size() / 8;
  uint8_t* p = out.data();
  for (size_t i = 0; i < num_words; ++i) {
    const uint64_t w = content_word(seed, i);
    std::memcpy(p + i * 8, &w, 8);
  }
  const size_t tail = out.size() - num_words * 8;
  if (tail > 0) {
    const uint64_t w = content_word(seed, num_words);
    std::memcpy(p + num_words * 8, &w, tail);
  }
}

size_t first_content_mismatch(std::string_view key, std::span<const uint8_t> data) {
  const uint64_t seed = content_seed(key);
  const size_t num_words = data.size() / 8;
  const uint8_t* p = data.data();
  for (size_t i = 0; i < num_words; ++i) {
    const uint64_t w = content_word(seed, i);
    if (std::memcmp(p + i * 8, &w, 8) != 0) {
      for (size_t b = 0; b < 8; ++b)
        if (p[i * 8 + b] != reinterpret_cast<const uint8_t*>(&w)[b]) return i * 8 + b;
    }
  }
  const size_t tail = data.size() - num_words * 8;
  if (tail > 0) {
    const uint64_t w = content_word(seed, num_words);
    for (size_t b = 0; b < tail; ++b)
      if (p[num_words * 8 + b] != reinterpret_cast<const uint8_t*>(&w)[b]) return num_words * 8 + b;
  }
  return data.size();
}

}  // namespace kvtwin::cuda::tiers

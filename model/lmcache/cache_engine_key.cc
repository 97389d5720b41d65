#include "model/lmcache/cache_engine_key.h"

#include <cstring>

#include "model/check.h"

namespace kvtwin::model::lmcache {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

constexpr std::string_view kTagPrefix = "lmcache.tag.";

}  // namespace

// ----------------------------------------------------------------------------- ChunkHash

ChunkHash ChunkHash::from_digest(const vllm::BlockHash& digest) {
  ChunkHash h;
  h.digest_ = digest;
  h.is_int_ = false;
  uint64_t v = 0;
  std::memcpy(&v, digest.data(), std::min<size_t>(8, digest.size()));
  h.fingerprint_ = mix64(v ^ digest.size());
  return h;
}

ChunkHash ChunkHash::from_int(int64_t value) {
  ChunkHash h;
  h.int_value_ = value;
  h.is_int_ = true;
  h.fingerprint_ = mix64(static_cast<uint64_t>(value) ^ 0x5bd1e995ULL);
  return h;
}

void ChunkHash::append_hex(std::string* out) const {
  if (!is_int_) {
    vllm::append_hex(digest_.bytes(), out);
    return;
  }
  // Python format(h, "x"): lowercase hex of |h| with a '-' for negative values.
  uint64_t mag =
      int_value_ < 0 ? ~static_cast<uint64_t>(int_value_) + 1 : static_cast<uint64_t>(int_value_);
  if (int_value_ < 0) out->push_back('-');
  char buf[17];
  int n = 0;
  do {
    buf[n++] = "0123456789abcdef"[mag & 15];
    mag >>= 4;
  } while (mag != 0);
  while (n > 0) out->push_back(buf[--n]);
}

std::string ChunkHash::hex() const {
  std::string s;
  append_hex(&s);
  return s;
}

// ----------------------------------------------------------------------------- scopes

std::vector<KeyTag> tags_of(const RequestConfigs* configs) {
  std::vector<KeyTag> tags;
  if (configs == nullptr) return tags;
  for (const auto& [name, value] : *configs) {
    if (name.size() >= kTagPrefix.size() && name.compare(0, kTagPrefix.size(), kTagPrefix) == 0)
      tags.push_back({name.substr(kTagPrefix.size()), value});
  }
  return tags;
}

const KeyScope* KeyScopeRegistry::intern(std::string_view model_name, int world_size, int worker_id,
                                         KvDtype dtype, std::vector<KeyTag> tags) {
  std::string prefix = std::string(model_name) + "@" + std::to_string(world_size) + "@" +
                       std::to_string(worker_id) + "@";
  std::string tag_suffix;
  for (const KeyTag& t : tags) tag_suffix += "@" + t.name + "%" + t.value.text;
  // The canonical description also carries the tag value kinds ("1" and 1 differ upstream).
  std::string canonical = prefix + "@" + std::string(dtype_str(dtype)) + tag_suffix;
  for (const KeyTag& t : tags) canonical += "|" + std::to_string(static_cast<int>(t.value.kind));
  auto it = scopes_.find(canonical);
  if (it != scopes_.end()) return it->second.get();
  auto scope = std::make_unique<KeyScope>();
  scope->model_name = std::string(model_name);
  scope->world_size = world_size;
  scope->worker_id = worker_id;
  scope->dtype = dtype;
  scope->tags = std::move(tags);
  scope->prefix = std::move(prefix);
  scope->tag_suffix = std::move(tag_suffix);
  scope->fingerprint = fnv1a(canonical);
  const KeyScope* out = scope.get();
  scopes_.emplace(std::move(canonical), std::move(scope));
  return out;
}

// ----------------------------------------------------------------------------- keys

std::vector<CacheEngineKey> CacheEngineKey::split_layers(int num_layers) const {
  std::vector<CacheEngineKey> keys;
  keys.reserve(num_layers);
  for (int l = 0; l < num_layers; ++l) keys.push_back(layer(l));
  return keys;
}

void CacheEngineKey::append_kid(std::string* s) const {
  chunk_hash.append_hex(s);
  *s += '@';
  *s += dtype_str(scope->dtype);
  if (layer_id >= 0) {
    *s += '@';
    *s += std::to_string(layer_id);
  }
  *s += scope->tag_suffix;
}

std::string CacheEngineKey::kid() const {
  KVTWIN_CHECK(scope != nullptr) << "key without scope";
  std::string s;
  s.reserve(64 + 16 + scope->tag_suffix.size());
  append_kid(&s);
  return s;
}

std::string CacheEngineKey::to_string() const {
  KVTWIN_CHECK(scope != nullptr) << "key without scope";
  std::string s;
  s.reserve(scope->prefix.size() + 64 + 16 + scope->tag_suffix.size());
  s += scope->prefix;
  append_kid(&s);
  return s;
}

std::string CacheEngineKey::disk_file_name() const {
  KVTWIN_CHECK(scope != nullptr) << "key without scope";
  std::string s;
  s.reserve(scope->prefix.size() + 64 + 16 + scope->tag_suffix.size() + 3);
  s += scope->prefix;
  append_kid(&s);
  for (char& c : s) {
    if (c == '/') c = '-';
  }
  s += ".pt";
  return s;
}

}  // namespace kvtwin::model::lmcache

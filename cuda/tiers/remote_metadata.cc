#include "cuda/tiers/remote_metadata.h"

#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

void store_i32(uint8_t* p, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
}
int32_t load_i32(const uint8_t* p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= static_cast<uint32_t>(p[i]) << (8 * i);
  return static_cast<int32_t>(u);
}

}  // namespace

RemoteMetadata opaque_metadata(uint64_t bytes) {
  KVTWIN_CHECK_LT(bytes, uint64_t{1} << 31) << "LMCache remote metadata holds an int32 length";
  RemoteMetadata m;
  m.length = static_cast<int32_t>(bytes);
  m.fmt = MemoryFormat::kKv2LTD;
  m.dtype = DtypeCode::kUint8;
  m.shape = {1, 1, 1, static_cast<int32_t>(bytes)};
  return m;
}

std::array<uint8_t, kRemoteMetadataBytes> encode_remote_metadata(const RemoteMetadata& m) {
  std::array<uint8_t, kRemoteMetadataBytes> out{};
  store_i32(out.data() + 0, m.length);
  store_i32(out.data() + 4, static_cast<int32_t>(m.fmt));
  store_i32(out.data() + 8, static_cast<int32_t>(m.dtype));
  for (size_t i = 0; i < 4; ++i) store_i32(out.data() + 12 + 4 * i, m.shape[i]);
  return out;
}

std::optional<RemoteMetadata> decode_remote_metadata(std::span<const uint8_t> bytes) {
  if (bytes.size() != kRemoteMetadataBytes) return std::nullopt;
  RemoteMetadata m;
  m.length = load_i32(bytes.data());
  if (m.length < 0) return std::nullopt;
  m.fmt = static_cast<MemoryFormat>(load_i32(bytes.data() + 4));
  m.dtype = static_cast<DtypeCode>(load_i32(bytes.data() + 8));
  for (size_t i = 0; i < 4; ++i) m.shape[i] = load_i32(bytes.data() + 12 + 4 * i);
  return m;
}

}  // namespace kvtwin::cuda::tiers

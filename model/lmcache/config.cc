#include "model/lmcache/config.h"

#include <cctype>
#include <string>

namespace kvtwin::model::lmcache {

std::optional<CachePolicyKind> cache_policy_from_name(std::string_view name) {
  std::string upper;
  for (char c : name)
    upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (upper == "LRU") return CachePolicyKind::kLru;
  if (upper == "LFU") return CachePolicyKind::kLfu;
  if (upper == "FIFO") return CachePolicyKind::kFifo;
  if (upper == "MRU") return CachePolicyKind::kMru;
  if (upper == "S3FIFO" || upper == "S3-FIFO") return CachePolicyKind::kS3Fifo;
  return std::nullopt;
}

std::string_view cache_policy_name(CachePolicyKind kind) {
  switch (kind) {
    case CachePolicyKind::kLru:
      return "LRU";
    case CachePolicyKind::kLfu:
      return "LFU";
    case CachePolicyKind::kFifo:
      return "FIFO";
    case CachePolicyKind::kMru:
      return "MRU";
    case CachePolicyKind::kS3Fifo:
      return "S3FIFO";
  }
  return "?";
}

}  // namespace kvtwin::model::lmcache

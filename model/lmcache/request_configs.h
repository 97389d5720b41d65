// RequestConfigs: a request's `lmcache.*` settings (vLLM kv_transfer_params / LMCache
// request_configs), kept in insertion order as upstream's dict is.
//
// Values are JSON values; the model keeps their Python str() text (what f"{k}%{v}" writes into a
// key string), their kind (a tag "1" and a tag 1 are different tuple entries upstream) and their
// truthiness (`lmcache.skip_save` is tested with Python's `or`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtwin::model::lmcache {

struct ConfigValue {
  enum class Kind { kStr, kInt, kFloat, kBool, kNull, kOther };
  Kind kind = Kind::kStr;
  std::string text;  // Python str(value)
  bool truthy = true;

  static ConfigValue str(std::string s) {
    bool t = !s.empty();
    return {Kind::kStr, std::move(s), t};
  }
  static ConfigValue boolean(bool b) { return {Kind::kBool, b ? "True" : "False", b}; }
  static ConfigValue integer(long long v) { return {Kind::kInt, std::to_string(v), v != 0}; }
  friend bool operator==(const ConfigValue& a, const ConfigValue& b) {
    return a.kind == b.kind && a.text == b.text;
  }
};

using RequestConfigs = std::vector<std::pair<std::string, ConfigValue>>;

inline const ConfigValue* find_config(const RequestConfigs& configs, std::string_view name) {
  for (const auto& [k, v] : configs) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace kvtwin::model::lmcache

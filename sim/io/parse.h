// Strict parsers of the numbers (and lists) that appear in traces, scenarios and CLI values.
//
// Each returns std::nullopt unless the whole text (after trimming spaces and tabs) is one
// number of the requested type: no trailing garbage, no overflow, no empty text. Callers turn a
// nullopt into InputError with their file, line and field.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kvtwin::sim::io {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if constexpr (std::is_unsigned_v<T>) {
    if (text.front() == '-') return std::nullopt;
  }
  if (text.front() == '+') text.remove_prefix(1);
  T value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!(value == value) || value > 1e300 || value < -1e300) return std::nullopt;  // nan, inf
  }
  return value;
}

inline std::optional<int64_t> parse_int64(std::string_view t) {
  return parse_number<int64_t>(t);
}
inline std::optional<uint64_t> parse_uint64(std::string_view t) {
  return parse_number<uint64_t>(t);
}
inline std::optional<double> parse_double(std::string_view t) {
  return parse_number<double>(t);
}

// The items of a `sep`-separated list, empty items included ("a,,b" gives three; "" gives one
// empty item), as views into `text`.
inline std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> items;
  for (size_t start = 0;;) {
    const size_t end = text.find(sep, start);
    items.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return items;
    start = end + 1;
  }
}

}  // namespace kvtwin::sim::io

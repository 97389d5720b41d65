// JSON helpers shared by the golden replayers: a compact writer for actual outputs, and deep
// equality with the recorded expectation ("JSON equality" of the op-log formats).
//
// Equality: objects equal iff they have the same key set and equal values (key order is
// irrelevant); arrays element by element; numbers by value, so 1, 1.0 and an unsigned 1 are
// equal, while doubles are compared exactly (golden README: `usage` is compared exactly).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtwin::sim::golden {

// Appends compact JSON. Commas are inserted automatically; the caller balances begin/end.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(double v);  // shortest round-trip form, as Python's repr
  JsonWriter& value(bool v);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& null();
  // Inserts already-serialised JSON as one value.
  JsonWriter& raw(std::string_view json);
  template <typename Int>
  JsonWriter& int_array(const std::vector<Int>& v) {
    begin_array();
    for (Int x : v) value(static_cast<int64_t>(x));
    return end_array();
  }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  void clear() {
    out_.clear();
    need_comma_.clear();
  }

 private:
  void before_value();
  std::string out_;
  std::vector<bool> need_comma_;  // one entry per open container
  bool after_key_ = false;
};

bool json_equal(simdjson::dom::element a, simdjson::dom::element b);

// Path of the first difference between expected and actual ("" when equal), e.g.
// "$.new_block_ids[0][2]" or "$.events (length 3 vs 2)".
std::string json_first_difference(simdjson::dom::element expected, simdjson::dom::element actual);

// Compact JSON text of an element (for messages).
std::string json_text(simdjson::dom::element e);

}  // namespace kvtwin::sim::golden

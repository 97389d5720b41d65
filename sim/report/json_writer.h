// JsonWriter: a small streaming JSON writer with one fixed number format, so outputs are
// byte-identical for the same values on any machine.
//
// Numbers: integers as integers; whole doubles up to 2^53 in full (byte counts stay exact);
// other doubles with up to 9 significant digits ("%.9g"); non-finite values as null. Keys keep
// insertion order. Indentation: two spaces per level.
//
//   JsonWriter j;
//   j.begin_object(); j.key("ttft_ms"); j.begin_object(); j.field("p50", 12.5); j.end_object();
//   j.end_object(); std::string text = j.str();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtwin::sim::report {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view k);
  void value(double v);
  void value(int64_t v);
  void value(uint64_t v);
  void value(int v) { value(static_cast<int64_t>(v)); }
  void value(bool v);
  void value(std::string_view v);
  void value(const char* v) { value(std::string_view(v)); }
  template <class T>
  void field(std::string_view k, const T& v) {
    key(k);
    value(v);
  }
  // The five fields of a distribution, in this order: "mean", "p50", "p90", "p99", "max" (from
  // any struct with those members), inside the object being written.
  template <class D>
  void distribution_fields(const D& d) {
    field("mean", d.mean);
    field("p50", d.p50);
    field("p90", d.p90);
    field("p99", d.p99);
    field("max", d.max);
  }
  const std::string& str() const { return out_; }

  static std::string escape(std::string_view s);
  // Appends escape(s) to *out.
  static void append_escaped(std::string* out, std::string_view s);
  static std::string number(double v);

 private:
  void before_value();
  void newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace kvtwin::sim::report

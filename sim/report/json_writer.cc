#include "sim/report/json_writer.h"

#include <cmath>
#include <cstdio>

#include "model/check.h"

namespace kvtwin::sim::report {

std::string JsonWriter::escape(std::string_view s) {
  std::string out;
  append_escaped(&out, s);
  return out;
}

void JsonWriter::append_escaped(std::string* out, std::string_view s) {
  *out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

std::string JsonWriter::number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  // A whole value that a double holds exactly (|v| <= 2^53: byte counts, capacities) prints in
  // full; "%.9g" would round 343597383680 to 3.43597384e+11. Below 1e9 both forms agree.
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (std::fabs(v) <= kExact && v == std::trunc(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v == 0 ? 0.0 : v);  // no "-0"
  } else {
    std::snprintf(buf, sizeof buf, "%.9g", v);
  }
  return buf;
}

void JsonWriter::newline() {
  out_ += '\n';
  out_.append(2 * first_.size(), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (first_.empty()) return;
  if (!first_.back()) out_ += ',';
  first_.back() = false;
  newline();
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  first_.push_back(true);
}

void JsonWriter::end_object() {
  KVTWIN_CHECK(!first_.empty());
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ += '}';
  if (first_.empty()) out_ += '\n';
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  first_.push_back(true);
}

void JsonWriter::end_array() {
  KVTWIN_CHECK(!first_.empty());
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ += ']';
}

void JsonWriter::key(std::string_view k) {
  before_value();
  out_ += escape(k);
  out_ += ": ";
  after_key_ = true;
}

void JsonWriter::value(double v) {
  before_value();
  out_ += number(v);
}
void JsonWriter::value(int64_t v) {
  before_value();
  out_ += std::to_string(v);
}
void JsonWriter::value(uint64_t v) {
  before_value();
  out_ += std::to_string(v);
}
void JsonWriter::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
}
void JsonWriter::value(std::string_view v) {
  before_value();
  out_ += escape(v);
}

}  // namespace kvtwin::sim::report

#include "sim/golden/json.h"

#include <charconv>
#include <cmath>

namespace kvtwin::sim::golden {

// ----------------------------------------------------------------------------- JsonWriter

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!need_comma_.empty()) {
    if (need_comma_.back()) out_.push_back(',');
    need_comma_.back() = true;
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_.push_back('{');
  need_comma_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  out_.push_back('}');
  need_comma_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_.push_back('[');
  need_comma_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  out_.push_back(']');
  need_comma_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  value(k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  before_value();
  if (!std::isfinite(v)) {
    out_ += "null";  // JSON has no NaN/Infinity; never produced by the models
    return *this;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
  out_.append(s);
  if (s.find_first_of(".e") == std::string_view::npos) out_ += ".0";
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  out_.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out_ += buf;
        } else {
          out_.push_back(c);
        }
    }
  }
  out_.push_back('"');
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_.append(json);
  return *this;
}

// ----------------------------------------------------------------------------- equality

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

bool is_number(element_type t) {
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

bool numbers_equal(element a, element b) {
  element_type ta = a.type(), tb = b.type();
  if (ta == element_type::DOUBLE || tb == element_type::DOUBLE) {
    double x = ta == element_type::DOUBLE  ? double(a)
               : ta == element_type::INT64 ? static_cast<double>(int64_t(a))
                                           : static_cast<double>(uint64_t(a));
    double y = tb == element_type::DOUBLE  ? double(b)
               : tb == element_type::INT64 ? static_cast<double>(int64_t(b))
                                           : static_cast<double>(uint64_t(b));
    return x == y;
  }
  // Integers: equal iff same sign and same magnitude (int64 vs uint64 without overflow).
  if (ta == tb)
    return ta == element_type::INT64 ? int64_t(a) == int64_t(b) : uint64_t(a) == uint64_t(b);
  int64_t s = ta == element_type::INT64 ? int64_t(a) : int64_t(b);
  uint64_t u = ta == element_type::INT64 ? uint64_t(b) : uint64_t(a);
  return s >= 0 && static_cast<uint64_t>(s) == u;
}

// Returns "" when equal, else the path and reason of the first difference.
std::string diff(element a, element b, const std::string& path) {
  element_type ta = a.type(), tb = b.type();
  if (is_number(ta) && is_number(tb)) return numbers_equal(a, b) ? "" : path;
  if (ta != tb) return path + " (type)";
  switch (ta) {
    case element_type::ARRAY: {
      simdjson::dom::array x = a, y = b;
      if (x.size() != y.size())
        return path + " (length " + std::to_string(x.size()) + " vs " + std::to_string(y.size()) +
               ")";
      size_t i = 0;
      auto it = y.begin();
      for (element e : x) {
        std::string d = diff(e, *it, path + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
        ++it;
        ++i;
      }
      return "";
    }
    case element_type::OBJECT: {
      simdjson::dom::object x = a, y = b;
      if (x.size() != y.size()) {
        for (auto [k, v] : x)
          if (y[k].error()) return path + "." + std::string(k) + " (missing in actual)";
        for (auto [k, v] : y)
          if (x[k].error()) return path + "." + std::string(k) + " (unexpected in actual)";
      }
      for (auto [k, v] : x) {
        element other;
        if (y[k].get(other) != simdjson::SUCCESS)
          return path + "." + std::string(k) + " (missing in actual)";
        std::string d = diff(v, other, path + "." + std::string(k));
        if (!d.empty()) return d;
      }
      return "";
    }
    case element_type::STRING:
      return std::string_view(a) == std::string_view(b) ? "" : path;
    case element_type::BOOL:
      return bool(a) == bool(b) ? "" : path;
    case element_type::NULL_VALUE:
      return "";
    default:
      return path + " (type)";
  }
}

}  // namespace

bool json_equal(element a, element b) {
  return diff(a, b, "$").empty();
}

std::string json_first_difference(element expected, element actual) {
  return diff(expected, actual, "$");
}

std::string json_text(element e) {
  return simdjson::minify(e);
}

}  // namespace kvtwin::sim::golden

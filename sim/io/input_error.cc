#include "sim/io/input_error.h"

#include <cstdio>

namespace kvtwin::sim {
namespace {
std::string format(const std::string& file, uint64_t line, const std::string& field,
                   const std::string& message) {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  if (!field.empty()) s += ": " + field;
  s += ": " + message;
  // One line whatever the input quoted: control characters (a multi-line TOML string, a stray
  // carriage return) are written as escapes.
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || c == '\t') {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}
}  // namespace

InputError::InputError(std::string file, uint64_t line, std::string field,
                       const std::string& message)
    : std::runtime_error(format(file, line, field, message)),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)) {}

}  // namespace kvtwin::sim

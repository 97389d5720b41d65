#include "sim/io/input_error.h"

namespace kvtwin::sim {
namespace {
std::string format(const std::string& file, uint64_t line, const std::string& field,
                   const std::string& message) {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  if (!field.empty()) s += ": " + field;
  s += ": " + message;
  return s;
}
}  // namespace

InputError::InputError(std::string file, uint64_t line, std::string field,
                       const std::string& message)
    : std::runtime_error(format(file, line, field, message)),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)) {}

}  // namespace kvtwin::sim

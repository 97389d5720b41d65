#include "sim/workload/line_source.h"

namespace kvtwin::sim::workload {
namespace {

class FileLines final : public LineSource {
 public:
  explicit FileLines(const std::string& path) : reader_(path) {}
  bool next(std::string_view* line) override { return reader_.next(line); }
  uint64_t line_number() const override { return reader_.line_number(); }
  const std::string& name() const override { return reader_.path(); }

 private:
  io::LineReader reader_;
};

// Copies each line into a padded scratch buffer (the input bytes carry no padding).
class MemoryLines final : public LineSource {
 public:
  MemoryLines(std::string name, std::string_view bytes) : name_(std::move(name)), rest_(bytes) {}
  bool next(std::string_view* line) override {
    if (rest_.empty()) return false;
    size_t nl = rest_.find('\n');
    std::string_view l = rest_.substr(0, nl);
    rest_ = nl == std::string_view::npos ? std::string_view() : rest_.substr(nl + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    scratch_.assign(l);
    scratch_.append(io::LineReader::kPadding, '\0');
    *line = std::string_view(scratch_.data(), l.size());
    ++line_number_;
    return true;
  }
  uint64_t line_number() const override { return line_number_; }
  const std::string& name() const override { return name_; }

 private:
  std::string name_;
  std::string_view rest_;
  std::string scratch_;
  uint64_t line_number_ = 0;
};

}  // namespace

std::unique_ptr<LineSource> LineSource::file(const std::string& path) {
  return std::make_unique<FileLines>(path);
}
std::unique_ptr<LineSource> LineSource::memory(std::string name, std::string_view bytes) {
  return std::make_unique<MemoryLines>(std::move(name), bytes);
}

}  // namespace kvtwin::sim::workload

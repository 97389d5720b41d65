#include "sim/io/output_file.h"

#include "sim/io/input_error.h"

namespace kvtwin::sim::io {

std::FILE* create_output(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw InputError(path, 0, "", "cannot create file");
  return f;
}

void close_output(std::FILE** f, const std::string& path) {
  if (*f == nullptr) return;
  bool ok = std::fflush(*f) == 0 && std::ferror(*f) == 0;
  ok = std::fclose(*f) == 0 && ok;
  *f = nullptr;
  if (!ok) throw InputError(path, 0, "", "write failed");
}

void write_output(const std::string& path, std::string_view text) {
  std::FILE* f = create_output(path);
  std::fwrite(text.data(), 1, text.size(), f);
  close_output(&f, path);
}

}  // namespace kvtwin::sim::io

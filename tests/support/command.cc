#include "tests/support/command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvtwin::testing {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::stringstream csv(slurp(path));
  auto fields = [](const std::string& line) {
    std::vector<std::string> f;
    std::stringstream s(line);
    for (std::string field; std::getline(s, field, ',');) f.push_back(field);
    return f;
  };
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> names = fields(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = fields(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < names.size() && i < f.size(); ++i) row[names[i]] = f[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? std::nan("")
                                 : std::strtod(text.c_str() + at + key.size(), nullptr);
}

CommandRun run_kvtwin(const std::string& args, int timeout_s) {
  static int calls = 0;
  const std::string dir = std::string(KVTWIN_BINARY_DIR) + "/test_scratch/kvtwin_runs." +
                          std::to_string(::getpid()) + "." + std::to_string(calls++);
  std::filesystem::create_directories(dir);
  const std::string timeout = timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : "";
  const std::string cmd = timeout + std::string(KVTWIN_BINARY_DIR) + "/kvtwin " + args + " > " +
                          dir + "/out.txt 2> " + dir + "/err.txt";
  const int status = std::system(cmd.c_str());
  CommandRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir + "/out.txt");
  r.err = slurp(dir + "/err.txt");
  return r;
}

}  // namespace kvtwin::testing

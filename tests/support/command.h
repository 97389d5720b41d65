// Running the kvtwin binary from a test: its exit code, stdout and stderr, each captured in a
// fresh directory under the build tree (not the test's scratch directory, which scratch_dir()
// would wipe). And reading a whole file, a number in it, or a CSV file by column name.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kvtwin::testing {

struct CommandRun {
  int exit_code = -1;  // -1 when the process did not exit normally
  std::string out;
  std::string err;
};

// Runs `<build>/kvtwin <args>` through the shell (args are not quoted); with timeout_s > 0 under
// coreutils' `timeout` (a run past it exits 124).
CommandRun run_kvtwin(const std::string& args, int timeout_s = 0);

// The bytes of `path` ("" when it cannot be read).
std::string slurp(const std::string& path);

// The number after the first occurrence of `key` in `text` (NaN when absent).
double number_after(const std::string& text, const std::string& key);

// The rows of a CSV file that kvtwin wrote (a header, no quoted commas), each by column name.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path);

}  // namespace kvtwin::testing

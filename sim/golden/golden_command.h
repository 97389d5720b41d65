// `kvtwin golden FILE...`: replays golden op-logs (plain .jsonl or .jsonl.gz) and prints one line
// per case: PASS, or the first differing op index, op name, field, expected and actual value.
#pragma once

#include <string>
#include <vector>

namespace kvtwin::sim::golden {

struct GoldenOptions {
  std::vector<std::string> files;  // files or directories (every *.jsonl / *.jsonl.gz inside)
  bool bench = false;              // also time execution without comparison
  int repeat = 1;                  // --bench repetitions (best is reported)
  bool quiet = false;              // only failures and the summary line
};

// Returns the process exit code: 0 if every case passed, 1 if one failed, 2 on bad input.
int run_golden(const GoldenOptions& options);

// The public suites shipped beside the repository (../shared/golden/{public,lmcache/public}).
std::vector<std::string> default_golden_paths();

}  // namespace kvtwin::sim::golden

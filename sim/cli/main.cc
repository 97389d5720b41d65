// kvtwin: the command-line entry point. Every subcommand is a plain function with an options
// struct (sim/*/..._command.h); CLI11 lives in this file only, to keep its compile cost in one
// translation unit.
//
// Exit codes: 0 success, 1 a check the command performs failed (e.g. a golden mismatch),
// 2 bad input (flags, files), as one line on stderr.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "model/check.h"
#include "sim/golden/golden_command.h"
#include "sim/io/input_error.h"

namespace {

using kvtwin::sim::kExitBadInput;

int dispatch(int argc, char** argv) {
  CLI::App app{"kvtwin: a digital twin of LLM-serving KV-cache memory (vLLM + LMCache)", "kvtwin"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvtwin 0.1.0");
  int exit_code = 0;

  // kvtwin golden
  kvtwin::sim::golden::GoldenOptions golden;
  CLI::App* golden_cmd = app.add_subcommand(
      "golden",
      "Replay golden op-logs recorded from upstream vLLM / LMCache and report the first "
      "difference per case (default: the public suites in ../shared/golden)");
  golden_cmd->add_option("files", golden.files, "op-log files (.jsonl, .jsonl.gz) or directories");
  golden_cmd->add_flag("--bench", golden.bench, "also measure execution speed");
  golden_cmd->add_option("--repeat", golden.repeat, "repetitions for --bench")
      ->check(CLI::Range(1, 100));
  golden_cmd->add_flag("-q,--quiet", golden.quiet, "print failures and the summary only");
  golden_cmd->callback([&] {
    if (golden.files.empty()) golden.files = kvtwin::sim::golden::default_golden_paths();
    exit_code = kvtwin::sim::golden::run_golden(golden);
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kvtwin: %s (see kvtwin --help)\n", e.what());
    return kExitBadInput;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const kvtwin::sim::InputError& e) {
    std::fprintf(stderr, "kvtwin: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtwin: error: %s\n", e.what());
    return 1;
  }
}

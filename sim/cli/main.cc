// kvtwin: the command-line entry point. Every subcommand is a plain function with an options
// struct (sim/*/..._command.h); CLI11 lives in this file only, to keep its compile cost in one
// translation unit.
//
// Exit codes: 0 success, 1 a check the command performs failed (e.g. a golden mismatch),
// 2 bad input (flags, files), as one line on stderr.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "model/check.h"
#include "sim/calibrate/calibrate_command.h"
#include "sim/cli/cache_replay_command.h"
#include "sim/cli/capacity_command.h"
#include "sim/cli/run_command.h"
#include "sim/cli/sweep_command.h"
#include "sim/cli/trace_command.h"
#include "sim/golden/golden_command.h"
#include "sim/io/input_error.h"
#include "sim/io/parse.h"
#include "sim/validate/validate_command.h"

namespace {

using kvtwin::sim::kExitBadInput;

// The options of a command that simulates a scenario: --scenario, --trace, --set.
void add_scenario_options(CLI::App* cmd, std::string* scenario, std::string* trace,
                          std::vector<std::string>* sets) {
  cmd->add_option("--scenario", *scenario, "scenario TOML (default: embedded default)");
  cmd->add_option("--trace", *trace, "trace file, overrides workload.trace");
  cmd->add_option("--set", *sets, "override a scenario field: key=value (repeatable)")
      ->allow_extra_args(false);
}

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

  // kvtwin calibrate
  kvtwin::sim::calibrate::CalibrateOptions calibrate;
  CLI::App* calibrate_cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine's disk and Redis links through the real tiers, fit the link models "
      "and write a hardware profile TOML");
  calibrate_cmd->add_option("--disk-path", calibrate.tiers.disk_path, "disk tier directory");
  calibrate_cmd->add_option("--remote-url", calibrate.tiers.remote_url, "redis://host:port");
  calibrate_cmd->add_option("--direct-io", calibrate.tiers.direct_io,
                            "O_DIRECT for the disk tier (true/false)");
  calibrate_cmd
      ->add_option("--queue-depth", calibrate.tiers.disk_queue_depth,
                   "disk objects in flight (io_uring)")
      ->check(CLI::Range(1, 256));
  calibrate_cmd
      ->add_option("--pipeline-depth", calibrate.tiers.pipeline_depth, "Redis objects in flight")
      ->check(CLI::Range(1, 256));
  calibrate_cmd->add_option("--timeout-ms", calibrate.tiers.timeout_ms, "Redis timeout")
      ->check(CLI::Range(1, 600000));
  calibrate_cmd->add_option("-o,--out", calibrate.out, "profile to write");
  calibrate_cmd->add_option("--samples", calibrate.samples_csv, "also write every sample (CSV)");
  calibrate_cmd->add_option("--refit", calibrate.refit,
                            "fit the samples of an earlier --samples file (or of "
                            "kvtwin_pcie_calibrate on a GPU); measure nothing");
  calibrate_cmd->add_flag("--quick", calibrate.quick, "fewer sizes, counts and depths");
  calibrate_cmd->add_option("--sizes", calibrate.object_bytes, "object sizes in bytes")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  calibrate_cmd->add_option("--counts", calibrate.object_counts, "objects per transfer")
      ->check(CLI::Range(1, 1024));
  calibrate_cmd->add_option("--repeats", calibrate.repeats, "repetitions per point")
      ->check(CLI::Range(1, 100));
  calibrate_cmd->add_option("--seed", calibrate.seed, "order of the measurements");
  std::string calibrate_engine = "uring";
  calibrate_cmd->add_option("--engine", calibrate_engine, "disk I/O engine: uring or posix")
      ->check(CLI::IsMember({"uring", "posix"}));
  calibrate_cmd->callback([&] {
    calibrate.tiers.uring = calibrate_engine == "uring";
    exit_code = kvtwin::sim::calibrate::run_calibrate(calibrate);
  });

  // kvtwin validate
  kvtwin::sim::validate::ValidateOptions validate;
  CLI::App* validate_cmd = app.add_subcommand(
      "validate",
      "Execute transfers on the real tiers, predict them with a hardware profile's link models, "
      "and report predicted vs measured time (MAPE, bias, worst cases)");
  validate_cmd->add_option(
      "--profile", validate.profile,
      "hardware profile (kvtwin calibrate); with --scenario: hardware.profile");
  validate_cmd->add_option("--disk-path", validate.disk_path, "disk tier directory");
  validate_cmd->add_option("--remote-url", validate.remote_url, "redis://host:port");
  validate_cmd->add_option("--transfers", validate.transfers,
                           "transfer list CSV (default: a synthetic mix)");
  validate_cmd->add_option("--scenario", validate.scenario,
                           "validate a simulation run of this scenario (disk / remote transfers)");
  validate_cmd->add_option("--trace", validate.trace, "--scenario: trace file");
  validate_cmd->add_option("--set", validate.sets, "--scenario: override a field, key=value")
      ->allow_extra_args(false);
  validate_cmd->add_option("--max-requests", validate.max_requests,
                           "--scenario: first N requests only (workload.max_requests)");
  validate_cmd->add_option("--max-duration-s", validate.max_duration_s,
                           "--scenario: arrivals before this time only (workload.max_duration_s)");
  validate_cmd->add_option("--timing", validate.timing, "predicted (deterministic) or measured")
      ->check(CLI::IsMember({"predicted", "measured"}));
  validate_cmd->add_option("-o,--out", validate.out, "report directory");
  validate_cmd->add_option("--repeats", validate.repeats, "synthetic mix: pairs per point")
      ->check(CLI::Range(1, 100));
  validate_cmd->add_option("--seed", validate.seed, "synthetic mix order");
  validate_cmd->add_option("--timeout-ms", validate.timeout_ms, "Redis timeout")
      ->check(CLI::Range(1, 600000));
  validate_cmd->add_option("--max-mape", validate.max_mape_pct,
                           "fail (exit 1) when a class's MAPE for objects >= 1 MiB exceeds this %");
  validate_cmd->add_flag("-q,--quiet", validate.quiet, "print the report path only");
  validate_cmd->callback([&] { exit_code = kvtwin::sim::validate::run_validate(validate); });

  // kvtwin run
  kvtwin::sim::cli::RunOptions run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Simulate a scenario on a trace and write a run directory (no arguments: the "
      "embedded default scenario and trace)");
  add_scenario_options(run_cmd, &run.scenario, &run.trace, &run.sets);
  run_cmd->add_option("--out", run.out, "run directory (default: runs/<run.name>)");
  run_cmd->add_flag("-q,--quiet", run.quiet, "no progress bar, no summary on stdout");
  run_cmd->callback([&] { exit_code = kvtwin::sim::cli::run_run(run); });

  // kvtwin sweep
  kvtwin::sim::cli::SweepOptions sweep;
  CLI::App* sweep_cmd = app.add_subcommand(
      "sweep",
      "Run the cartesian grid of --vary values in parallel; one table and plots of hit "
      "rate, TTFT and throughput against the varied keys");
  add_scenario_options(sweep_cmd, &sweep.scenario, &sweep.trace, &sweep.sets);
  sweep_cmd
      ->add_option(
          "--vary", sweep.vary,
          "key=v1,v2,... or k1/k2=a1/b1,a2/b2 for keys set together (repeatable; the first "
          "is the x axis)")
      ->required()
      ->allow_extra_args(false);
  sweep_cmd->add_option("-j,--jobs", sweep.jobs, "points simulated in parallel")
      ->check(CLI::Range(1, 1024));
  sweep_cmd->add_option("--out", sweep.out, "directory for sweep.csv, per-point summaries, plots");
  sweep_cmd->add_flag("-q,--quiet", sweep.quiet, "no progress bar, no table on stdout");
  sweep_cmd->callback([&] { exit_code = kvtwin::sim::cli::run_sweep(sweep); });

  // kvtwin capacity
  kvtwin::sim::cli::CapacityOptions capacity;
  CLI::App* capacity_cmd = app.add_subcommand(
      "capacity",
      "The highest request rate (workload.rate_scale) at which the scenario meets its SLOs "
      "with a queue that does not grow, or with --for the least of a resource (--most: the most "
      "of a key that hurts): a search of simulated runs");
  add_scenario_options(capacity_cmd, &capacity.scenario, &capacity.trace, &capacity.sets);
  capacity_cmd->add_option("--for", capacity.key,
                           "numeric key to search: workload.rate_scale (the most that holds; the "
                           "default) or a resource such as cluster.instances (the least)");
  CLI::Option* most_flag =
      capacity_cmd->add_flag("--most", capacity.most,
                             "find the most of the key that holds: a key more of which hurts (a "
                             "link's latency, the step overhead)");
  capacity_cmd
      ->add_flag("--least", capacity.least, "find the least of the key that holds (a resource)")
      ->excludes(most_flag);
  capacity_cmd
      ->add_option("--vary", capacity.vary,
                   "key=v1,v2,... or k1/k2=a1/b1,... (repeatable): one search at each point of the "
                   "grid")
      ->allow_extra_args(false);
  capacity_cmd->add_option("--slo-attainment", capacity.slo_attainment,
                           "share of the requests that must finish within both SLOs (a rejected or "
                           "failed one misses), in (0, 1]");
  capacity_cmd->add_option("--precision", capacity.precision,
                           "stop when the bracket's hi / lo <= 1 + this (0.001 .. 1)");
  capacity_cmd->add_option("--probes", capacity.probes, "values simulated per round (1 .. 64)");
  capacity_cmd->add_option("-j,--jobs", capacity.jobs, "probes simulated in parallel")
      ->check(CLI::Range(1, 1024));
  capacity_cmd->add_option(
      "--out", capacity.out,
      "directory for capacity.csv and per-probe summaries (with --vary: frontier.csv, "
      "each point's under points/<i>/)");
  capacity_cmd->add_flag("-q,--quiet", capacity.quiet, "no progress bar, no table on stdout");
  capacity_cmd->callback([&] { exit_code = kvtwin::sim::cli::run_capacity(capacity); });

  // kvtwin cache-replay
  kvtwin::sim::cli::CacheReplayOptions replay;
  CLI::App* replay_cmd =
      app.add_subcommand("cache-replay",
                         "The cache layers alone on a trace in request order (no timing): hit rate "
                         "against the capacity of one tier");
  add_scenario_options(replay_cmd, &replay.scenario, &replay.trace, &replay.sets);
  replay_cmd->add_option("--tier", replay.tier, "tier whose capacity varies: gpu | cpu | disk");
  std::vector<std::string> capacity_items;
  replay_cmd
      ->add_option("--capacity-gb", capacity_items,
                   "capacities per rank in GiB (repeatable or comma-separated)")
      ->allow_extra_args(false);
  replay_cmd->add_option("-j,--jobs", replay.jobs, "capacities replayed in parallel")
      ->check(CLI::Range(1, 1024));
  replay_cmd->add_option("--csv", replay.csv, "also write the table as CSV");
  replay_cmd->add_flag("-q,--quiet", replay.quiet, "no table on stdout");
  replay_cmd->callback([&] {
    replay.capacity_gb = kvtwin::sim::cli::parse_capacities_gb(capacity_items);
    exit_code = kvtwin::sim::cli::run_cache_replay(replay);
  });

  // kvtwin trace stats | convert
  CLI::App* trace_cmd = app.add_subcommand("trace", "Trace tools: reuse statistics, conversion");
  trace_cmd->require_subcommand(1);
  kvtwin::sim::cli::TraceStatsOptions stats;
  CLI::App* stats_cmd = trace_cmd->add_subcommand(
      "stats", "Reuse statistics of a trace: prefix reuse ratio, unique blocks, working set");
  stats_cmd->add_option("file", stats.file, "trace file (native CSV, Mooncake JSONL, Azure CSV)")
      ->required();
  stats_cmd->add_option("--format", stats.format, "auto | native | mooncake | azure");
  stats_cmd->add_option("--scenario", stats.scenario,
                        "scenario whose [workload] transforms apply and whose model sizes the "
                        "working set (default: the embedded default)");
  stats_cmd->add_option("--set", stats.sets, "override a scenario field: key=value")
      ->allow_extra_args(false);
  stats_cmd->add_option("--window-s", stats.window_s, "working-set window in seconds")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto v = kvtwin::sim::io::parse_double(text);  // finite or nullopt
            const bool ok = v && *v > 0 && *v <= 1e9;
            return ok ? std::string() : "expected seconds in (0, 1e9], got '" + text + "'";
          },
          "SECONDS"));
  stats_cmd->add_flag("--json", stats.json, "print one JSON object");
  stats_cmd->callback([&] { exit_code = kvtwin::sim::cli::run_trace_stats(stats); });
  kvtwin::sim::cli::TraceConvertOptions convert;
  CLI::App* convert_cmd =
      trace_cmd->add_subcommand("convert", "Rewrite a trace as native CSV or Mooncake JSONL");
  convert_cmd->add_option("input", convert.input, "input trace")->required();
  convert_cmd->add_option("output", convert.output, "output file, - for stdout")->required();
  convert_cmd->add_option("--from", convert.from, "input format: auto | native | mooncake | azure");
  convert_cmd->add_option("--to", convert.to, "output format: native | mooncake");
  convert_cmd->add_option("--scenario", convert.scenario,
                          "scenario whose [workload] transforms apply (rate scale, limits, "
                          "synthetic prefixes)");
  convert_cmd->add_option("--set", convert.sets, "override a scenario field: key=value")
      ->allow_extra_args(false);
  convert_cmd->callback([&] { exit_code = kvtwin::sim::cli::run_trace_convert(convert); });

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

// What a command printed must all have reached stdout (a full disk or a closed pipe is an error).
int checked_stdout(int exit_code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fprintf(stderr, "kvtwin: standard output: write failed\n");
    return exit_code == 0 ? kExitBadInput : exit_code;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return checked_stdout(dispatch(argc, argv));
  } catch (const kvtwin::sim::InputError& e) {
    std::fprintf(stderr, "kvtwin: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "kvtwin: error: out of memory (the scenario needs more than this machine has; "
                 "fewer instances, GPU blocks or tier capacity would fit)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtwin: error: %s\n", e.what());
    return 1;
  }
}

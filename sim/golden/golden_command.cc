#include "sim/golden/golden_command.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <sys/resource.h>
#include <time.h>

#include "sim/golden/formats.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {
namespace {

namespace fs = std::filesystem;

bool is_oplog_name(const std::string& name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jsonl") || ends_with(".jsonl.gz");
}

std::vector<std::string> expand(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(in)) {
        if (entry.is_regular_file() && is_oplog_name(entry.path().filename().string()))
          found.push_back(entry.path().string());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

const GoldenFormat& find_format(const std::string& path, std::string_view header) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(header);
  std::string_view format;
  int64_t version = -1;
  auto doc = parser.iterate(padded);
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS)
    throw InputError(path, 1, "header", "not a JSON object");
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS)
      throw InputError(path, 1, "header", "malformed JSON");
    if (key == "format") {
      if (field.value().get_string().get(format) != simdjson::SUCCESS)
        throw InputError(path, 1, "format", "expected a string");
    } else if (key == "format_version") {
      if (field.value().get_int64().get(version) != simdjson::SUCCESS)
        throw InputError(path, 1, "format_version", "expected an integer");
    } else if (key == "type") {
      std::string_view type;
      if (field.value().get_string().get(type) != simdjson::SUCCESS || type != "header")
        throw InputError(path, 1, "type", "first line must be the header");
    }
  }
  if (format.empty()) throw InputError(path, 1, "format", "missing");
  for (const GoldenFormat& f : golden_formats()) {
    if (f.name == format) {
      if (f.version != version)
        throw InputError(
            path, 1, "format_version",
            "unsupported version " + std::to_string(version) + " of " + std::string(format));
      return f;
    }
  }
  throw InputError(path, 1, "format", "unknown op-log format '" + std::string(format) + "'");
}

std::string clip(const std::string& s, size_t n = 300) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

}  // namespace

std::vector<std::string> default_golden_paths() {
  std::string shared = KVTWIN_SHARED_DIR;
  std::vector<std::string> paths;
  for (const char* sub : {"/golden/public", "/golden/lmcache/public"}) {
    std::error_code ec;
    if (fs::is_directory(shared + sub, ec)) paths.push_back(shared + sub);
  }
  return paths;
}

namespace {

// Streams one op-log through its format's replayer (read, gunzip, parse, execute, compare).
CaseOutcome replay_file(const std::string& path, const GoldenFormat** format_out) {
  auto t0 = std::chrono::steady_clock::now();
  io::LineReader reader(path);
  std::string_view header;
  if (!reader.next(&header)) throw InputError(path, 1, "header", "empty file");
  std::string header_copy(header);
  const GoldenFormat& format = find_format(path, header_copy);
  *format_out = &format;
  ReplayOptions replay_options;
  CaseOutcome out = format.replay(reader, header_copy, replay_options);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// --bench: the best end-to-end time over `repeat` streaming replays with the peak RSS, then the
// format's execution-only measurement. CPU times of the main thread are printed beside the wall
// times: on a busy machine they are the better estimate of the unloaded figures.
void bench_file(const std::string& path, const GoldenOptions& options, CaseOutcome first,
                const GoldenFormat& format) {
  double best = first.seconds, best_cpu = -1;
  for (int r = 1; r < options.repeat; ++r) {
    const GoldenFormat* f = nullptr;
    double c0 = thread_cpu_seconds();
    double s = replay_file(path, &f).seconds;
    double cpu = thread_cpu_seconds() - c0;
    if (s < best) best = s;
    if (best_cpu < 0 || cpu < best_cpu) best_cpu = cpu;
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  double n = static_cast<double>(first.num_ops);
  std::printf(
      "BENCH %s: end to end (read + gunzip + parse + execute + compare): %llu ops in "
      "%.3f s = %.3f M ops/s; peak RSS %.1f MB",
      first.case_name.c_str(), static_cast<unsigned long long>(first.num_ops), best, n / best / 1e6,
      static_cast<double>(usage.ru_maxrss) / 1024.0);
  if (best_cpu > 0) std::printf(" (main thread CPU %.3f s)", best_cpu);
  std::printf("\n");
  if (format.bench == nullptr) return;
  BenchResult b = format.bench(path, options.repeat);
  std::printf(
      "BENCH %s: execute pre-parsed ops (no comparison): %llu ops in %.3f s = %.3f M "
      "ops/s (thread CPU %.3f s = %.3f M ops/s)\n",
      first.case_name.c_str(), static_cast<unsigned long long>(b.num_ops), b.seconds,
      static_cast<double>(b.num_ops) / b.seconds / 1e6, b.cpu_seconds,
      static_cast<double>(b.num_ops) / b.cpu_seconds / 1e6);
  std::printf("%s", b.by_op.c_str());
}

}  // namespace

int run_golden(const GoldenOptions& options) {
  std::vector<std::string> files = expand(options.files);
  if (files.empty()) {
    std::fprintf(stderr, "kvtwin golden: no op-log files given or found\n");
    return kExitBadInput;
  }
  int passed = 0, failed = 0, bad_input = 0;
  uint64_t total_ops = 0;
  double total_seconds = 0;
  for (const std::string& path : files) {
    try {
      const GoldenFormat* format = nullptr;
      CaseOutcome out = replay_file(path, &format);
      total_ops += out.num_ops;
      total_seconds += out.seconds;
      if (out.passed) {
        ++passed;
        if (!options.quiet)
          std::printf("PASS %-48s %9llu ops %8.3f s\n", out.case_name.c_str(),
                      static_cast<unsigned long long>(out.num_ops), out.seconds);
        if (options.bench) bench_file(path, options, out, *format);
      } else {
        ++failed;
        std::printf("FAIL %-48s op %lld %s: %s: expected %s, got %s\n", out.case_name.c_str(),
                    static_cast<long long>(out.op_index), out.op_name.c_str(), out.field.c_str(),
                    clip(out.expected).c_str(), clip(out.actual).c_str());
      }
    } catch (const InputError& e) {
      ++bad_input;
      std::printf("ERROR %s\n", e.what());
      // Also on stderr, where scripts look for errors (stdout keeps the per-case report).
      std::fflush(stdout);
      std::fprintf(stderr, "kvtwin: %s\n", e.what());
    }
    std::fflush(stdout);
  }
  std::printf("golden: %d passed, %d failed, %d unreadable; %llu ops in %.3f s\n", passed, failed,
              bad_input, static_cast<unsigned long long>(total_ops), total_seconds);
  if (bad_input > 0) return kExitBadInput;
  return failed > 0 ? 1 : 0;
}

}  // namespace kvtwin::sim::golden

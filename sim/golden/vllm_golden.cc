#include "sim/golden/vllm_golden.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>

#include "sim/golden/oplog.h"
#include "sim/golden/vllm_parse_stage.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {
namespace {

void check_header(const OpFields& header) {
  if (header.str("format") != kVllmGoldenFormat)
    header.fail("format", "not a " + std::string(kVllmGoldenFormat) + " op-log");
  if (header.i64("format_version") != kVllmGoldenVersion)
    header.fail("format_version", "unsupported version");
}

// The expectation of a VllmExpect as a DOM element (parsed in place from the batch's text).
std::optional<simdjson::dom::element> expect_element(simdjson::dom::parser& parser,
                                                     const VllmExpect& e,
                                                     const VllmExpectArena& data,
                                                     const std::string& path, uint64_t line) {
  if (e.kind == VllmExpect::Kind::kAbsent) return std::nullopt;
  simdjson::dom::element root;
  auto err = parser.parse(data.text.data() + e.text.begin, e.text.size(), false).get(root);
  if (err != simdjson::SUCCESS)  // the line parsed before: only an internal error gets here
    throw InputError(path, line, "expect", simdjson::error_message(err));
  if (!e.whole_line) return root;
  simdjson::dom::element expect;
  if (root["expect"].get(expect) != simdjson::SUCCESS) return std::nullopt;
  return expect;
}

}  // namespace

// Parsing runs ahead on VllmParseStage's thread; this thread executes and compares, in op order.
CaseOutcome replay_vllm_kv_golden(io::LineReader& reader, std::string_view header_line,
                                  const ReplayOptions& options) {
  OplogStream stream(reader, header_line);
  const OpFields& header = stream.header();
  check_header(header);
  CaseOutcome out;
  out.case_name = std::string(header.str("case"));
  VllmReplayer replayer(parse_vllm_config(header), stream.path());
  if (options.compare) {
    if (auto m = replayer.check_derived(header.element("derived"))) {
      out.op_name = "header";
      out.field = m->field;
      out.expected = m->expected;
      out.actual = m->actual;
      return out;
    }
  }
  VllmParseStage stage(stream, header.boolean("op_index_field"), options.compare);
  simdjson::dom::parser expect_parser;
  uint64_t index = 0;
  for (;;) {
    VllmOpBatch* b = stage.next();
    for (size_t i = 0; i < b->ops.size(); ++i, ++index) {
      const VllmOp& op = b->ops[i];
      replayer.execute(op, b->arena);
      if (!options.compare) continue;
      const VllmExpect& e = b->expects[i];
      if (replayer.expect_equal(op, e, b->expect_data)) continue;
      auto expect = expect_element(expect_parser, e, b->expect_data, stream.path(), op.line);
      if (auto m = replayer.compare(op, b->arena, expect)) {
        out.op_index = static_cast<int64_t>(index);
        out.op_name = std::string(vllm_op_name(op.kind));
        out.field = m->field;
        out.expected = m->expected;
        out.actual = m->actual;
        out.num_ops = index + 1;
        return out;
      }
    }
    if (b->error) std::rethrow_exception(b->error);
    bool last = b->last;
    stage.release(b);
    if (last) break;
  }
  out.num_ops = stream.num_ops();
  out.passed = true;
  return out;
}

VllmPreparsedLog preparse_vllm_log(const std::string& path) {
  VllmPreparsedLog log;
  log.path = path;
  io::LineReader reader(path);
  std::string_view header_line;
  if (!reader.next(&header_line)) throw InputError(path, 1, "header", "empty file");
  std::string header_copy(header_line);
  OplogStream stream(reader, header_copy);
  check_header(stream.header());
  log.case_name = std::string(stream.header().str("case"));
  log.config = parse_vllm_config(stream.header());
  const bool has_index = stream.header().boolean("op_index_field");
  OpFields f(nullptr, 0, {});
  VllmOp op;
  while (stream.next(&f)) {
    if (has_index) check_op_index(f, log.ops.size());
    parse_vllm_op(f, &log.arena, &op);
    log.ops.push_back(op);
  }
  return log;
}

uint64_t execute_vllm_log(const VllmPreparsedLog& log) {
  VllmReplayer replayer(log.config, log.path);
  for (const VllmOp& op : log.ops) replayer.execute(op, log.arena);
  return log.ops.size();
}

namespace {

// One more execution with every op timed (the clock reads add ~2 x 20 ns per op, which is why
// the headline figure comes from untimed runs): "BY-OP <kind>: n ops, total s, ns/op" lines,
// slowest kinds first.
std::string time_by_op(const VllmPreparsedLog& log) {
  constexpr size_t kKinds = static_cast<size_t>(VllmOpKind::kPoolState) + 1;
  std::array<double, kKinds> seconds{};
  std::array<uint64_t, kKinds> count{};
  {
    VllmReplayer replayer(log.config, log.path);
    auto last = std::chrono::steady_clock::now();
    for (const VllmOp& op : log.ops) {
      replayer.execute(op, log.arena);
      auto now = std::chrono::steady_clock::now();
      size_t k = static_cast<size_t>(op.kind);
      seconds[k] += std::chrono::duration<double>(now - last).count();
      ++count[k];
      last = now;
    }
  }
  std::vector<size_t> order;
  for (size_t k = 0; k < kKinds; ++k)
    if (count[k] > 0) order.push_back(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  std::string out;
  char line[160];
  for (size_t k : order) {
    std::snprintf(line, sizeof line, "BY-OP %-28s %9llu ops %8.3f s %9.1f ns/op\n",
                  std::string(vllm_op_name(static_cast<VllmOpKind>(k))).c_str(),
                  static_cast<unsigned long long>(count[k]), seconds[k],
                  seconds[k] / static_cast<double>(count[k]) * 1e9);
    out += line;
  }
  return out;
}

}  // namespace

BenchResult bench_vllm_kv_golden(const std::string& path, int repeat) {
  VllmPreparsedLog log = preparse_vllm_log(path);
  BenchResult best;
  for (int r = 0; r < repeat; ++r) {
    timespec c0{}, c1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    auto t0 = std::chrono::steady_clock::now();
    uint64_t n = execute_vllm_log(log);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) +
                 static_cast<double>(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (r == 0 || s < best.seconds) best = BenchResult{n, s, cpu, {}};
  }
  best.by_op = time_by_op(log);
  return best;
}

}  // namespace kvtwin::sim::golden

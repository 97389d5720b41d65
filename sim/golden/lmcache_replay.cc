#include "sim/golden/lmcache_replay.h"

#include "model/check.h"
#include "sim/golden/lmcache_replay_state.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::golden {

using lmcache_replay::CaseState;

namespace {

// Compares one op's output with its expectation; fills `out` on the first difference.
bool compare_op(const OpFields& op, std::string_view name, const std::string& actual,
                simdjson::dom::parser& parser, CaseOutcome* out) {
  auto expect = op.optional_element("expect");
  if (!expect) {
    if (actual.empty()) return true;
    out->field = "$";
    out->expected = "(no expect)";
    out->actual = actual;
  } else {
    if (actual.empty()) {
      out->field = "$";
      out->expected = json_text(*expect);
      out->actual = "(no output)";
    } else {
      simdjson::dom::element got;
      if (parser.parse(actual).get(got) != simdjson::SUCCESS)
        KVTWIN_CHECK(false) << "replayer wrote malformed JSON: " << actual;
      if (json_equal(*expect, got)) return true;
      out->field = json_first_difference(*expect, got);
      out->expected = json_text(*expect);
      out->actual = actual;
    }
  }
  out->passed = false;
  out->op_index = op.i64_or("i", -1);
  out->op_name = std::string(name);
  return false;
}

}  // namespace

CaseOutcome replay_lmcache(io::LineReader& reader, std::string_view header_line,
                           const ReplayOptions& options) {
  OplogStream stream(reader, header_line);
  const OpFields& header = stream.header();
  CaseOutcome out;
  out.case_name = std::string(header.str("case"));
  CaseState state;
  lmcache_replay::setup_case(header, &state);
  simdjson::dom::parser parser;
  OpFields op = header;
  bool failed = false;
  const bool has_index = header.boolean_or("op_index_field", false);
  while (stream.next(&op)) {
    if (has_index) check_op_index(op, stream.num_ops() - 1);
    if (failed) continue;  // read to the footer so the digest is still verified
    std::string_view name = op.str("op");
    std::string actual;
    try {
      if (auto common = lmcache_replay::common_op(name, op, state)) {
        actual = std::move(*common);
      } else if (state.connector) {
        actual = lmcache_replay::connector_op(name, op, state);
      } else {
        actual = lmcache_replay::engine_op(name, op, state);
      }
    } catch (const model::lmcache::UpstreamError& e) {
      // An op handler let an upstream exception escape: a replayer bug, not an input error.
      KVTWIN_CHECK(false) << "unhandled upstream error in op " << name << ": " << e.what();
    }
    for (auto& [rank, engine] : state.engines) engine->end_of_operation();
    if (options.compare && !compare_op(op, name, actual, parser, &out)) failed = true;
  }
  out.num_ops = stream.num_ops();
  out.passed = !failed;
  return out;
}

}  // namespace kvtwin::sim::golden

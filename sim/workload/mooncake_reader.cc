// Mooncake FAST'25 JSON Lines (see trace_reader.h). hash_ids are read as unsigned 64-bit values
// and kept whole.
#include <simdjson.h>

#include <string>

#include "sim/io/input_error.h"
#include "sim/io/parse.h"
#include "sim/random.h"
#include "sim/workload/readers.h"

namespace kvtwin::sim::workload {
namespace {

constexpr int32_t kMooncakeBlockSize = 512;

class MooncakeReader final : public FormatReader {
 public:
  explicit MooncakeReader(std::unique_ptr<LineSource> lines) : lines_(std::move(lines)) {}

  bool next(TraceRequest* out) override {
    std::string_view line;
    do {
      if (!lines_->next(&line)) return false;
    } while (io::trim(line).empty());
    line_ = lines_->line_number();
    *out = TraceRequest{};
    parse(line, out);
    validate_request(*out, name(), line_, "input_length", "output_length", "hash_ids");
    return true;
  }

  uint64_t line_number() const override { return line_; }
  const std::string& name() const override { return lines_->name(); }
  const char* time_field() const override { return "timestamp"; }

 private:
  [[noreturn]] void fail(std::string_view field, const std::string& msg) const {
    throw InputError(name(), line_, std::string(field), msg);
  }
  void check(simdjson::error_code ec, std::string_view field, const char* expected) const {
    if (ec != simdjson::SUCCESS)
      fail(field, std::string(expected) + " (" + simdjson::error_message(ec) + ")");
  }

  void parse(std::string_view line, TraceRequest* out) {
    simdjson::padded_string_view padded(line.data(), line.size(),
                                        line.size() + io::LineReader::kPadding);
    simdjson::ondemand::document doc;
    check(parser_.iterate(padded).get(doc), "json", "malformed JSON");
    simdjson::ondemand::object obj;
    check(doc.get_object().get(obj), "json", "expected a JSON object");
    bool seen_time = false, seen_in = false, seen_out = false, seen_ids = false;
    for (auto field : obj) {
      std::string_view key;
      check(field.unescaped_key().get(key), "json", "malformed key");
      simdjson::ondemand::value v;
      check(field.value().get(v), key, "malformed value");
      if (key == "timestamp") {
        out->arrival = read_time_ms(v);
        seen_time = true;
      } else if (key == "input_length") {
        check(v.get_int64().get(out->prompt_tokens), key, "expected an integer");
        seen_in = true;
      } else if (key == "output_length") {
        check(v.get_int64().get(out->output_tokens), key, "expected an integer");
        seen_out = true;
      } else if (key == "hash_ids") {
        read_ids(v, out);
        seen_ids = true;
      } else if (key == "session_id") {
        read_session(v, out);
      } else if (key == "priority") {
        check(v.get_int64().get(out->priority), key, "expected an integer");
      }
    }
    if (!seen_time) fail("timestamp", "missing");
    if (!seen_in) fail("input_length", "missing");
    if (!seen_out) fail("output_length", "missing");
    if (!seen_ids) fail("hash_ids", "missing");
  }

  SimTime read_time_ms(simdjson::ondemand::value v) const {
    simdjson::ondemand::number_type type;
    check(v.get_number_type().get(type), "timestamp", "expected a number of milliseconds");
    if (type == simdjson::ondemand::number_type::floating_point_number) {
      double ms = 0;
      check(v.get_double().get(ms), "timestamp", "expected a number");
      if (!(ms >= 0 && ms <= 1e12)) fail("timestamp", "out of range [0, 1e12] ms");
      return from_seconds(ms / 1000.0);
    }
    int64_t ms = 0;
    check(v.get_int64().get(ms), "timestamp", "expected an integer number of milliseconds");
    if (ms < 0 || ms > 1'000'000'000'000) fail("timestamp", "out of range [0, 1e12] ms");
    return ms * 1'000'000;
  }

  void read_ids(simdjson::ondemand::value v, TraceRequest* out) const {
    simdjson::ondemand::array arr;
    check(v.get_array().get(arr), "hash_ids", "expected an array of unsigned integers");
    for (auto element : arr) {
      uint64_t id = 0;
      check(element.get_uint64().get(id), "hash_ids", "expected unsigned 64-bit integers");
      out->block_ids.push_back(id);
    }
    if (!out->block_ids.empty()) out->block_size = kMooncakeBlockSize;
  }

  void read_session(simdjson::ondemand::value v, TraceRequest* out) const {
    simdjson::ondemand::json_type type;
    check(v.type().get(type), "session_id", "malformed value");
    if (type == simdjson::ondemand::json_type::string) {
      std::string_view s;
      check(v.get_string().get(s), "session_id", "malformed string");
      out->session_id = name_salt(s);
    } else {
      check(v.get_uint64().get(out->session_id), "session_id",
            "expected an unsigned integer or a string");
    }
    out->has_session = true;
  }

  std::unique_ptr<LineSource> lines_;
  simdjson::ondemand::parser parser_;
  uint64_t line_ = 0;
};

}  // namespace

std::unique_ptr<FormatReader> make_mooncake_reader(std::unique_ptr<LineSource> lines) {
  return std::make_unique<MooncakeReader>(std::move(lines));
}

void validate_request(const TraceRequest& r, const std::string& name, uint64_t line,
                      const char* prompt_field, const char* output_field, const char* ids_field) {
  constexpr int64_t kMaxTokens = int64_t{1} << 30;
  if (r.prompt_tokens < 1 || r.prompt_tokens > kMaxTokens)
    throw InputError(name, line, prompt_field,
                     "must be in [1, 2^30], got " + std::to_string(r.prompt_tokens));
  if (r.output_tokens < 1 || r.output_tokens > kMaxTokens)
    throw InputError(name, line, output_field,
                     "must be in [1, 2^30], got " + std::to_string(r.output_tokens));
  if (r.block_size > 0) {
    int64_t blocks = (r.prompt_tokens + r.block_size - 1) / r.block_size;
    if (static_cast<int64_t>(r.block_ids.size()) > blocks)
      throw InputError(name, line, ids_field,
                       std::to_string(r.block_ids.size()) + " ids for a prompt of only " +
                           std::to_string(blocks) + " blocks of " + std::to_string(r.block_size) +
                           " tokens");
  }
}

}  // namespace kvtwin::sim::workload

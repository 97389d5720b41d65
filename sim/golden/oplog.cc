#include "sim/golden/oplog.h"

#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>

#include <algorithm>

#include "model/vllm/block_hash.h"

static_assert(kvtwin::sim::io::LineReader::kPadding >= simdjson::SIMDJSON_PADDING);

namespace kvtwin::sim::golden {

// ----------------------------------------------------------------------------- OpFields

void OpFields::fail(std::string_view field, const std::string& message) const {
  throw InputError(*file_, line_, std::string(field), message);
}

bool OpFields::has(std::string_view field) const {
  return obj_[field].error() == simdjson::SUCCESS;
}

bool OpFields::has_value(std::string_view field) const {
  simdjson::dom::element e;
  return obj_[field].get(e) == simdjson::SUCCESS && !e.is_null();
}

simdjson::dom::element OpFields::element(std::string_view field) const {
  simdjson::dom::element e;
  if (obj_[field].get(e) != simdjson::SUCCESS) fail(field, "missing");
  return e;
}

std::optional<simdjson::dom::element> OpFields::optional_element(std::string_view field) const {
  simdjson::dom::element e;
  if (obj_[field].get(e) != simdjson::SUCCESS) return std::nullopt;
  return e;
}

int64_t OpFields::as_i64(simdjson::dom::element e, std::string_view field) const {
  int64_t v;
  if (e.get_int64().get(v) != simdjson::SUCCESS) {
    uint64_t u;
    if (e.get_uint64().get(u) == simdjson::SUCCESS) fail(field, "integer out of range");
    fail(field, "expected an integer, got " + simdjson::minify(e));
  }
  return v;
}

std::string_view OpFields::as_str(simdjson::dom::element e, std::string_view field) const {
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS)
    fail(field, "expected a string, got " + simdjson::minify(e));
  return v;
}

std::string_view OpFields::str(std::string_view field) const {
  return as_str(element(field), field);
}

int64_t OpFields::i64(std::string_view field) const {
  return as_i64(element(field), field);
}

int64_t OpFields::i64_or(std::string_view field, int64_t fallback) const {
  auto e = optional_element(field);
  if (!e || e->is_null()) return fallback;
  return as_i64(*e, field);
}

bool OpFields::boolean(std::string_view field) const {
  bool v;
  if (element(field).get_bool().get(v) != simdjson::SUCCESS) fail(field, "expected true or false");
  return v;
}

bool OpFields::boolean_or(std::string_view field, bool fallback) const {
  auto e = optional_element(field);
  if (!e || e->is_null()) return fallback;
  bool v;
  if (e->get_bool().get(v) != simdjson::SUCCESS) fail(field, "expected true or false");
  return v;
}

simdjson::dom::array OpFields::array(std::string_view field) const {
  simdjson::dom::array a;
  if (element(field).get_array().get(a) != simdjson::SUCCESS) fail(field, "expected an array");
  return a;
}

simdjson::dom::object OpFields::object(std::string_view field) const {
  simdjson::dom::object o;
  if (element(field).get_object().get(o) != simdjson::SUCCESS) fail(field, "expected an object");
  return o;
}

void check_op_index(const OpFields& fields, uint64_t index) {
  int64_t i = fields.i64("i");
  if (i < 0 || static_cast<uint64_t>(i) != index)
    fields.fail("i", "op index " + std::to_string(i) + ", expected " + std::to_string(index));
}

// ----------------------------------------------------------------------------- OplogStream

struct OplogStream::Digest {
  SHA256_CTX ctx;
};

namespace {
simdjson::dom::object parse_object(simdjson::dom::parser& parser, std::string_view line,
                                   bool padded, const std::string& file, uint64_t line_no) {
  simdjson::dom::element root;
  auto err = padded ? parser.parse(line.data(), line.size(), false).get(root)
                    : parser.parse(line).get(root);
  if (err != simdjson::SUCCESS)
    throw InputError(file, line_no, "",
                     std::string("malformed JSON: ") + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS)
    throw InputError(file, line_no, "", "expected a JSON object");
  return obj;
}
}  // namespace

OplogStream::OplogStream(io::LineReader& reader, std::string_view header_line)
    : reader_(reader),
      path_(reader.path()),
      header_(&path_, 1, parse_object(header_parser_, header_line, false, path_, 1)),
      digest_(std::make_unique<Digest>()) {
  SHA256_Init(&digest_->ctx);
  SHA256_Update(&digest_->ctx, header_line.data(), header_line.size());  // not padded
  SHA256_Update(&digest_->ctx, "\n", 1);
  reader_.set_release_hook([this] { flush_digest(); });
}

OplogStream::~OplogStream() {
  reader_.set_release_hook({});
}

void OplogStream::flush_digest() {
  if (pending_begin_ == pending_end_) return;
  SHA256_Update(&digest_->ctx, pending_begin_, static_cast<size_t>(pending_end_ - pending_begin_));
  pending_begin_ = pending_end_ = nullptr;
}

void OplogStream::hash_line(std::string_view line) {
  // The byte after a line is readable (LineReader's padding); when it is the '\n' that ended the
  // line, the line and its '\n' join the pending run (extending it when the line follows it in
  // memory). A line that lost a '\r' or its '\n' is digested at once, with a '\n'.
  const char* b = line.data();
  const char* e = b + line.size();
  if (*e == '\n') {
    if (b != pending_end_) {
      flush_digest();
      pending_begin_ = b;
    }
    pending_end_ = e + 1;
    return;
  }
  flush_digest();
  SHA256_Update(&digest_->ctx, b, line.size());
  SHA256_Update(&digest_->ctx, "\n", 1);
}

void OplogStream::next_line(std::string_view* line, uint64_t* line_no) {
  for (;;) {
    if (!reader_.next(line))
      throw InputError(path_, reader_.line_number() + 1, "footer",
                       "missing footer (truncated op-log?)");
    if (!line->empty()) break;
    hash_line(*line);  // blank lines are not ops but are covered by the digest
  }
  *line_no = reader_.line_number();
}

bool OplogStream::parse_line(std::string_view line, uint64_t line_no, OpFields* op) {
  // The reader guarantees padding after each line: parse in place without a copy.
  simdjson::dom::object obj = parse_object(parser_, line, true, path_, line_no);
  OpFields fields(&path_, line_no, obj);
  std::string_view type;
  if (obj["type"].get_string().get(type) == simdjson::SUCCESS && type == "footer") {
    check_footer(fields);
    done_ = true;
    std::string_view rest;
    if (reader_.next(&rest))
      throw InputError(path_, reader_.line_number(), "", "content after the footer");
    return false;
  }
  hash_line(line);
  ++num_ops_;
  std::string_view name;  // an op without a string "op" is the replayer's error to report
  count_op(obj["op"].get_string().get(name) == simdjson::SUCCESS ? name : std::string_view());
  *op = fields;
  return true;
}

bool OplogStream::next(OpFields* op) {
  if (done_) return false;
  std::string_view line;
  uint64_t line_no;
  next_line(&line, &line_no);
  return parse_line(line, line_no, op);
}

void OplogStream::count_op(std::string_view op_name) {
  if (last_count_ < op_counts_.size() && op_counts_[last_count_].first == op_name) {
    ++op_counts_[last_count_].second;
    return;
  }
  for (size_t i = 0; i < op_counts_.size(); ++i) {
    if (op_counts_[i].first == op_name) {
      ++op_counts_[i].second;
      last_count_ = i;
      return;
    }
  }
  last_count_ = op_counts_.size();
  op_counts_.emplace_back(std::string(op_name), 1);
}

void OplogStream::check_footer(const OpFields& footer) {
  int64_t n = footer.i64("num_ops");
  if (n < 0 || static_cast<uint64_t>(n) != num_ops_)
    footer.fail("num_ops",
                "footer says " + std::to_string(n) + " ops, file has " + std::to_string(num_ops_));
  // op_counts (optional; every recorded footer has it): exactly the ops of the file, by name.
  if (footer.has_value("op_counts")) {
    simdjson::dom::object counts = footer.object("op_counts");
    auto listed = [&](std::string_view name) -> int64_t {
      simdjson::dom::element e;
      if (counts[name].get(e) != simdjson::SUCCESS) return 0;
      return footer.as_i64(e, "op_counts");
    };
    for (const auto& [name, count] : op_counts_) {
      int64_t says = listed(name);
      if (says < 0 || static_cast<uint64_t>(says) != count)
        footer.fail("op_counts", "footer says " + std::to_string(says) + " '" + name +
                                     "' ops, file has " + std::to_string(count));
    }
    for (auto [key, value] : counts) {
      int64_t says = footer.as_i64(value, "op_counts");
      bool present = std::any_of(op_counts_.begin(), op_counts_.end(),
                                 [&](const auto& c) { return c.first == key; });
      if (!present && says != 0)
        footer.fail("op_counts", "footer says " + std::to_string(says) + " '" + std::string(key) +
                                     "' ops, file has 0");
    }
  }
  std::string_view expected = footer.str("sha256_of_preceding_lines");
  flush_digest();
  uint8_t digest[32];
  SHA256_Final(digest, &digest_->ctx);
  std::string actual = model::vllm::to_hex({digest, 32});
  if (expected != actual)
    footer.fail("sha256_of_preceding_lines", "digest mismatch (file edited or corrupt): expected " +
                                                 std::string(expected) + ", computed " + actual);
}

}  // namespace kvtwin::sim::golden

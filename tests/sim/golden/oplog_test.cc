#include "sim/golden/oplog.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fstream>

#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>

#include "model/vllm/block_hash.h"
#include "sim/golden/json.h"
#include "tests/support/gzip.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::golden {
namespace {

std::string sha256_hex(const std::string& s) {
  uint8_t d[32];
  SHA256(reinterpret_cast<const uint8_t*>(s.data()), s.size(), d);
  return model::vllm::to_hex({d, 32});
}

// Writes header + ops + a correct footer (unless `footer` overrides it).
std::string write_log(const std::vector<std::string>& lines, const std::string& footer = "") {
  std::string body;
  for (const auto& l : lines) body += l + "\n";
  std::string f = footer.empty()
                      ? "{\"type\":\"footer\",\"num_ops\":" + std::to_string(lines.size() - 1) +
                            ",\"sha256_of_preceding_lines\":\"" + sha256_hex(body) + "\"}"
                      : footer;
  std::string path = testing::scratch_dir() + "/log.jsonl";
  std::ofstream(path) << body << f << "\n";
  return path;
}

std::vector<int64_t> replay(const std::string& path) {
  io::LineReader reader(path);
  std::string_view header;
  EXPECT_TRUE(reader.next(&header));
  OplogStream s(reader, std::string(header));
  std::vector<int64_t> seen;
  OpFields op(nullptr, 0, {});
  while (s.next(&op)) seen.push_back(op.i64("i"));
  return seen;
}

const char* kHeader = R"({"type":"header","format":"test","format_version":1})";

TEST(OplogStream, YieldsOpsAndVerifiesTheFooter) {
  std::string path = write_log({kHeader, R"({"i":0,"op":"a"})", R"({"i":1,"op":"b"})"});
  EXPECT_EQ(replay(path), (std::vector<int64_t>{0, 1}));
}

TEST(OplogStream, MissingFooterIsATruncatedFile) {
  std::string path = testing::scratch_dir() + "/t.jsonl";
  std::ofstream(path) << kHeader << "\n{\"i\":0}\n";
  try {
    replay(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.field(), "footer");
  }
}

TEST(OplogStream, EditedOpFailsTheDigest) {
  std::string body = std::string(kHeader) + "\n{\"i\":0}\n";
  std::string footer = "{\"type\":\"footer\",\"num_ops\":1,\"sha256_of_preceding_lines\":\"" +
                       sha256_hex(body) + "\"}";
  std::string path = write_log({kHeader, "{\"i\":7}"}, footer);
  try {
    replay(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "sha256_of_preceding_lines");
    EXPECT_EQ(e.line(), 3u);
  }
}

// The digest is taken in runs of lines that lie back to back in the reader's buffers; whatever
// the layout (blank lines, CRLF, lines longer than a chunk, gzip), it must be the digest of every
// preceding line without its '\r' and with a '\n', and one changed byte must fail it.
RC_GTEST_PROP(OplogStream, DigestsEveryPrecedingLineWhateverTheLayout, ()) {
  const auto lines = *rc::gen::container<std::vector<std::string>>(rc::gen::map(
      rc::gen::pair(rc::gen::weightedElement<size_t>({{30, 0}, {30, 1}, {12, 200}, {1, 300000}}),
                    rc::gen::arbitrary<uint8_t>()),
      [](std::pair<size_t, uint8_t> p) {
        return p.first == 0 ? std::string()
                            : std::string(p.first, static_cast<char>('a' + p.second % 26));
      }));
  const bool crlf = *rc::gen::arbitrary<bool>();
  const bool gzip = *rc::gen::weightedElement<bool>({{1, true}, {4, false}});
  std::string file = std::string(kHeader) + "\n", digested = file;
  int64_t ops = 0;
  for (const std::string& l : lines) {
    std::string op = l.empty() ? l : R"({"i":)" + std::to_string(ops++) + R"(,"x":")" + l + "\"}";
    file += op + (crlf && !op.empty() ? "\r\n" : "\n");
    digested += op + "\n";
  }
  std::string footer = R"({"type":"footer","num_ops":)" + std::to_string(ops) +
                       R"(,"sha256_of_preceding_lines":")" + sha256_hex(digested) + "\"}\n";
  const std::string path = testing::scratch_dir() + "/digest.jsonl";
  auto replay_text = [&](const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        << (gzip ? kvtwin::testing::gzip_bytes(text) : text);
    return replay(path);
  };
  RC_ASSERT(replay_text(file + footer).size() == static_cast<size_t>(ops));
  if (ops == 0) return;
  // One byte of an op's padding changed (the JSON stays valid): the digest no longer matches.
  size_t at = file.find(R"("x":")") + 5;
  RC_PRE(file[at] != '"');
  file[at] = file[at] == 'z' ? 'y' : 'z';
  try {
    replay_text(file + footer);
    RC_FAIL("an edited op passed the digest");
  } catch (const InputError& e) {
    RC_ASSERT(e.field() == "sha256_of_preceding_lines");
  }
}

TEST(OplogStream, WrongOpCountNamesTheField) {
  std::string path =
      write_log({kHeader, "{\"i\":0}"},
                "{\"type\":\"footer\",\"num_ops\":5,\"sha256_of_preceding_lines\":\"00\"}");
  try {
    replay(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "num_ops");
  }
}

TEST(OplogStream, MalformedJsonNamesTheLine) {
  std::string path = write_log({kHeader, "{\"i\":0}", "{\"i\":1,"});
  try {
    replay(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos);
  }
}

TEST(OpFields, TypedAccessNamesTheFieldInErrors) {
  simdjson::dom::parser p;
  simdjson::dom::object o =
      p.parse(std::string(R"({"n":3,"s":"x","b":true,"z":null,"big":18446744073709551615})"));
  std::string file = "f.jsonl";
  OpFields f(&file, 9, o);
  EXPECT_EQ(f.i64("n"), 3);
  EXPECT_EQ(f.str("s"), "x");
  EXPECT_TRUE(f.boolean("b"));
  EXPECT_EQ(f.i64_or("z", -4), -4);
  EXPECT_EQ(f.i64_or("absent", 11), 11);
  EXPECT_FALSE(f.has_value("z"));
  EXPECT_TRUE(f.has("z"));
  try {
    f.i64("s");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "f.jsonl:9: s: expected an integer, got \"x\"");
  }
  EXPECT_THROW(f.i64("big"), InputError);
  EXPECT_THROW(f.str("missing"), InputError);
}

TEST(Json, EqualityIgnoresKeyOrderAndIntegerForm) {
  simdjson::dom::parser p1, p2;
  auto a = p1.parse(std::string(R"({"a":[1,2,{"x":null}],"b":0.5,"c":1})"));
  auto b = p2.parse(std::string(R"({"c":1.0,"b":0.5,"a":[1,2,{"x":null}]})"));
  EXPECT_TRUE(json_equal(a.value(), b.value()));
  EXPECT_EQ(json_first_difference(a.value(), b.value()), "");
}

TEST(Json, FirstDifferenceGivesThePath) {
  simdjson::dom::parser p1, p2;
  auto a = p1.parse(std::string(R"({"ids":[[1,2,3]],"n":2})"));
  auto b = p2.parse(std::string(R"({"ids":[[1,2,4]],"n":2})"));
  EXPECT_EQ(json_first_difference(a.value(), b.value()), "$.ids[0][2]");
  auto c = p2.parse(std::string(R"({"ids":[[1,2,3]]})"));
  EXPECT_EQ(json_first_difference(a.value(), c.value()), "$.n (missing in actual)");
  auto d = p2.parse(std::string(R"({"ids":[[1,2]],"n":2})"));
  EXPECT_EQ(json_first_difference(a.value(), d.value()), "$.ids[0] (length 3 vs 2)");
  auto e = p2.parse(std::string(R"({"ids":[[1,2,3]],"n":2.5})"));
  EXPECT_EQ(json_first_difference(a.value(), e.value()), "$.n");
}

TEST(JsonWriter, WritesCompactJsonThatParsesBack) {
  JsonWriter w;
  w.begin_object().key("ids").begin_array().begin_array().value(1).value(2).end_array().end_array();
  w.key("usage").value(0.5).key("whole").value(2.0).key("s").value("a\"b\n").key("n").null();
  w.key("ok").value(true).end_object();
  EXPECT_EQ(w.str(), R"({"ids":[[1,2]],"usage":0.5,"whole":2.0,"s":"a\"b\n","n":null,"ok":true})");
  simdjson::dom::parser p;
  EXPECT_EQ(p.parse(w.str()).error(), simdjson::SUCCESS);
}

}  // namespace
}  // namespace kvtwin::sim::golden

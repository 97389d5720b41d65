#include "sim/io/line_reader.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fstream>

#include "sim/io/input_error.h"
#include "tests/support/gzip.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::io {
namespace {

std::string write_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<std::string> read_all(const std::string& path) {
  LineReader r(path);
  std::vector<std::string> lines;
  std::string_view line;
  while (r.next(&line)) {
    lines.emplace_back(line);
    EXPECT_EQ(r.line_number(), lines.size());
  }
  return lines;
}

TEST(LineReader, PlainLinesCrlfAndMissingFinalNewline) {
  std::string dir = testing::scratch_dir();
  auto lines = read_all(write_file(dir, "a.jsonl", "one\r\ntwo\n\nfour"));
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "", "four"}));
}

TEST(LineReader, GzipIsDetectedByContentAndMatchesPlain) {
  std::string dir = testing::scratch_dir();
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "{\"i\":" + std::to_string(i) + "}\n";
  std::string path =
      write_file(dir, "x.data", kvtwin::testing::gzip_bytes(text));  // no .gz suffix on purpose
  LineReader r(path);
  EXPECT_TRUE(r.compressed());
  std::string_view line;
  int n = 0;
  while (r.next(&line)) {
    ASSERT_EQ(line, "{\"i\":" + std::to_string(n) + "}");
    ++n;
  }
  EXPECT_EQ(n, 200000);
}

TEST(LineReader, MultiMemberGzip) {
  std::string dir = testing::scratch_dir();
  auto lines = read_all(write_file(
      dir, "m.gz", kvtwin::testing::gzip_bytes("a\nb\n") + kvtwin::testing::gzip_bytes("c\n")));
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(LineReader, LongLineLargerThanTheWindow) {
  std::string dir = testing::scratch_dir();
  std::string big(9 << 20, 'x');
  auto lines = read_all(write_file(dir, "big.jsonl", "s\n" + big + "\nt\n"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].size(), big.size());
  EXPECT_EQ(lines[2], "t");
}

TEST(LineReader, TruncatedGzipIsAnInputErrorNamingTheFile) {
  std::string dir = testing::scratch_dir();
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "line " + std::to_string(i) + "\n";
  std::string z = kvtwin::testing::gzip_bytes(text);
  std::string path = write_file(dir, "t.jsonl.gz", z.substr(0, z.size() / 2));
  LineReader r(path);
  std::string_view line;
  try {
    while (r.next(&line)) {
    }
    FAIL() << "no error for a truncated gzip stream";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_GT(e.line(), 0u);
    EXPECT_NE(std::string(e.what()).find("truncated gzip"), std::string::npos) << e.what();
  }
}

TEST(LineReader, CorruptGzipIsAnInputError) {
  std::string dir = testing::scratch_dir();
  std::string z = kvtwin::testing::gzip_bytes(std::string(100000, 'a') + "\n");
  for (size_t i = 20; i < 40; ++i) z[i] = static_cast<char>(z[i] ^ 0x5a);
  std::string path = write_file(dir, "c.jsonl.gz", z);
  EXPECT_THROW(read_all(path), InputError);
}

TEST(LineReader, GzipWithoutItsTrailerIsTruncated) {
  std::string dir = testing::scratch_dir();
  std::string z = kvtwin::testing::gzip_bytes("a\nb\n");
  std::string path = write_file(dir, "nt.gz", z.substr(0, z.size() - 4));  // no ISIZE
  try {
    read_all(path);
    FAIL() << "no error for a gzip stream without its trailer";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated gzip"), std::string::npos) << e.what();
  }
}

TEST(LineReader, GzipWithAWrongChecksumIsCorrupt) {
  std::string dir = testing::scratch_dir();
  std::string z = kvtwin::testing::gzip_bytes("a\nb\n");
  z[z.size() - 8] = static_cast<char>(z[z.size() - 8] ^ 1);  // CRC32 of the trailer
  std::string path = write_file(dir, "crc.gz", z);
  try {
    read_all(path);
    FAIL() << "no error for a wrong CRC";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt gzip"), std::string::npos) << e.what();
  }
}

TEST(LineReader, GarbageAfterTheLastGzipMemberIsCorrupt) {
  std::string dir = testing::scratch_dir();
  std::string path = write_file(dir, "g.gz", kvtwin::testing::gzip_bytes("a\n") + "garbage");
  EXPECT_THROW(read_all(path), InputError);
}

TEST(LineReader, LargeGzipMatchesPlainAcrossManyChunks) {
  std::string dir = testing::scratch_dir();
  std::string text;
  for (int i = 0; i < 400000; ++i) text += "{\"op\":" + std::to_string(i * 7919LL) + "}\n";
  auto plain = read_all(write_file(dir, "l.jsonl", text));
  auto gz = read_all(write_file(dir, "l.jsonl.gz", kvtwin::testing::gzip_bytes(text)));
  ASSERT_EQ(plain.size(), 400000u);
  EXPECT_EQ(gz, plain);
}

TEST(LineReader, MissingFileIsAnInputError) {
  EXPECT_THROW(LineReader("/nonexistent/dir/file.jsonl"), InputError);
}

TEST(LineReader, LinesArePaddedForSimdjson) {
  std::string dir = testing::scratch_dir();
  LineReader r(write_file(dir, "p.jsonl", "abc"));
  std::string_view line;
  ASSERT_TRUE(r.next(&line));
  // Reading kPadding bytes past the end must be valid memory (ASan checks this build-wide).
  volatile char sink = 0;
  for (size_t i = 0; i < LineReader::kPadding; ++i) sink = sink ^ line.data()[line.size() + i];
  (void)sink;
}

// The reference: split on '\n', drop one '\r' before it, a last line without '\n' counts.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t stop = nl == std::string::npos ? text.size() : nl;
    std::string line = text.substr(start, stop - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
    start = stop + 1;
  }
  return out;
}

// Lines of random lengths (some longer than a 256 KiB chunk, so lines span chunks and even
// whole chunks), some ending in "\r\n", with or without a final '\n', read plain and gzipped.
RC_GTEST_PROP(LineReaderProperty, ReadsTheSameLinesAsASimpleSplitter, ()) {
  const auto lengths = *rc::gen::container<std::vector<int>>(
      *rc::gen::inRange<size_t>(0, 40),
      rc::gen::weightedOneOf<int>({{20, rc::gen::inRange(0, 200)},
                                   {4, rc::gen::inRange(0, 70000)},
                                   {1, rc::gen::inRange(200000, 300000)}}));
  const auto seed = *rc::gen::arbitrary<uint32_t>();
  const bool final_newline = *rc::gen::arbitrary<bool>();
  std::string text;
  uint32_t x = seed | 1;
  for (int len : lengths) {
    for (int i = 0; i < len; ++i) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      text.push_back(static_cast<char>('!' + x % 90));
    }
    if (x % 7 == 0) text.push_back('\r');
    text.push_back('\n');
  }
  if (!final_newline && !text.empty()) text.pop_back();
  const std::vector<std::string> expected = split_lines(text);
  std::string dir = testing::scratch_dir();
  RC_ASSERT(read_all(write_file(dir, "p.txt", text)) == expected);
  RC_ASSERT(read_all(write_file(dir, "p.txt.gz", kvtwin::testing::gzip_bytes(text))) == expected);
}

}  // namespace
}  // namespace kvtwin::sim::io

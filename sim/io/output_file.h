// Output files of the kvtwin commands: created, written and closed with every error checked, so
// that a full disk or an unwritable path ends the command with one line and exit code 2 instead
// of a silently truncated file.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace kvtwin::sim::io {

// fopen(path, "wb"); throws InputError(path, "cannot create file") on failure.
std::FILE* create_output(const std::string& path);

// Flushes and closes *f (if open) and sets it to null; throws InputError(path, "write failed")
// when any write to it or the close failed.
void close_output(std::FILE** f, const std::string& path);

// The whole of `text` into a new file at `path` (create_output, one write, close_output).
void write_output(const std::string& path, std::string_view text);

}  // namespace kvtwin::sim::io

// gzip_bytes: `data` as one gzip member (zlib level 6), for tests that feed compressed input to
// the readers. Concatenating two results gives a valid multi-member stream.
#pragma once

#include <string>

namespace kvtwin::testing {

std::string gzip_bytes(const std::string& data);

}  // namespace kvtwin::testing

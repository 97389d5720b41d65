#include "tests/support/gzip.h"

#include <zlib.h>

#include "model/check.h"

namespace kvtwin::testing {

std::string gzip_bytes(const std::string& data) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  KVTWIN_CHECK_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  KVTWIN_CHECK_EQ(rc, Z_STREAM_END) << "gzip of " << data.size() << " bytes did not finish";
  out.resize(zs.total_out);
  return out;
}

}  // namespace kvtwin::testing

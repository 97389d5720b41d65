#include "cuda/status.h"

#include <cuda_runtime_api.h>

#include <sstream>

namespace kvtwin::cuda {

Status cuda_call_status(int error, const char* expr, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(error);
  std::ostringstream s;
  s << expr << " failed: " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ") at "
    << file << ":" << line;
  return Status::error(s.str(), error);
}

}  // namespace kvtwin::cuda

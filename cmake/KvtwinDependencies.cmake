# Third-party libraries, all from Debian packages (see .ci/install-deps). Names and targets are the
# ones verified in ../shared/research/toolchain.md.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)
find_package(ZLIB REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(CLI11 2.1 CONFIG REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)  # igzip: the gzip inflater of LineReader

# fast-cpp-csv-parser ships only a header: <libfccp/csv.h>.
find_path(FCCP_INCLUDE_DIR libfccp/csv.h REQUIRED)
add_library(kvtwin_fccp INTERFACE)
target_include_directories(kvtwin_fccp SYSTEM INTERFACE "${FCCP_INCLUDE_DIR}")
target_link_libraries(kvtwin_fccp INTERFACE Threads::Threads)

if(KVTWIN_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  find_package(rapidcheck CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(KVTWIN_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()

# Shared compile settings and the helpers every folder uses to declare libraries and tests.

add_library(kvtwin_warnings INTERFACE)
target_compile_options(kvtwin_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Werror=return-type>)

# kvtwin_library(NAME SOURCES ... DEPS ...): a static library whose include root is the repository
# root, so headers are included as "model/vllm/block_pool.h".
function(kvtwin_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE kvtwin_warnings)
endfunction()

# kvtwin_test(NAME SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s]): a GoogleTest (+ rapidcheck)
# executable whose tests are discovered at test time (PRE_TEST: safe with sanitizers and CUDA).
function(kvtwin_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} kvtwin_test_support rapidcheck_gtest
                        GTest::gtest GTest::gmock kvtwin_warnings)
  target_compile_definitions(${name} PRIVATE
    KVTWIN_SHARED_DIR="${KVTWIN_SHARED_DIR}" KVTWIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KVTWIN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()

# kvtwin_benchmark(NAME SOURCES ... DEPS ...): a Google Benchmark executable (not run by ctest).
function(kvtwin_benchmark name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT KVTWIN_BUILD_BENCHMARKS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark kvtwin_warnings)
  target_compile_definitions(${name} PRIVATE
    KVTWIN_SHARED_DIR="${KVTWIN_SHARED_DIR}" KVTWIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()

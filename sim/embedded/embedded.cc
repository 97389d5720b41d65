// The bytes come in through the assembler's .incbin, which needs no generated source and keeps
// compile time flat whatever the file size. CMake passes the absolute paths and makes this
// object depend on the files.
#include "sim/embedded/embedded.h"

#define KVTWIN_INCBIN(sym, path)      \
  asm(".section .rodata\n"            \
      ".balign 16\n"                  \
      ".global " #sym "_begin\n" #sym \
      "_begin:\n"                     \
      ".incbin \"" path               \
      "\"\n"                          \
      ".global " #sym "_end\n" #sym   \
      "_end:\n"                       \
      ".byte 0\n"                     \
      ".previous\n")

KVTWIN_INCBIN(kvtwin_default_scenario, KVTWIN_DEFAULT_SCENARIO_FILE);
KVTWIN_INCBIN(kvtwin_default_trace, KVTWIN_DEFAULT_TRACE_FILE);

extern "C" {
extern const char kvtwin_default_scenario_begin[];
extern const char kvtwin_default_scenario_end[];
extern const char kvtwin_default_trace_begin[];
extern const char kvtwin_default_trace_end[];
}

namespace kvtwin::sim::embedded {

std::string_view default_scenario() {
  return {kvtwin_default_scenario_begin,
          static_cast<size_t>(kvtwin_default_scenario_end - kvtwin_default_scenario_begin)};
}

std::string_view default_trace() {
  return {kvtwin_default_trace_begin,
          static_cast<size_t>(kvtwin_default_trace_end - kvtwin_default_trace_begin)};
}

}  // namespace kvtwin::sim::embedded

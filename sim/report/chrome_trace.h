// ChromeTrace: a timeline in the Chrome trace-event JSON format (chrome://tracing, Perfetto UI),
// streamed to a file as the simulation runs.
//
// Layout: one process per serving instance (pid = instance + 1; pid 0 = cluster-wide links),
// thread 0 = engine steps, one thread per link. Events are "complete" events (ph "X") with
// timestamps in µs printed exactly from integer ns. After max_events events the rest are
// counted, not written; the count goes into the file's metadata and the run summary.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "sim/time.h"

namespace kvtwin::sim::report {

class ChromeTrace {
 public:
  // Opens `path` for writing; throws InputError if it cannot.
  ChromeTrace(const std::string& path, int64_t max_events);
  ~ChromeTrace();
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  void name_process(int pid, std::string_view name);
  void name_thread(int pid, int tid, std::string_view name);
  // `args_json` is "" or the members of a JSON object without braces ("\"tokens\": 12").
  void complete(int pid, int tid, std::string_view name, SimTime start, SimDuration duration,
                std::string_view args_json);
  // True when a complete() now would write nothing (closed, or past max_events); counts the drop
  // complete() would count. Lets callers skip building an event's arguments.
  bool skip_event() {
    if (!f_) return true;
    if (written_ < max_events_) return false;
    ++dropped_;
    return true;
  }
  // Writes the closing metadata and closes the file; throws InputError when a write failed. The
  // destructor does the same without the check.
  void close();

  int64_t written() const { return written_; }
  int64_t dropped() const { return dropped_; }
  static std::string micros(SimTime ns);  // exact "12.345" (µs with ns precision)
  static void append_micros(std::string* out, SimTime ns);  // appends micros(ns)

 private:
  void emit(const std::string& event);
  void write_trailer();
  std::string path_;
  static void append_int(std::string* out, int64_t v);
  std::string event_;  // complete()'s buffer
  std::FILE* f_ = nullptr;
  int64_t max_events_;
  int64_t written_ = 0;
  int64_t dropped_ = 0;
  bool first_ = true;
};

}  // namespace kvtwin::sim::report

#include "sim/report/chrome_trace.h"

#include <charconv>

#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/report/json_writer.h"

namespace kvtwin::sim::report {

ChromeTrace::ChromeTrace(const std::string& path, int64_t max_events)
    : path_(path), max_events_(max_events) {
  f_ = io::create_output(path);
  std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f_);
}

ChromeTrace::~ChromeTrace() {
  if (!f_) return;
  write_trailer();
  std::fclose(f_);
}

std::string ChromeTrace::micros(SimTime ns) {
  std::string s;
  append_micros(&s, ns);
  return s;
}

// The integer µs, then (when ns is not a whole µs) "." and the three ns digits without trailing
// zeros; a negative time is "-" and the form of its magnitude.
void ChromeTrace::append_micros(std::string* out, SimTime ns) {
  if (ns < 0) {
    *out += '-';
    ns = -ns;
  }
  append_int(out, ns / 1000);
  const int64_t frac = ns % 1000;
  if (frac == 0) return;
  char d[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
               static_cast<char>('0' + frac % 10)};
  size_t n = 4;
  while (d[n - 1] == '0') --n;
  out->append(d, n);
}

void ChromeTrace::emit(const std::string& event) {
  if (!first_) std::fputs(",\n", f_);
  first_ = false;
  std::fwrite(event.data(), 1, event.size(), f_);
}

void ChromeTrace::name_process(int pid, std::string_view name) {
  emit("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(pid) +
       ", \"args\": {\"name\": " + JsonWriter::escape(name) + "}}");
  emit("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + std::to_string(pid) +
       ", \"args\": {\"sort_index\": " + std::to_string(pid) + "}}");
}

void ChromeTrace::name_thread(int pid, int tid, std::string_view name) {
  emit("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(pid) +
       ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + JsonWriter::escape(name) +
       "}}");
}

void ChromeTrace::complete(int pid, int tid, std::string_view name, SimTime start,
                           SimDuration duration, std::string_view args_json) {
  if (!f_) return;
  if (written_ >= max_events_) {
    ++dropped_;
    return;
  }
  ++written_;
  // Formatted into a buffer kept between events: no allocation per event.
  std::string& e = event_;
  e.assign("{\"ph\": \"X\", \"pid\": ");
  append_int(&e, pid);
  e += ", \"tid\": ";
  append_int(&e, tid);
  e += ", \"name\": ";
  JsonWriter::append_escaped(&e, name);
  e += ", \"ts\": ";
  append_micros(&e, start);
  e += ", \"dur\": ";
  append_micros(&e, duration);
  if (!args_json.empty()) {
    e += ", \"args\": {";
    e += args_json;
    e += "}";
  }
  e += "}";
  emit(e);
}

void ChromeTrace::append_int(std::string* out, int64_t v) {
  char buf[24];
  out->append(buf, static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}

void ChromeTrace::write_trailer() {
  emit("{\"ph\": \"M\", \"name\": \"kvtwin_dropped_events\", \"pid\": 0, \"args\": {\"dropped\": " +
       std::to_string(dropped_) + "}}");
  std::fputs("\n]}\n", f_);
}

void ChromeTrace::close() {
  if (!f_) return;
  write_trailer();
  io::close_output(&f_, path_);
}

}  // namespace kvtwin::sim::report

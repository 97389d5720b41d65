#include "sim/report/chrome_trace.h"

#include "sim/io/input_error.h"
#include "sim/report/json_writer.h"

namespace kvtwin::sim::report {

ChromeTrace::ChromeTrace(const std::string& path, int64_t max_events) : max_events_(max_events) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw InputError(path, 0, "", "cannot create file");
  std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f_);
}

ChromeTrace::~ChromeTrace() {
  close();
}

std::string ChromeTrace::micros(SimTime ns) {
  std::string s = std::to_string(ns / 1000);
  int64_t frac = ns % 1000;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    s += "." + std::string(3 - f.size(), '0') + f;
    while (s.back() == '0') s.pop_back();
  }
  return s;
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
  std::string e = "{\"ph\": \"X\", \"pid\": " + std::to_string(pid) +
                  ", \"tid\": " + std::to_string(tid) + ", \"name\": " + JsonWriter::escape(name) +
                  ", \"ts\": " + micros(start) + ", \"dur\": " + micros(duration);
  if (!args_json.empty()) {
    e += ", \"args\": {";
    e += args_json;
    e += "}";
  }
  emit(e + "}");
}

void ChromeTrace::close() {
  if (!f_) return;
  emit("{\"ph\": \"M\", \"name\": \"kvtwin_dropped_events\", \"pid\": 0, \"args\": {\"dropped\": " +
       std::to_string(dropped_) + "}}");
  std::fputs("\n]}\n", f_);
  std::fclose(f_);
  f_ = nullptr;
}

}  // namespace kvtwin::sim::report

// Azure LLM inference 2023 CSV (Splitwise): TIMESTAMP, ContextTokens, GeneratedTokens.
// Arrivals are taken relative to the first row's timestamp; no prefix information.
#include <string>

#include "sim/io/parse.h"
#include "sim/workload/csv.h"
#include "sim/workload/readers.h"

namespace kvtwin::sim::workload {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.f{1,9}]" → ns since the Unix epoch; nullopt if malformed.
std::optional<int64_t> parse_timestamp(std::string_view s) {
  s = io::trim(s);
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':')
    return std::nullopt;
  auto num = [&](size_t pos, size_t len) -> std::optional<int64_t> {
    for (size_t i = pos; i < pos + len; ++i)
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
    return io::parse_int64(s.substr(pos, len));
  };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       se = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !se) return std::nullopt;
  // Years beyond these would overflow nanoseconds since the epoch.
  if (*y < 1900 || *y > 2199) return std::nullopt;
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *se > 60)
    return std::nullopt;
  int64_t frac_ns = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20 || s.size() > 29) return std::nullopt;
    auto f = num(20, s.size() - 20);
    if (!f) return std::nullopt;
    frac_ns = *f;
    for (size_t digits = s.size() - 20; digits < 9; ++digits) frac_ns *= 10;
  }
  int64_t secs = days_from_civil(*y, *mo, *d) * 86400 + *h * 3600 + *mi * 60 + *se;
  return secs * kNsPerSecond + frac_ns;
}

class AzureReader final : public FormatReader {
 public:
  explicit AzureReader(std::unique_ptr<LineSource> lines)
      : lines_(std::move(lines)),
        csv_(lines_->name(), std::make_unique<CsvByteSource>(lines_.get())) {
    try {
      csv_.read_header(::io::ignore_extra_column, "TIMESTAMP", "ContextTokens", "GeneratedTokens");
    } catch (const ::io::error::missing_column_in_header& e) {
      throw InputError(name(), 1, e.column_name, "required column missing from the header");
    } catch (const ::io::error::base& e) {
      throw_csv_error(e, name(), 1);
    }
  }

  bool next(TraceRequest* out) override {
    char* col[3] = {};
    try {
      if (!csv_.read_row(col[0], col[1], col[2])) return false;
    } catch (const ::io::error::base& e) {
      throw_csv_error(e, name(), csv_.get_file_line());
    }
    line_ = csv_.get_file_line();
    *out = TraceRequest{};
    auto t = parse_timestamp(col[0]);
    if (!t)
      throw InputError(name(), line_, "TIMESTAMP",
                       "expected YYYY-MM-DD HH:MM:SS[.fffffff] (years 1900 to 2199), got '" +
                           std::string(col[0]) + "'");
    if (!origin_) origin_ = *t;
    out->arrival = *t - *origin_;
    out->prompt_tokens = int_column(col[1], "ContextTokens");
    out->output_tokens = int_column(col[2], "GeneratedTokens");
    validate_request(*out, name(), line_, "ContextTokens", "GeneratedTokens", "");
    return true;
  }

  uint64_t line_number() const override { return line_; }
  const std::string& name() const override { return lines_->name(); }
  const char* time_field() const override { return "TIMESTAMP"; }

 private:
  int64_t int_column(const char* text, const char* field) const {
    auto v = io::parse_int64(text);
    if (!v)
      throw InputError(name(), line_, field,
                       "expected an integer, got '" + std::string(text) + "'");
    return *v;
  }

  std::unique_ptr<LineSource> lines_;
  CsvReader<3> csv_;
  std::optional<int64_t> origin_;
  uint64_t line_ = 0;
};

}  // namespace

std::unique_ptr<FormatReader> make_azure_reader(std::unique_ptr<LineSource> lines) {
  return std::make_unique<AzureReader>(std::move(lines));
}

}  // namespace kvtwin::sim::workload

// A checker for the Prometheus text exposition format (version 0.0.4), strict enough to catch what
// scrapers reject: metric and label names, label-value escapes, numeric values, HELP/TYPE before a
// family's samples and at most once, samples grouped by family, histogram buckets with `le`
// labels that are cumulative and end in +Inf equal to _count, plus _sum.
// https://prometheus.io/docs/instrumenting/exposition_formats/
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace lathe::test {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

struct PromParse {
  std::string error;                         // empty when valid
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|summary|untyped
  std::vector<PromSample> samples;

  // The value of the sample `name` whose labels include `labels`; NaN when absent.
  double value(const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const {
    for (const PromSample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) ok = false;
      }
      if (ok) return s.value;
    }
    return std::nan("");
  }
};

inline bool parse_prom_value(const std::string& s, double* out) {
  if (s == "+Inf" || s == "Inf") {
    *out = INFINITY;
    return true;
  }
  if (s == "-Inf") {
    *out = -INFINITY;
    return true;
  }
  if (s == "NaN") {
    *out = NAN;
    return true;
  }
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

inline PromParse validate_prometheus_text(const std::string& text) {
  PromParse p;
  const std::regex metric_name("[a-zA-Z_:][a-zA-Z0-9_:]*");
  const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
  std::set<std::string> helped, finished_families;
  std::string current_family;
  auto fail = [&](int line_no, const std::string& line, const std::string& why) {
    p.error = "line " + std::to_string(line_no) + ": " + why + ": '" + line + "'";
    return p;
  };
  auto family_of = [&](const std::string& sample) -> std::string {
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string sfx(suffix);
      if (sample.size() > sfx.size() &&
          sample.compare(sample.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = sample.substr(0, sample.size() - sfx.size());
        auto it = p.types.find(base);
        if (it != p.types.end() && (it->second == "histogram" || it->second == "summary"))
          return base;
      }
    }
    return sample;
  };

  if (!text.empty() && text.back() != '\n') {
    p.error = "the text must end with a newline";
    return p;
  }
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!std::regex_match(name, metric_name)) return fail(line_no, line, "bad metric name");
      if (kind == "HELP") {
        if (!helped.insert(name).second) return fail(line_no, line, "second HELP for a family");
      } else {
        std::string type, extra;
        ls >> type >> extra;
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped")
          return fail(line_no, line, "unknown type");
        if (!extra.empty()) return fail(line_no, line, "text after the type");
        if (p.types.count(name)) return fail(line_no, line, "second TYPE for a family");
        if (finished_families.count(name) || name == current_family)
          return fail(line_no, line, "TYPE after the family's samples");
        p.types[name] = type;
      }
      continue;
    }
    // name{labels} value [timestamp]
    PromSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, metric_name)) return fail(line_no, line, "bad sample name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return fail(line_no, line, "label without '='");
        const std::string lname = line.substr(i, eq - i);
        if (!std::regex_match(lname, label_name)) return fail(line_no, line, "bad label name");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"')
          return fail(line_no, line, "label value not quoted");
        ++i;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '\\') {
            if (i >= line.size()) return fail(line_no, line, "dangling escape");
            const char e = line[i++];
            if (e == 'n')
              value += '\n';
            else if (e == '\\' || e == '"')
              value += e;
            else
              return fail(line_no, line, "bad escape in a label value");
          } else if (c == '"') {
            closed = true;
            break;
          } else {
            value += c;
          }
        }
        if (!closed) return fail(line_no, line, "unterminated label value");
        if (s.labels.count(lname)) return fail(line_no, line, "duplicate label");
        s.labels[lname] = value;
        if (i < line.size() && line[i] == ',')
          ++i;
        else if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        } else
          return fail(line_no, line, "expected ',' or '}' after a label");
      }
    }
    if (i >= line.size() || line[i] != ' ') return fail(line_no, line, "no space before the value");
    std::istringstream rest(line.substr(i + 1));
    std::string value, timestamp, extra;
    rest >> value >> timestamp >> extra;
    if (!parse_prom_value(value, &s.value)) return fail(line_no, line, "value is not a number");
    if (!extra.empty()) return fail(line_no, line, "text after the timestamp");
    const std::string family = family_of(s.name);
    if (!p.types.count(family)) return fail(line_no, line, "sample before its TYPE line");
    if (family != current_family) {
      if (finished_families.count(family))
        return fail(line_no, line, "family's samples are not grouped");
      if (!current_family.empty()) finished_families.insert(current_family);
      current_family = family;
    }
    const std::string& type = p.types[family];
    if (type == "counter" && (s.value < 0 || std::isnan(s.value)))
      return fail(line_no, line, "a counter must be a non-negative number");
    if (type == "histogram") {
      const bool bucket = s.name == family + "_bucket";
      if (!bucket && s.name != family + "_count" && s.name != family + "_sum")
        return fail(line_no, line, "histogram sample must be _bucket, _count or _sum");
      if (bucket != (s.labels.count("le") != 0))
        return fail(line_no, line, "le label on _bucket only");
    }
    p.samples.push_back(std::move(s));
  }

  // Histograms: per label set (without le), buckets ascend in le, are cumulative, end at +Inf with
  // the value of _count, and a _sum exists.
  for (const auto& [family, type] : p.types) {
    if (type != "histogram") continue;
    std::map<std::string, std::vector<std::pair<double, double>>> buckets;
    std::map<std::string, double> counts;
    std::set<std::string> sums;
    for (const PromSample& s : p.samples) {
      std::string key;
      for (const auto& [k, v] : s.labels)
        if (k != "le") key += k + "=" + v + ",";
      if (s.name == family + "_bucket") {
        double le = 0;
        if (!parse_prom_value(s.labels.at("le"), &le)) {
          p.error = family + ": le is not a number";
          return p;
        }
        buckets[key].push_back({le, s.value});
      } else if (s.name == family + "_count") {
        counts[key] = s.value;
      } else if (s.name == family + "_sum") {
        sums.insert(key);
      }
    }
    if (buckets.empty()) {
      p.error = family + ": histogram without buckets";
      return p;
    }
    for (const auto& [key, list] : buckets) {
      for (size_t k = 1; k < list.size(); ++k) {
        if (!(list[k].first > list[k - 1].first) || list[k].second < list[k - 1].second) {
          p.error = family + ": buckets must ascend in le and be cumulative";
          return p;
        }
      }
      if (!std::isinf(list.back().first)) {
        p.error = family + ": the last bucket must be le=\"+Inf\"";
        return p;
      }
      if (!counts.count(key) || counts[key] != list.back().second) {
        p.error = family + ": _count must equal the +Inf bucket";
        return p;
      }
      if (!sums.count(key)) {
        p.error = family + ": missing _sum";
        return p;
      }
    }
  }
  return p;
}

}  // namespace lathe::test

#include "agent/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuheal {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string LabelText(const Labels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    out += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, Escape(v));
    first = false;
  }
  if (!extra.empty()) out += (first ? "" : ",") + extra;
  return out + "}";
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i] = 0;
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::string Histogram::Render(const std::string& name, const Labels& labels) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += fmt::format("{}_bucket{} {}\n", name, LabelText(labels, fmt::format("le=\"{}\"", Num(le))),
                       cumulative);
  }
  out += fmt::format("{}_sum{} {}\n", name, LabelText(labels), Num(sum_.load()));
  out += fmt::format("{}_count{} {}\n", name, LabelText(labels), count_.load());
  return out;
}

Counter& Metrics::GetCounter(const std::string& name, const std::string& help,
                             const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "counter";
  auto& slot = f.counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Metrics::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "gauge";
  auto& slot = f.gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Metrics::GetHistogram(const std::string& name, const std::string& help,
                                 const std::vector<double>& bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "histogram";
  auto& slot = f.histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    for (const auto& [labels, c] : f.counters) {
      out += fmt::format("{}{} {}\n", name, LabelText(labels), Num(c->value()));
    }
    for (const auto& [labels, g] : f.gauges) {
      out += fmt::format("{}{} {}\n", name, LabelText(labels), Num(g->value()));
    }
    for (const auto& [labels, h] : f.histograms) out += h->Render(name, labels);
  }
  return out;
}

}  // namespace gpuheal

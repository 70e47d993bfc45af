#include "serve/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace gpuheal {

void Counter::Inc(double v) { c_.Increment(v); }
double Counter::value() const { return c_.Value(); }
void Gauge::Set(double v) { g_.Set(v); }
double Gauge::value() const { return g_.Value(); }
void Histogram::Observe(double v) { h_.Observe(v); }

namespace {

prometheus::Labels ToPrometheus(const Labels& labels) {
  prometheus::Labels out;
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

template <typename Handle, typename Metric>
struct FamilyOf {
  prometheus::Family<Metric>* family = nullptr;
  std::map<Labels, std::unique_ptr<Handle>> handles;
};

}  // namespace

struct Metrics::Families {
  std::map<std::string, FamilyOf<Counter, prometheus::Counter>> counters;
  std::map<std::string, FamilyOf<Gauge, prometheus::Gauge>> gauges;
  std::map<std::string, FamilyOf<Histogram, prometheus::Histogram>> histograms;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      families_(std::make_unique<Families>()) {}
Metrics::~Metrics() = default;

Counter& Metrics::GetCounter(const std::string& name, const std::string& help,
                             const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = families_->counters[name];
  if (!f.family) f.family = &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  auto& slot = f.handles[labels];
  if (!slot) slot = std::make_unique<Counter>(f.family->Add(ToPrometheus(labels)));
  return *slot;
}

Gauge& Metrics::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = families_->gauges[name];
  if (!f.family) f.family = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  auto& slot = f.handles[labels];
  if (!slot) slot = std::make_unique<Gauge>(f.family->Add(ToPrometheus(labels)));
  return *slot;
}

Histogram& Metrics::GetHistogram(const std::string& name, const std::string& help,
                                 const std::vector<double>& bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = families_->histograms[name];
  if (!f.family)
    f.family = &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  auto& slot = f.handles[labels];
  if (!slot) {
    slot = std::make_unique<Histogram>(
        f.family->Add(ToPrometheus(labels), prometheus::Histogram::BucketBoundaries(bounds)));
  }
  return *slot;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace gpuheal

#pragma once
// Prometheus metrics on prometheus-cpp's core: counters, gauges and histograms with labels in one
// registry, rendered in the text exposition format by its serializer (the agent's and the
// controller's HTTP endpoints serve it). Metric names, types and label names are a public
// contract listed in docs/metrics.md; a unit test holds the source and that list together.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace gpuheal {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Thin handles on prometheus-cpp's metrics: stable for the registry's life, safe from any thread.
class Counter {
 public:
  explicit Counter(prometheus::Counter& c) : c_(c) {}
  void Inc(double v = 1);
  double value() const;

 private:
  prometheus::Counter& c_;
};

class Gauge {
 public:
  explicit Gauge(prometheus::Gauge& g) : g_(g) {}
  void Set(double v);
  double value() const;

 private:
  prometheus::Gauge& g_;
};

class Histogram {
 public:
  explicit Histogram(prometheus::Histogram& h) : h_(h) {}
  void Observe(double v);

 private:
  prometheus::Histogram& h_;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Families are created on first use; returned references stay valid for the registry's life.
  // A name keeps the type it was first created with (a second type is a programming error).
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& bounds, const Labels& labels = {});
  // Text exposition format 0.0.4; label names within a series sorted, as prometheus-cpp writes
  // them.
  std::string Render() const;

 private:
  struct Families;
  mutable std::mutex mu_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
};

}  // namespace gpuheal

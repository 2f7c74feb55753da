#pragma once
// How an engine reports what it computes without knowing who watches. The engine asks first
// (wants), so a step nobody asked for costs nothing; then it tells (on) with a view of its own tensor.

#include "tensor/tensor.hpp"
#include "trace/steps.hpp"

namespace attn {

class Observer {
 public:
  virtual ~Observer() = default;
  virtual bool wants(Step step) const = 0;
  // Every tensor here has the batch axis first, as the engine holds it. Only valid during the call.
  virtual void on(Step step, const Tensor<float>& value) = 0;
  virtual void on(Step step, const Tensor<double>& value) = 0;
};

// Watches nothing, keeps nothing: the engines' fast path.
class NullObserver final : public Observer {
 public:
  bool wants(Step) const override { return false; }
  void on(Step, const Tensor<float>&) override {}
  void on(Step, const Tensor<double>&) override {}
};

// Ask, then tell: the one way engines report a step.
template <class T>
void report(Observer& observer, Step step, const Tensor<T>& value) {
  if (observer.wants(step)) observer.on(step, value);
}

}  // namespace attn

#pragma once
// A dense, row-major tensor of any rank: the one container the math works on.

#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attn {

using Shape = std::vector<std::size_t>;

}  // namespace attn

// A shape as messages write it: "[2, 3]" (fmt/ranges.h's text for a vector, so every Shape prints alike
// wherever it is formatted); "{:n}" leaves the brackets out, for the messages that write NumPy's "(2, 3)".
template <>
struct fmt::formatter<attn::Shape> {
  bool bare = false;  // "{:n}"

  constexpr auto parse(format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == 'n') {
      bare = true;
      ++it;
    }
    if (it != ctx.end() && *it != '}') throw format_error("a shape's format is {} or {:n}");
    return it;
  }

  template <class Context>
  auto format(const attn::Shape& shape, Context& ctx) const {
    if (bare) return fmt::format_to(ctx.out(), "{}", fmt::join(shape, ", "));
    return fmt::format_to(ctx.out(), "[{}]", fmt::join(shape, ", "));
  }
};

namespace attn {

// The number of elements of `shape`; throws std::length_error instead of wrapping around.
inline std::size_t element_count(const Shape& shape) {
  std::size_t count = 1;
  for (const std::size_t d : shape) {
    if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d) {
      throw std::length_error(fmt::format("a tensor of shape {} has too many elements", shape));
    }
    count *= d;
  }
  return count;
}

// Row-major position `flat` in `shape` as one index per axis.
inline std::vector<std::size_t> unravel_index(std::size_t flat, const Shape& shape) {
  std::vector<std::size_t> at(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    at[a] = shape[a] == 0 ? 0 : flat % shape[a];
    flat = shape[a] == 0 ? 0 : flat / shape[a];
  }
  return at;
}

template <class T>
class Tensor {
 public:
  Tensor() : shape_{0} {}  // empty: one axis of extent 0
  explicit Tensor(Shape shape, T fill = T{}) : shape_(std::move(shape)), data_(element_count(shape_), fill) {}
  Tensor(Shape shape, std::vector<T> data) : shape_(std::move(shape)), data_(std::move(data)) {
    if (data_.size() != element_count(shape_)) {
      throw std::invalid_argument(
          fmt::format("Tensor: shape {} needs {} values, got {}", shape_, element_count(shape_), data_.size()));
    }
  }

  const Shape& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  std::size_t dim(std::size_t axis) const { return shape_.at(axis); }
  std::size_t size() const { return data_.size(); }
  bool empty() const { return data_.empty(); }

  std::span<T> values() { return data_; }
  std::span<const T> values() const { return data_; }

  // Element access by one index per axis: t(b, i, j).
  template <class... I>
  T& operator()(I... index) {
    return data_[offset({static_cast<std::size_t>(index)...})];
  }
  template <class... I>
  const T& operator()(I... index) const {
    return data_[offset({static_cast<std::size_t>(index)...})];
  }

  // The contiguous sub-tensor at position i of the first axis: a row of a matrix, a head of (h, n, d).
  std::span<T> block(std::size_t i) {
    const std::size_t len = data_.size() / shape_.at(0);
    return std::span<T>(data_).subspan(i * len, len);
  }
  std::span<const T> block(std::size_t i) const {
    const std::size_t len = data_.size() / shape_.at(0);
    return std::span<const T>(data_).subspan(i * len, len);
  }

  friend bool operator==(const Tensor&, const Tensor&) = default;

 private:
  std::size_t offset(std::initializer_list<std::size_t> index) const {
    std::size_t at = 0;
    std::size_t axis = 0;
    for (const std::size_t i : index) {
      at = at * shape_[axis] + i;
      ++axis;
    }
    return at;
  }

  Shape shape_;          // one extent per axis, outermost first
  std::vector<T> data_;  // row-major: the last index varies fastest
};

// The same values in another scalar type (float <-> double).
template <class To, class From>
Tensor<To> cast(const Tensor<From>& t) {
  std::vector<To> out(t.values().begin(), t.values().end());
  return Tensor<To>(t.shape(), std::move(out));
}

}  // namespace attn

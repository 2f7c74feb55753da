#pragma once
// The reader of a trace (docs/trace-format.md) inside io: JSON -> Trace, checking every shape against the
// trace's input before it sizes anything by it, every failure an InputError with the JSON Pointer of what
// is wrong. trace_read.cpp reads the trace's steps, flash's tiles and compare; trace_read_decode.cpp a
// decode's parts. Callers outside io read a trace with trace_from_json (io/trace_json.hpp).

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "json/pointer.hpp"
#include "trace/decode.hpp"
#include "trace/trace.hpp"

namespace attn::trace_reading {

using json = nlohmann::json;

class TraceReader {
 public:
  explicit TraceReader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(file_, pointer, message);
  }
  Trace read(const json& doc) const;

 private:
  // The steps at `ptr`, of the problem being read (problem_), into t.steps; a decode step's "k_cache" and
  // "v_cache" into `cache` when it is given.
  void read_steps(const json& steps, const std::string& ptr, Trace& t, DecodeStepRecord* cache = nullptr) const;
  // A part of the trace's problem (a decode's prefill, new token or row) and its steps at `ptr`.
  Trace part_trace(const json& steps, const std::string& ptr, const Trace& whole, Problem part,
                   DecodeStepRecord* cache = nullptr) const;
  // /decode (docs/trace-format.md, "Decoding: decode"): the plan, the prefill, every decode step and the check.
  std::shared_ptr<const DecodeRecord> decode(const json& d, const Trace& t) const;
  DecodeStepRecord decode_step(const json& s, const std::string& at, std::size_t position, const DecodeRecord& d,
                               const Trace& t) const;
  // A step's chunks: S of them over its cache, each chunk's o, lse and share, and the merged lse.
  SplitRecord split(const json& s, const std::string& at, std::size_t S, std::size_t L, bool float32) const;
  // A {"shape", "data"} object at `key` whose shape must be `expected`.
  Tensor<double> shaped(const json& object, const std::string& ptr, const char* key, const Shape& expected,
                        bool float32) const;
  // A chunk's [begin, end): the one chunk_of gives, as the writer cut it.
  std::pair<std::size_t, std::size_t> range(const json& j, const std::string& at,
                                            std::pair<std::size_t, std::size_t> expected) const;
  PageRecord pages(const json& pg, const std::string& at, std::size_t page_size) const;
  // /decode/check: compare's rule with the decode in flash's place.
  CompareRecord decode_check(const json& d, const std::string& ptr, DType dtype) const;
  std::size_t whole(const json& object, const std::string& ptr, const char* key) const;
  std::pair<std::size_t, std::size_t> range(const json& object, const std::string& ptr, const char* key) const;
  // A tensor of the given shape found at `key`, its shape known from the tile.
  Tensor<double> values(const json& object, const std::string& ptr, const char* key, Shape shape, bool float32) const;
  // A tensor whose shape is whatever its nesting says (lse, output).
  Tensor<double> nested(const json& object, const std::string& ptr, const char* key, bool float32) const;
  // One tile of /flash/tiles at `at`: where it lies and, unless skipped, its state.
  FlashTile flash_tile(const json& t, const std::string& at, bool float32) const;
  // Where tile t at `at` lies (its rows and columns, inside the input's batch, heads, queries and keys) and
  // whether the mask skipped it, into a FlashTile or a FlashBackwardTile.
  template <class Tile>
  void place_tile(const json& t, const std::string& at, Tile& tile) const {
    const Problem& p = *problem_;
    std::tie(tile.row_begin, tile.row_end) = range(t, at, "rows");
    std::tie(tile.col_begin, tile.col_end) = range(t, at, "cols");
    if (tile.batch >= p.B || tile.head >= p.h || tile.row_begin >= tile.row_end || tile.row_end > p.n ||
        tile.col_begin >= tile.col_end || tile.col_end > p.m)
      fail(at, "the tile lies outside the input's batch, heads, queries or keys");
    if (!t.contains("skipped") || !t.at("skipped").is_boolean())
      fail(pointer_key(at, "skipped"), "expected true or false");
    tile.skipped = t.at("skipped").get<bool>();
  }
  // /compare/tolerance and /decode/check/tolerance at ptr: the rule's noise, its bound and its verdict.
  void tolerance(const json& c, const std::string& ptr, CompareRecord& out) const;
  // /flash_backward: D and every tile of FlashAttention-2's backward pass.
  FlashBackwardRecord flash_backward(const json& f, bool float32) const;
  FlashRecord flash(const json& f, bool float32) const;
  double real(const json& object, const std::string& ptr, const char* key) const;
  ErrorStats stats(const json& c, const std::string& ptr, const char* key) const;
  CompareRecord compare(const json& c) const;
  DType dtype_at(const json& object, const std::string& ptr) const;
  std::string string_at(const json& object, const std::string& ptr, const char* key) const;
  // A step's tensor, its shape that of `as` (else of its name) for the problem being read.
  Tensor<double> tensor_at(const json& step, const std::string& ptr, bool float32,
                           std::optional<Step> as = std::nullopt) const;
  static constexpr std::size_t too_many = std::numeric_limits<std::size_t>::max();
  // The product of the extents, or too_many when it does not fit in a size_t.
  static std::size_t checked_count(const Shape& shape);
  static constexpr std::size_t max_rank = 8;  // a step has at most 4 axes: batch, head, row, column
  // The values `depth` lists down in nested lists (what read_values will read as numbers).
  static std::size_t count_numbers(const json& j, std::size_t depth);
  void read_values(const json& j, const Shape& shape, std::size_t axis, const std::string& ptr, bool float32,
                   std::vector<double>& out) const;
  double number(const json& j, const std::string& ptr, bool float32) const;
  std::string file_;
  mutable const Problem* problem_ = nullptr;  // the trace's problem, while reading it
  mutable bool one_head_ = false;             // the trace kept one head (config.head)
};

}  // namespace attn::trace_reading

#include "formats/safetensors.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/dump_bytes.hpp"
#include "json/error.hpp"
#include "json/parse.hpp"
#include "json/pointer.hpp"
#include "text/number.hpp"

namespace attn {

using dump_detail::quote_bytes;
using dump_detail::shape_text;
using json = nlohmann::ordered_json;  // keeps the header's order, which is the order we return

namespace {

// The safetensors library's own bound on a header: past it the file is refused unread.
constexpr std::uint64_t max_header = 100'000'000;
constexpr std::size_t max_rank = 64;

struct Entry {
  std::string name;
  std::string pointer;
  DumpDType dtype;
  Shape shape;
  std::size_t begin, end;  // byte range in the data
};

std::optional<DumpDType> dtype_of(const std::string& name) {
  if (name == "F16") return DumpDType::float16;
  if (name == "BF16") return DumpDType::bfloat16;
  if (name == "F32") return DumpDType::float32;
  if (name == "F64") return DumpDType::float64;
  return std::nullopt;
}

std::size_t whole_number(const json& v, const std::string& file, const std::string& pointer, const char* what) {
  if (!v.is_number_unsigned())
    throw InputError(file, pointer, fmt::format("{} must be a whole number, 0 or more, not {}", what, v.dump()));
  return v.get<std::size_t>();
}

Entry entry_of(const std::string& name, const json& v, const std::string& file) {
  Entry e{name, pointer_key("", name), DumpDType::float32, {}, 0, 0};
  if (!v.is_object())
    throw InputError(file, e.pointer, "a tensor's entry must be an object with dtype, shape and data_offsets");
  for (const auto& [key, value] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw InputError(
          file, pointer_key(e.pointer, key),
          fmt::format("unknown key {}: a tensor's entry has dtype, shape and data_offsets", quote_bytes(key)));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key))
      throw InputError(file, e.pointer, fmt::format("tensor {} has no \"{}\"", quote_bytes(name), key));

  const json& dtype = v["dtype"];
  if (!dtype.is_string())
    throw InputError(file, pointer_key(e.pointer, "dtype"), "dtype must be a string such as \"F32\"");
  const std::optional<DumpDType> d = dtype_of(dtype.get<std::string>());
  if (!d)
    throw InputError(file, pointer_key(e.pointer, "dtype"),
                     fmt::format("tensor {} has dtype {}: only F16, BF16, F32 and F64 are read", quote_bytes(name),
                                 quote_bytes(dtype.get<std::string>())));
  e.dtype = *d;

  const std::string shape_pointer = pointer_key(e.pointer, "shape");
  const json& shape = v["shape"];
  if (!shape.is_array()) throw InputError(file, shape_pointer, "shape must be a list of whole numbers");
  if (shape.size() > max_rank)
    throw InputError(file, shape_pointer, fmt::format("a shape of more than {} dimensions", max_rank));
  for (std::size_t i = 0; i < shape.size(); ++i)
    e.shape.push_back(whole_number(shape[i], file, pointer_index(shape_pointer, i), "an extent"));

  const std::string offsets_pointer = pointer_key(e.pointer, "data_offsets");
  const json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    throw InputError(file, offsets_pointer, "data_offsets must be two whole numbers, [begin, end]");
  e.begin = whole_number(offsets[0], file, pointer_index(offsets_pointer, 0), "an offset");
  e.end = whole_number(offsets[1], file, pointer_index(offsets_pointer, 1), "an offset");
  return e;
}

// The header's text, read after its length has been checked against the file's size and the budget;
// the data's size, when the file's is known.
std::pair<std::string, std::optional<std::size_t>> read_split(ByteSource& in, const std::string& file,
                                                              const MemoryBudget& budget) {
  const std::string length = read_up_to(in, 8);
  if (length.empty())
    throw InputError(file, "", "the file is empty (0 bytes): a .safetensors file starts with an 8-byte header length");
  if (length.size() < 8)
    throw InputError(
        file, "",
        fmt::format("the file is {} bytes: a .safetensors file starts with an 8-byte header length", length.size()));
  const std::uint64_t n = dump_detail::load_le(length, 0, 8);
  const std::optional<std::size_t> size = in.size();
  const std::size_t after = size ? *size - std::min<std::size_t>(*size, 8) : 0;
  if (n == 0) throw InputError(file, "", "the .safetensors header length is 0: there is no header");
  if (size && n > after)
    throw InputError(
        file, "",
        fmt::format("the .safetensors header length {} runs past the end of the file ({} bytes after it)", n, after));
  if (n > max_header)
    throw InputError(file, "", fmt::format("the .safetensors header length {} is over the limit of {}", n, max_header));
  if (n > budget.left)
    throw InputError(file, "", fmt::format("the .safetensors header length {} is over {}", n, budget.describe()));
  std::string header = read_up_to(in, static_cast<std::size_t>(n));
  if (header.size() < n)
    throw InputError(file, "",
                     fmt::format("the .safetensors header length {} runs past the end of the file ({} bytes after it)",
                                 n, header.size()));
  return {std::move(header), size ? std::optional<std::size_t>(after - n) : std::nullopt};
}

// The header's entries, in its order.
std::vector<Entry> read_header(std::string_view header_text, const std::string& file) {
  if (header_text.front() != '{')
    throw InputError(file, "", "the .safetensors header does not start with '{': it must be a JSON object");
  try {
    (void)parse_json(header_text, file, true);
  } catch (const InputError& e) {
    throw InputError(file, e.pointer(), "in the .safetensors header: " + e.message());
  }
  json header;
  try {
    header = json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {  // parse_json accepted it, so this is not expected
    throw InputError(file, "", fmt::format("in the .safetensors header: invalid JSON: {}", e.what()));
  }
  if (!header.is_object()) throw InputError(file, "", "the .safetensors header must be a JSON object");

  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw InputError(file, "/__metadata__", "__metadata__ must be an object");
      continue;
    }
    entries.push_back(entry_of(name, value, file));
  }
  return entries;
}

// Every range inside the data and as long as its shape needs.
void check_sizes(const std::vector<Entry>& entries, std::optional<std::size_t> data, const std::string& file) {
  for (const Entry& e : entries) {
    const std::string where = pointer_key(e.pointer, "data_offsets");
    if (e.begin > e.end)
      throw InputError(file, where,
                       fmt::format("tensor {} begins at {}, after its end {}", quote_bytes(e.name), e.begin, e.end));
    if (data && e.end > *data)
      throw InputError(
          file, where,
          fmt::format("tensor {} ends at {}, past the end of the data ({} bytes)", quote_bytes(e.name), e.end, *data));
    const std::optional<std::size_t> need = dump_detail::shape_bytes(e.shape, dump_detail::item_size(e.dtype));
    if (!need || *need != e.end - e.begin)
      throw InputError(file, where,
                       fmt::format("tensor {} of shape {} in {} needs {} bytes, but its offsets hold {}",
                                   quote_bytes(e.name), shape_text(e.shape), dump_dtype_name(e.dtype),
                                   need ? fmt::format("{}", *need) : std::string("more than 2^64"), e.end - e.begin));
  }
}

// No range overlapping another and no byte belonging to none (as the safetensors library asks, so
// that nothing else hides in the file). Returns the entries in the order of their data.
std::vector<const Entry*> check_tiling(const std::vector<Entry>& entries, std::optional<std::size_t> data,
                                       const std::string& file) {
  std::vector<const Entry*> by_offset;
  by_offset.reserve(entries.size());
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::size_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    if (e->begin < covered)
      throw InputError(file, pointer_key(e->pointer, "data_offsets"),
                       fmt::format("tensor {} [{}, {}] overlaps tensor {} [{}, {}]", quote_bytes(e->name), e->begin,
                                   e->end, quote_bytes(previous->name), previous->begin, previous->end));
    if (e->begin > covered)
      throw InputError(file, pointer_key(e->pointer, "data_offsets"),
                       fmt::format("bytes {} to {} of the data belong to no tensor", covered, e->begin));
    covered = e->end;
    previous = e;
  }
  if (data && covered != *data)
    throw InputError(file, "", fmt::format("bytes {} to {} of the data belong to no tensor", covered, *data));
  return by_offset;
}

// The values of every entry as float64, against what the budget leaves, before any is read.
void check_values(const std::vector<Entry>& entries, const std::string& file, const MemoryBudget& budget) {
  std::size_t count = 0;
  for (const Entry& e : entries) count += (e.end - e.begin) / dump_detail::item_size(e.dtype);
  std::size_t as_double = 0;
  if (__builtin_mul_overflow(count, sizeof(double), &as_double) || as_double > budget.left)
    throw InputError(file, "",
                     fmt::format("its tensors hold {} values, {} as float64, over {}: their data was not read", count,
                                 describe_bytes(as_double), budget.describe()));
}

// The values of every entry, read in the order of the data straight into their tensors.
std::vector<DumpTensor> read_data(ByteSource& in, const std::vector<Entry>& entries,
                                  const std::vector<const Entry*>& by_offset, const std::string& file) {
  std::vector<DumpTensor> tensors(entries.size());
  std::size_t at = 0;
  for (const Entry* e : by_offset) {
    DumpTensor& t = tensors[static_cast<std::size_t>(e - entries.data())];
    t.shape = e->shape;
    t.dtype = e->dtype;
    t.values.reserve((e->end - e->begin) / dump_detail::item_size(e->dtype));
    const std::size_t got = dump_detail::read_values(in, e->end - e->begin, e->dtype, t.values);
    if (got < e->end - e->begin)
      throw InputError(file, pointer_key(e->pointer, "data_offsets"),
                       fmt::format("tensor {} ends at {}, past the end of the data ({} bytes)", quote_bytes(e->name),
                                   e->end, at + got));
    at = e->end;
  }
  constexpr std::size_t counted = std::size_t{1} << 20;  // a stream may not end: count this far
  if (const std::size_t rest = dump_detail::count_rest(in, counted); rest > 0)
    throw InputError(file, "",
                     rest > counted
                         ? fmt::format("more than {} bytes after byte {} of the data belong to no tensor", counted, at)
                         : fmt::format("bytes {} to {} of the data belong to no tensor", at, at + rest));
  return tensors;
}

}  // namespace

std::vector<std::pair<std::string, DumpTensor>> read_safetensors(ByteSource& in, const std::string& file,
                                                                 const MemoryBudget& budget) {
  // pass 1: the file's size against the budget, before a byte is read; then the header length, checked
  // against the file before the header is read
  check_size(in, file, budget);
  const auto [header_text, data] = read_split(in, file, budget);
  // pass 2: the header, JSON with the depth bound and duplicate-key check of parse_json
  const std::vector<Entry> entries = read_header(header_text, file);
  // pass 3: every range inside the data, as long as its shape needs, none overlapping another and
  // no byte belonging to none; what they hold against the budget
  check_sizes(entries, data, file);
  const std::vector<const Entry*> by_offset = check_tiling(entries, data, file);
  check_values(entries, file, budget);

  // pass 4: the values
  std::vector<DumpTensor> tensors = read_data(in, entries, by_offset, file);
  std::vector<std::pair<std::string, DumpTensor>> out;
  out.reserve(entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) out.emplace_back(entries[k].name, std::move(tensors[k]));
  return out;
}

std::vector<std::pair<std::string, DumpTensor>> read_safetensors(std::string_view bytes, const std::string& file) {
  ByteView in(bytes);
  return read_safetensors(in, file, MemoryBudget{});
}

std::vector<std::pair<std::string, DumpTensor>> read_safetensors_file(const std::string& path,
                                                                      const MemoryBudget& budget) {
  InputFile in(path);
  return read_safetensors(in, in.name(), budget);
}

}  // namespace attn

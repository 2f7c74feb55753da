#include "formats/dump_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "formats/json_dump.hpp"
#include "formats/npy.hpp"
#include "formats/safetensors.hpp"
#include "json/error.hpp"

namespace attn {

namespace {

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// Counts the values read so far against the limit: 8 bytes each once widened.
class Budget {
 public:
  explicit Budget(const MemoryLimit& limit) : limit_(limit) {}
  std::size_t left() const { return limit_.bytes - std::min(limit_.bytes, used_); }
  void take(const DumpTensor& t, const std::string& name) {
    used_ += t.values.size() * sizeof(double);
    if (used_ > limit_.bytes)
      throw InputError(name, "",
                       fmt::format("the dump's values take more than --max-memory {} as float64", limit_.text));
  }
  const std::string& text() const { return limit_.text; }

 private:
  MemoryLimit limit_;
  std::size_t used_ = 0;
};

}  // namespace

std::string tensor_source(const std::string& collection, const std::string& name) {
  return fmt::format("{}: {}", collection, name);
}

std::vector<NamedDump> read_dumps(const std::string& path, bool bfloat16, const MemoryLimit& limit, DumpFiles files) {
  namespace fs = std::filesystem;
  const std::string name = display_name(path);
  Budget budget(limit);
  std::error_code error;
  std::vector<NamedDump> dumps;
  if (!fs::is_directory(path, error)) {
    if (!ends_with(path, ".safetensors"))
      throw InputError(name, "",
                       files == DumpFiles::npy_and_json
                           ? "DUMPS must be a folder of <step>.npy or <step>.json files, or a .safetensors file"
                           : "WEIGHTS must be a folder of <tensor>.npy files, or a .safetensors file");
    for (auto& [tensor_name, tensor] : read_safetensors_file(path, MemoryBudget(budget.left(), limit))) {
      budget.take(tensor, name);
      dumps.push_back({tensor_name, tensor_source(name, tensor_name), std::move(tensor)});
    }
    if (dumps.empty()) throw InputError(name, "", "the file holds no tensor");
    return dumps;
  }
  const bool json_too = files == DumpFiles::npy_and_json;
  std::vector<fs::path> paths;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    const std::string file = entry.path().filename().string();
    if ((ends_with(file, ".npy") || (json_too && ends_with(file, ".json"))) && entry.is_regular_file(error))
      paths.push_back(entry.path());
  }
  if (error) throw InputError(name, "", fmt::format("cannot list the folder: {}", error.message()));
  std::sort(paths.begin(), paths.end());
  std::set<std::string> seen;
  for (const fs::path& file : paths) {
    const std::string base = file.filename().string(), shown = display_name(file.string());
    std::string tensor_name;
    DumpTensor tensor;
    if (ends_with(base, ".json")) {
      tensor_name = base.substr(0, base.size() - 5);
      MemoryLimit left{budget.left(), budget.text()};
      tensor = read_json_dump(read_text(file.string(), left), shown);
    } else {
      const bool bf16 = ends_with(base, ".bf16.npy");
      tensor_name = base.substr(0, base.size() - (bf16 ? 9 : 4));
      tensor = read_npy_file(file.string(), bfloat16 || bf16, MemoryBudget(budget.left(), limit));
    }
    budget.take(tensor, shown);
    if (!seen.insert(tensor_name).second)
      throw InputError(shown, "", fmt::format("a second tensor called {} in {}", tensor_name, name));
    dumps.push_back({tensor_name, base, std::move(tensor)});
  }
  if (dumps.empty())
    throw InputError(name, "", json_too ? "the folder holds no .npy or .json file" : "the folder holds no .npy file");
  return dumps;
}

}  // namespace attn

// A model folder's files on disk or in memory (folder_files.h).
#include "engine/folder_files.h"

#include <filesystem>

#include "engine/error.h"
#include "engine/safetensors.h"

namespace ptl {

namespace fs = std::filesystem;

std::string FolderFiles::path(const std::string& file) const {
  return label.empty() ? file : (fs::path(label) / file).string();
}

FolderFiles FolderFiles::on_disk(const std::string& dir) {
  FolderFiles f;
  f.label = dir;
  f.has = [dir](const std::string& file) {
    std::error_code ec;
    return fs::is_regular_file(fs::path(dir) / file, ec);
  };
  f.size = [dir](const std::string& file) -> uint64_t {
    std::error_code ec;
    const auto n = fs::file_size(fs::path(dir) / file, ec);
    return ec ? 0 : uint64_t(n);  // unreadable: read() says why
  };
  f.read = [dir](const std::string& file) { return read_file_bytes((fs::path(dir) / file).string()); };
  return f;
}

FolderFiles FolderFiles::in_memory(std::map<std::string, std::vector<uint8_t>> files, const std::string& label) {
  for (const auto& [name, bytes] : files)
    check(!name.empty() && name.find('/') == std::string::npos && name.find('\\') == std::string::npos && name != "." &&
              name != "..",
          "'" + name + "' is not a file name (the files of one folder are given by their names alone)");
  struct Held {
    std::map<std::string, std::vector<uint8_t>> files;
    std::map<std::string, bool> taken;  // every name -> handed over already
  };
  auto held = std::make_shared<Held>();
  for (auto& [name, bytes] : files) held->taken[name] = false;
  held->files = std::move(files);
  FolderFiles f;
  f.label = label;
  f.has = [held](const std::string& file) { return held->taken.count(file) > 0; };
  f.size = [held](const std::string& file) -> uint64_t {
    const auto it = held->files.find(file);
    return it == held->files.end() ? 0 : it->second.size();
  };
  f.read = [held, label](const std::string& file) {
    const std::string path = label.empty() ? file : label + "/" + file;
    const auto it = held->files.find(file);
    check(it != held->files.end(), path + (held->taken.count(file) ? ": read twice" : ": no such file"));
    std::vector<uint8_t> bytes = std::move(it->second);  // each file is read once (folder_files.h)
    held->files.erase(it);
    held->taken[file] = true;
    return bytes;
  };
  return f;
}

}  // namespace ptl

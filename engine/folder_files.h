#pragma once
// The files of a model folder (a Hugging Face GPT-2 folder, a PEFT adapter), wherever they are:
// a folder on disk (the CLI) or files handed over as bytes (the WebAssembly API, whose caller
// picked them in a browser). The readers of such folders (hf_gpt2.h, tokenizer_files.h) take
// this, so both fronts share one parser and one set of messages.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ptl {

struct FolderFiles {
  // The folder as messages name it: a path on disk, or the name a caller gave (a picked folder's
  // name); messages name a file as label/file, or the file alone when the label is empty.
  std::string label;
  std::function<bool(const std::string& file)> has;  // a regular file of that name
  // Its size in bytes without reading it (a reader refuses an oversized file before it reads).
  std::function<uint64_t(const std::string& file)> size;
  // The file's bytes; throws ptl::Error (unreadable). A folder of bytes hands each file over
  // once (its memory goes to the reader): the readers read each file at most once.
  std::function<std::vector<uint8_t>(const std::string& file)> read;

  std::string path(const std::string& file) const;  // label/file, for messages

  // The regular files of a folder on disk (the folder's existence is the caller's to check).
  static FolderFiles on_disk(const std::string& dir);
  // Files by name (no folders: a name with '/' is an error). `label` names the folder.
  static FolderFiles in_memory(std::map<std::string, std::vector<uint8_t>> files, const std::string& label);
};

}  // namespace ptl

// Reading and writing tokenizer files (see tokenizer_files.h for the formats).
#include "engine/tokenizer_files.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/folder_files.h"
#include "engine/json_text.h"
#include "engine/model_tokenizer.h"
#include "engine/safetensors.h"

namespace ptl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Larger than any real vocabulary file (GPT-2's tokenizer.json is 1.4 MB, Llama 3's 9 MB), and
// checked before the file is read.
constexpr uintmax_t kMaxFileBytes = 256u << 20;

std::string read_tokenizer_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes)
    fail(path + ": " + std::to_string(size) + " bytes is too large for a tokenizer file (the limit is " +
         std::to_string(kMaxFileBytes >> 20) + " MiB)");
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  check(bytes.size() <= kMaxFileBytes, path + ": too large for a tokenizer file");
  return std::string(bytes.begin(), bytes.end());
}

// {"spelling": id, ...}
std::vector<std::pair<std::string, int64_t>> read_vocab(const json& v, const std::string& name, const char* what) {
  if (!v.is_object()) fail(name + ": " + what + " must be an object of token: id, got " + shown(v));
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(v.size());
  for (const auto& [key, id] : v.items()) {
    if (!id.is_number_integer())
      fail(name + ": " + what + ": the id of token " + shown(json(key)) + " is " + shown(id) + ", not a whole number");
    out.emplace_back(key, id.get<int64_t>());
  }
  return out;
}

void check_unsupported(const json& j, const char* key, const std::string& name, const std::string& where) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null() && *it != false && *it != "" && *it != 0)
    fail(name + ": " + where + "." + key + " = " + shown(*it) + " is not supported");
}

// The one pre-tokenizer and decoder we implement: GPT-2's ByteLevel, with its own pattern and no
// prefix space.
// (A decoder's add_prefix_space changes nothing in decoding: GPT-2's file sets it.)
void check_byte_level(const json& j, const std::string& name, const char* where, bool is_decoder) {
  if (j.is_null() && is_decoder) return;
  if (!j.is_object() || !j.contains("type") || j["type"] != "ByteLevel")
    fail(name + ": " + where + " " + shown(j) +
         " is not supported (only ByteLevel, the byte-level BPE of GPT-2, is read here)");
  if (is_decoder) return;
  check_unsupported(j, "add_prefix_space", name, where);
  if (j.contains("use_regex") && j["use_regex"] != true)
    fail(name + ": " + where + ".use_regex = false is not supported (GPT-2's pattern is always used)");
}

std::vector<SpecialToken> read_added_tokens(const json& root, const std::string& name) {
  std::vector<SpecialToken> out;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_array()) fail(name + ": added_tokens must be an array, got " + shown(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& a = (*it)[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      fail(name + ": " + where + " must be an object with a whole-number \"id\" and a string \"content\", got " +
           shown(a));
    // These options change how the token is matched; matching the exact text is what we do.
    for (const char* opt : {"lstrip", "rstrip", "single_word"}) check_unsupported(a, opt, name, where);
    const int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id >= kMaxVocab)
      fail(name + ": " + where + ": id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxVocab - 1));
    out.push_back({a["content"].get<std::string>(), static_cast<int32_t>(id)});
  }
  return out;
}

// GPT-2's vocabulary files have no list of special tokens: <|endoftext|> is special by name.
std::vector<SpecialToken> specials_by_name(const std::vector<std::pair<std::string, int64_t>>& vocab) {
  std::vector<SpecialToken> out;
  for (const auto& [spelling, id] : vocab)
    if (spelling == kEndOfText && id >= 0 && id < kMaxVocab) out.push_back({spelling, static_cast<int32_t>(id)});
  return out;
}

// The reader proper; tokenizer_from_json below names the file in JSON type errors.
Tokenizer tokenizer_from_json_checked(std::string_view text, const std::string& name) {
  const json root = parse_json(text, name);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
    fail(name + ": not a tokenizer.json (no \"model\" object)");
  const json& model = root["model"];
  if (model.contains("type") && model["type"] != "BPE")
    fail(name + ": model.type " + shown(model["type"]) + " is not supported (only BPE)");
  for (const char* key :
       {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback", "ignore_merges"})
    check_unsupported(model, key, name, "model");
  if (!model.contains("vocab")) fail(name + ": model.vocab is missing");
  if (!model.contains("merges") || !model["merges"].is_array())
    fail(name + ": model.merges must be an array of merges");
  if (root.contains("normalizer") && !root["normalizer"].is_null())
    fail(name + ": normalizer " + shown(root["normalizer"]) + " is not supported (byte-level BPE has none)");
  if (!root.contains("pre_tokenizer")) fail(name + ": pre_tokenizer is missing (ByteLevel expected)");
  check_byte_level(root["pre_tokenizer"], name, "pre_tokenizer", false);
  if (root.contains("decoder")) check_byte_level(root["decoder"], name, "decoder", true);

  Tokenizer::Spelled s;
  s.vocab = read_vocab(model["vocab"], name, "model.vocab");
  const json& merges = model["merges"];
  s.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    // Older files write "left right", newer ones ["left", "right"].
    if (m.is_string()) {
      const std::string& line = m.get_ref<const std::string&>();
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
        fail(name + ": model.merges[" + std::to_string(i) + "] = " + shown(m) +
             " is not two tokens separated by one space");
      s.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      s.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(name + ": model.merges[" + std::to_string(i) + "] = " + shown(m) +
           " is neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
  s.specials = read_added_tokens(root, name);
  return Tokenizer::from_spelled(std::move(s), name,
                                 [](size_t i) { return "model.merges[" + std::to_string(i) + "]"; });
}
}  // namespace

Tokenizer tokenizer_from_json(std::string_view text, const std::string& name) {
  // Every shape is checked before it is read, but a JSON type error must still name the file.
  try {
    return tokenizer_from_json_checked(text, name);
  } catch (const json::exception& e) {
    fail(name + ": " + e.what());
  }
}

Tokenizer tokenizer_from_vocab_merges(std::string_view vocab_json, std::string_view merges_txt,
                                      const std::string& vocab_name, const std::string& merges_name) {
  Tokenizer::Spelled s;
  s.vocab = read_vocab(parse_json(vocab_json, vocab_name), vocab_name, "the vocabulary");
  s.specials = specials_by_name(s.vocab);
  // One merge per line; `lines[i]` is the line number of merge i, for messages.
  std::vector<size_t> lines;
  size_t line_no = 0;
  for (size_t pos = 0; pos < merges_txt.size();) {
    size_t end = merges_txt.find('\n', pos);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos)
      fail(merges_name + " line " + std::to_string(line_no) + ": " + shown(json(std::string(line))) +
           " is not two tokens separated by one space");
    s.merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
    lines.push_back(line_no);
  }
  // A merge that names a token the vocabulary lacks is reported with both files' names.
  return Tokenizer::from_spelled(std::move(s), vocab_name,
                                 [&](size_t i) { return merges_name + " line " + std::to_string(lines[i]); });
}

Tokenizer tokenizer_from_folder(const FolderFiles& folder) {
  const auto read = [&](const std::string& file) {
    const uint64_t size = folder.size(file);
    check(size <= kMaxFileBytes, folder.path(file) + ": " + std::to_string(size) +
                                     " bytes is too large for a tokenizer file (the limit is " +
                                     std::to_string(kMaxFileBytes >> 20) + " MiB)");
    const std::vector<uint8_t> bytes = folder.read(file);
    check(bytes.size() <= kMaxFileBytes, folder.path(file) + ": too large for a tokenizer file");
    return std::string(bytes.begin(), bytes.end());
  };
  const std::string where = folder.label.empty() ? "the folder" : folder.label;
  if (folder.has("tokenizer.json")) return tokenizer_from_json(read("tokenizer.json"), folder.path("tokenizer.json"));
  for (const auto& [v, m] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    if (folder.has(v) || folder.has(m)) {
      if (!folder.has(v)) fail(where + ": has " + m + " but no " + v);
      if (!folder.has(m)) fail(where + ": has " + v + " but no " + m);
      const std::string vocab = read(v), merges = read(m);
      return tokenizer_from_vocab_merges(vocab, merges, folder.path(v), folder.path(m));
    }
  }
  fail(where + ": no tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe in this folder");
}

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) fail("no such tokenizer file or folder: " + path);
  if (status.type() == fs::file_type::directory) return tokenizer_from_folder(FolderFiles::on_disk(path));
  // A checkpoint records its model's tokenizer (engine/model_tokenizer.h).
  if (path.ends_with(".tinygpt") || path.ends_with(".safetensors") || path.ends_with(".tinygpt-lora"))
    return checkpoint_tokenizer(path);
  return tokenizer_from_json(read_tokenizer_file(path), path);
}

std::string Tokenizer::to_json() const {
  const auto str = [](const std::string& s) { return json(s).dump(); };
  std::string out;
  out.reserve(vocab_size() * 24 + merges_.size() * 24 + 1024);
  out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (size_t i = 0; i < specials_.size(); ++i) {
    out += i ? ",\n    " : "\n    ";
    out += "{\"id\": " + std::to_string(specials_[i].id) + ", \"content\": " + str(specials_[i].text) +
           ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}";
  }
  out += specials_.empty() ? "],\n" : "\n  ],\n";
  out +=
      "  \"normalizer\": null,\n"
      "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
      "\"use_regex\": true},\n"
      "  \"post_processor\": null,\n"
      "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
      "\"use_regex\": true},\n"
      "  \"model\": {\n"
      "    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
      "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
      "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
      "    \"vocab\": {";
  // Special tokens are in the vocabulary too, as in GPT-2's files, so that vocab.json-style
  // readers see every id.
  bool first = true;
  for (int32_t id = 0; id < vocab_size(); ++id) {
    if (!present_[id]) continue;
    out += first ? "\n      " : ",\n      ";
    first = false;
    out += str(spelling_[id]) + ": " + std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  // "left right": byte-level spellings never hold a space (it is spelled 'Ġ'), and every version
  // of Hugging Face tokenizers reads this form.
  for (size_t i = 0; i < merges_.size(); ++i) {
    out += i ? ",\n      " : "\n      ";
    out += str(spelling_[merges_[i].left] + " " + spelling_[merges_[i].right]);
  }
  out += merges_.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return out;
}

void save_tokenizer(const Tokenizer& t, const std::string& path) {
  const std::string text = t.to_json();
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

}  // namespace ptl

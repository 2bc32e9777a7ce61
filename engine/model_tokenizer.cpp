// The tokenizer recorded with a model (see model_tokenizer.h for the metadata).
#include "engine/model_tokenizer.h"

#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/error.h"
#include "engine/lora.h"
#include "engine/tokenizer_files.h"

namespace ptl {

namespace {

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

nlohmann::json TokenizerId::to_json() const {
  nlohmann::json j = {{"type", type}, {"vocab_size", vocab_size}};
  if (type == "bpe") j["sha256"] = sha256;
  return j;
}

TokenizerId TokenizerId::from_json(const nlohmann::json& j, const std::string& what) {
  check(j.is_object() && j.contains("type") && j["type"].is_string(),
        what + ": the tokenizer must be a JSON object with a \"type\", got " + j.dump());
  TokenizerId id;
  id.type = j["type"].get<std::string>();
  if (id.type == "byte") {
    // Older files and every byte-level file: {"type":"byte","vocab_size":256}.
    if (j.contains("vocab_size"))
      check(json_int(j["vocab_size"], 0, kMaxVocab, what + ": tokenizer vocab_size") == 256,
            what + ": a byte-level tokenizer has 256 tokens, not " + j["vocab_size"].dump());
    return id;
  }
  check(id.type == "bpe" || id.type == "none",
        what + ": unsupported tokenizer type '" + id.type + "' (this ptl reads byte, bpe and none)");
  check(j.contains("vocab_size"), what + ": the tokenizer has no vocab_size");
  id.vocab_size = int(json_int(j["vocab_size"], 1, kMaxVocab, what + ": tokenizer vocab_size"));
  if (id.type == "bpe") {
    check(j.contains("sha256") && j["sha256"].is_string() && is_sha256_hex(j["sha256"].get<std::string>()),
          what + ": a BPE tokenizer's sha256 must be 64 lower-case hex digits");
    id.sha256 = j["sha256"].get<std::string>();
  }
  return id;
}

std::string TokenizerId::describe() const {
  if (type == "byte") return "bytes (256 tokens)";
  if (type == "none") return "no tokenizer (" + std::to_string(vocab_size) + " token ids)";
  return "a BPE tokenizer of " + std::to_string(vocab_size) + " tokens (sha256 " + sha256.substr(0, 16) + "...)";
}

ModelTokenizer::ModelTokenizer() {
  static const auto kBytes = std::make_shared<const Tokenizer>();
  tokenizer_ = kBytes;
}

ModelTokenizer ModelTokenizer::bytes() { return ModelTokenizer(); }

ModelTokenizer ModelTokenizer::none(int vocab_size) {
  ModelTokenizer m;
  m.tokenizer_.reset();
  m.id_.type = "none";
  m.id_.vocab_size = vocab_size;
  return m;
}

ModelTokenizer ModelTokenizer::of(Tokenizer t) {
  if (t.is_bytes()) return bytes();
  ModelTokenizer m;
  m.json_ = t.to_json();
  m.id_.type = "bpe";
  m.id_.vocab_size = t.vocab_size();
  m.id_.sha256 = sha256_hex(reinterpret_cast<const uint8_t*>(m.json_.data()), m.json_.size());
  m.tokenizer_ = std::make_shared<const Tokenizer>(std::move(t));
  return m;
}

ModelTokenizer ModelTokenizer::default_for(int vocab_size) { return vocab_size == 256 ? bytes() : none(vocab_size); }

const Tokenizer& ModelTokenizer::text() const {
  check(tokenizer_ != nullptr, "this model reads token ids only (vocabulary " + std::to_string(id_.vocab_size) +
                                   ", no tokenizer recorded): it cannot read or write text");
  return *tokenizer_;
}

void ModelTokenizer::write_metadata(std::map<std::string, std::string>& metadata) const {
  metadata["tokenizer"] = id_.to_json().dump();
  if (id_.type == "bpe")
    metadata["tokenizer_json"] = json_;
  else
    metadata.erase("tokenizer_json");
}

ModelTokenizer ModelTokenizer::read_metadata(const std::map<std::string, std::string>& metadata, int model_vocab,
                                             const std::string& what) {
  auto it = metadata.find("tokenizer");
  if (it == metadata.end()) return default_for(model_vocab);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    fail(what + ": checkpoint metadata 'tokenizer' is not valid JSON");
  }
  const TokenizerId id = TokenizerId::from_json(j, what);
  const auto vocab_check = [&](int tokens, const std::string& which) {
    check(tokens == model_vocab, what + ": " + which + " has " + std::to_string(tokens) +
                                     " tokens but the model's vocab_size is " + std::to_string(model_vocab) +
                                     " (they must be equal)");
  };
  if (id.type == "byte") {
    vocab_check(256, "the byte-level tokenizer");
    return bytes();
  }
  if (id.type == "none") {
    vocab_check(id.vocab_size, "the tokenizer metadata");
    return none(model_vocab);
  }
  auto text = metadata.find("tokenizer_json");
  check(text != metadata.end(), what + ": the tokenizer is BPE but the metadata has no 'tokenizer_json'");
  ModelTokenizer m = of(tokenizer_from_json(text->second, what + ": tokenizer_json"));
  vocab_check(m.vocab_size(), "its tokenizer_json");
  check(m.id_.vocab_size == id.vocab_size, what + ": the tokenizer metadata says " + std::to_string(id.vocab_size) +
                                               " tokens, its tokenizer_json has " + std::to_string(m.vocab_size()));
  check(m.id_.sha256 == id.sha256, what + ": tokenizer_json does not match the tokenizer's recorded sha256 (recorded " +
                                       id.sha256.substr(0, 16) + "..., the tokenizer_json read gives " +
                                       m.id_.sha256.substr(0, 16) + "...)");
  return m;
}

Tokenizer checkpoint_tokenizer(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), path);
  auto fmt = f.metadata.find("format");
  check(fmt == f.metadata.end() || fmt->second != kAdapterFormat,
        path + " is a LoRA adapter: it records only its base's tokenizer identity; give the base checkpoint");
  check(fmt != f.metadata.end() && fmt->second == "tinygpt",
        path + ": not a tinygpt checkpoint (its safetensors metadata has no format \"tinygpt\")");
  auto mc = f.metadata.find("model_config");
  check(mc != f.metadata.end(), path + ": checkpoint metadata lacks 'model_config'");
  int vocab = 0;
  try {
    vocab = ModelConfig::from_json(nlohmann::json::parse(mc->second)).vocab_size;
  } catch (const nlohmann::json::exception&) {
    fail(path + ": checkpoint metadata 'model_config' is not valid JSON");
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
  const ModelTokenizer m = ModelTokenizer::read_metadata(f.metadata, vocab, path);
  check(m.reads_text(), path + " is a model of " + std::to_string(vocab) + " token ids with no tokenizer recorded");
  return m.text();
}

}  // namespace ptl

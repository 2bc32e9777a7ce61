#include "engine/checkpoint.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "engine/error.h"

namespace ptl {

namespace {

nlohmann::json parse_meta_json(const SafeTensors& f, const std::string& key, const std::string& what) {
  auto it = f.metadata.find(key);
  check(it != f.metadata.end(), what + ": checkpoint metadata lacks '" + key + "'");
  try {
    return nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    fail(what + ": checkpoint metadata '" + key + "' is not valid JSON");
  }
}

}  // namespace

CheckpointContents inspect_checkpoint(const SafeTensors& f, const std::string& what) {
  auto fmt = f.metadata.find("format");
  check(fmt == f.metadata.end() || fmt->second != "tinygpt-lora",
        what +
            ": this is a LoRA adapter, not a model checkpoint (apply it to its base model as an adapter; "
            "`ptl lora info` describes it)");
  check(fmt != f.metadata.end() && fmt->second == "tinygpt",
        what + ": not a tinygpt checkpoint (its safetensors metadata has no format \"tinygpt\")");
  auto ver = f.metadata.find("format_version");
  check(ver != f.metadata.end(), what + ": checkpoint has no format_version");
  check(ver->second == std::to_string(kCheckpointVersion), what + ": unsupported checkpoint format_version " +
                                                               ver->second + " (this ptl reads version " +
                                                               std::to_string(kCheckpointVersion) + ")");

  CheckpointContents c;
  const nlohmann::json model_json = parse_meta_json(f, "model_config", what);  // names the file itself
  try {
    c.model = ModelConfig::from_json(model_json);
  } catch (const Error& e) {
    fail(what + ": " + e.what());
  }
  c.tokenizer = ModelTokenizer::read_metadata(f.metadata, c.model.vocab_size, what);
  if (f.metadata.count("train_config")) {
    const nlohmann::json train_json = parse_meta_json(f, "train_config", what);
    try {
      c.train = TrainConfig::from_json(train_json);
    } catch (const Error& e) {
      fail(what + ": " + e.what());
    }
  }
  if (f.metadata.count("train_state")) {
    auto s = parse_meta_json(f, "train_state", what);
    try {
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      c.state.step = s.contains("step") ? json_int(s["step"], 0, kMax, "train_state step") : 0;
      c.state.data_rng = Rng::from_hex(s.value("data_rng", std::string("0000000000000000")));
      c.state.tokens_seen =
          s.contains("tokens_seen") ? json_int(s["tokens_seen"], 0, kMax, "train_state tokens_seen") : 0;
      c.state.elapsed_seconds = s.value("elapsed_seconds", 0.0);
    } catch (const std::exception& e) {
      fail(what + ": bad train_state: " + e.what());
    }
  }
  if (f.metadata.count("loss_history")) {
    auto h = parse_meta_json(f, "loss_history", what);
    check(h.is_array(), what + ": loss_history is not an array");
    for (const auto& e : h) {
      if (!e.is_array() || e.size() < 2 || !e[0].is_number() || !e[1].is_number()) continue;
      if (!e[0].is_number_integer()) continue;  // a step is an integer: 1e300 is no step
      LossPoint p{e[0].get<int64_t>(), e[1].get<double>(), std::nullopt};
      if (e.size() > 2 && e[2].is_number()) p.val_loss = e[2].get<double>();
      c.history.push_back(p);
    }
  }
  if (auto cb = f.metadata.find("created_by"); cb != f.metadata.end()) c.created_by = cb->second;

  // Tensors: exactly the parameters of this config, plus optionally all of their moments.
  std::set<std::string> expected;
  for (const auto& t : parameter_list(c.model)) {
    expected.insert(t.name);
    const StoredTensor* s = f.find(t.name);
    check(s != nullptr, what + ": missing tensor '" + t.name + "'");
    check(s->dtype == DType::f32, what + ": tensor '" + t.name + "' is I32; it must be F32 (or F16 or BF16)");
    check(s->shape == t.shape, what + ": tensor '" + t.name + "' has shape " + shape_str(s->shape) +
                                   " but the config needs " + shape_str(t.shape));
  }
  int moments = 0, params = int(expected.size());
  for (const auto& s : f.tensors) {
    if (expected.count(s.name)) continue;
    std::string base;
    if (s.name.starts_with("optim.m."))
      base = s.name.substr(8);
    else if (s.name.starts_with("optim.v."))
      base = s.name.substr(8);
    check(!base.empty() && expected.count(base), what + ": unexpected tensor '" + s.name + "' for this model config");
    const StoredTensor* p = f.find(base);
    check(s.dtype == DType::f32 && s.shape == p->shape,
          what + ": optimizer tensor '" + s.name + "' does not match its parameter's shape");
    ++moments;
  }
  check(moments == 0 || moments == 2 * params, what + ": optimizer state is incomplete (" + std::to_string(moments) +
                                                   " of " + std::to_string(2 * params) + " moment tensors)");
  c.has_optimizer = moments > 0;
  return c;
}

ModelConfig infer_model_config(const SafeTensors& f, int heads, const std::string& what) {
  const StoredTensor* tok = f.find("tok_emb.weight");
  const StoredTensor* pos = f.find("pos_emb.weight");
  check(tok && pos, what +
                        ": no tok_emb.weight and pos_emb.weight: not the parameters of this GPT "
                        "(docs/checkpoint-format.md lists their names)");
  check(tok->shape.size() == 2 && pos->shape.size() == 2 && tok->shape[1] == pos->shape[1],
        what + ": tok_emb.weight and pos_emb.weight must be [vocab, d] and [ctx, d]");
  for (int64_t d : {tok->shape[0], tok->shape[1], pos->shape[0]})
    check(d <= std::numeric_limits<int>::max(),
          what + ": tok_emb.weight or pos_emb.weight has a dimension of " + std::to_string(d) + ", beyond any model's");
  ModelConfig mc;
  mc.vocab_size = int(tok->shape[0]);
  mc.d_model = int(tok->shape[1]);
  mc.ctx = int(pos->shape[0]);
  // Layers: blocks.0 .. blocks.{L-1}, every index present (a gap is reported by the tensor check).
  int layers = 0;
  for (const auto& t : f.tensors) {
    if (!t.name.starts_with("blocks.")) continue;
    // blocks.{i}.: i in 0..255 (the most layers a config allows); anything else is no layer of
    // this GPT, and the tensor check names it.
    int i = -1;
    const char* first = t.name.c_str() + 7;
    const auto [end, ec] = std::from_chars(first, t.name.c_str() + t.name.size(), i);
    if (ec != std::errc() || *end != '.' || i < 0 || i > 255) continue;
    layers = std::max(layers, i + 1);
  }
  check(layers > 0, what + ": no blocks.{i} tensors: not the parameters of this GPT");
  mc.n_layers = layers;
  if (heads > 0) {
    mc.n_heads = heads;
  } else {
    const Preset* match = nullptr;
    for (const Preset& p : presets())
      // (Any vocabulary: a BPE model of a preset's shape has that preset's heads.)
      if (p.model.d_model == mc.d_model && p.model.ctx == mc.ctx && p.model.n_layers == mc.n_layers) match = &p;
    check(match != nullptr, what + ": the number of heads is not in the tensors' shapes and no preset has " +
                                std::to_string(layers) + " layers, d " + std::to_string(mc.d_model) + " and ctx " +
                                std::to_string(mc.ctx) + ": give it with --heads");
    mc.n_heads = match->model.n_heads;
  }
  try {
    mc.validate();
  } catch (const Error& e) {
    fail(what + ": " + e.what());
  }
  return mc;
}

SafeTensors with_checkpoint_metadata(SafeTensors f, const ModelConfig& config, const ModelTokenizer* tokenizer) {
  f.metadata["format"] = "tinygpt";
  f.metadata["format_version"] = std::to_string(kCheckpointVersion);
  f.metadata["model_config"] = config.to_json().dump();
  (tokenizer ? *tokenizer : ModelTokenizer::default_for(config.vocab_size)).write_metadata(f.metadata);
  f.metadata["created_by"] = kVersionString;
  return f;
}

std::string history_to_json(const std::vector<LossPoint>& history) {
  nlohmann::json h = nlohmann::json::array();
  for (const auto& p : history)
    h.push_back({p.step, p.train_loss, p.val_loss ? nlohmann::json(*p.val_loss) : nlohmann::json(nullptr)});
  return h.dump();
}

// SHA-256 (FIPS 180-4), used to tie a LoRA adapter to the exact base checkpoint it was trained on.
// Streams over the bytes (no copy of the message), so hashing a large checkpoint costs one pass.
std::string sha256_hex(const uint8_t* msg, size_t size) {
  static const uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const uint8_t* m) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(m[4 * i]) << 24 | uint32_t(m[4 * i + 1]) << 16 | uint32_t(m[4 * i + 2]) << 8 | m[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  };
  const size_t full = size / 64 * 64;
  for (size_t off = 0; off < full; off += 64) block(msg + off);
  // The tail: the last partial block, the 0x80 byte, zeros, and the message length in bits.
  uint8_t tail[128] = {};
  const size_t rest = size - full;
  if (rest) std::memcpy(tail, msg + full, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  const uint64_t bits = uint64_t(size) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = uint8_t(bits >> (8 * i));
  for (size_t off = 0; off < tail_len; off += 64) block(tail + off);
  char out[65];
  for (int i = 0; i < 8; ++i) std::snprintf(out + 8 * i, 9, "%08x", h[i]);
  return std::string(out, 64);
}

std::string sha256_hex(const std::vector<uint8_t>& bytes) { return sha256_hex(bytes.data(), bytes.size()); }

}  // namespace ptl

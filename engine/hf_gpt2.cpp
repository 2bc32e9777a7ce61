// Hugging Face GPT-2 folders to and from the spec's model (hf_gpt2.h; docs/gpt2.md).
#include "engine/hf_gpt2.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/error.h"
#include "engine/json_text.h"
#include "engine/model.h"
#include "engine/model_tokenizer.h"
#include "engine/tokenizer_files.h"

namespace ptl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPrefix = "transformer.";  // GPT2LMHeadModel's names; GPT2Model's have none
// Everything write_hf_gpt2 writes: an existing --out folder holding only these is an earlier export.
constexpr const char* kWrittenFiles[] = {"config.json", "model.safetensors", "tokenizer.json"};

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

std::string strip_prefix(const std::string& name) {
  return name.starts_with(kPrefix) ? name.substr(std::string_view(kPrefix).size()) : name;
}

// The layer of a name "h.{i}.rest" (-1 when it is not one), and the rest after "h.{i}".
int layer_of(const std::string& name, std::string* rest) {
  if (!name.starts_with("h.")) return -1;
  int i = -1;
  const char* first = name.c_str() + 2;
  const auto [end, ec] = std::from_chars(first, name.c_str() + name.size(), i);
  if (ec != std::errc() || end == first || i < 0) return -1;
  *rest = std::string(end);
  return i;
}

// The causal-mask buffers older transformers saved with the weights: not parameters.
bool is_mask_buffer(const std::string& name) {
  std::string rest;
  return layer_of(name, &rest) >= 0 && (rest == ".attn.bias" || rest == ".attn.masked_bias");
}

// Why a name that is no parameter of this config is there, for the message.
std::string why_unexpected(const std::string& name, const ModelConfig& mc) {
  std::string rest;
  const int i = layer_of(name, &rest);
  if (i >= mc.n_layers)
    return " (config.json has n_layer " + std::to_string(mc.n_layers) + ": layers 0 to " +
           std::to_string(mc.n_layers - 1) + ")";
  return " (not a GPT-2 weight: GPT-2's are wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn, h.{i}.attn.c_proj, "
         "h.{i}.ln_2, h.{i}.mlp.c_fc, h.{i}.mlp.c_proj and ln_f, each .weight and .bias)";
}

// Columns col0 .. col0 + n of a Conv1D weight w [in, out_total] as the spec's [n, in] rows.
std::vector<float> take_columns(const float* w, int64_t in, int64_t out_total, int64_t col0, int64_t n) {
  std::vector<float> t(size_t(n * in));
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < in; ++i) t[size_t(o * in + i)] = w[i * out_total + col0 + o];
  return t;
}
// The inverse: the spec's rows src [n, in] into columns col0 .. col0 + n of w [in, out_total].
void put_columns(float* w, int64_t in, int64_t out_total, int64_t col0, const float* src, int64_t n) {
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < in; ++i) w[i * out_total + col0 + o] = src[o * in + i];
}

const char* encoding_name(const StoredTensor& t) {
  return t.encoding == Encoding::f16 ? "F16" : t.encoding == Encoding::bf16 ? "BF16" : "F32";
}

}  // namespace

ModelConfig hf_gpt2_config(std::string_view text, const std::string& name) {
  const json j = parse_json(text, name);
  check(j.is_object(), name + ": not a JSON object");
  const auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  check(has("model_type"), name + ": no model_type (a GPT-2 config has \"model_type\": \"gpt2\")");
  check(j["model_type"] == "gpt2", name + ": model_type is " + shown(j["model_type"]) + "; only \"gpt2\" is read");
  const auto integer = [&](const char* key, int64_t lo, int64_t hi) {
    check(has(key), name + ": no " + key);
    return int(json_int(j[key], lo, hi, name + ": " + key));
  };
  ModelConfig mc;
  mc.vocab_size = integer("vocab_size", 1, 65536);
  mc.n_layers = integer("n_layer", 1, 256);
  mc.d_model = integer("n_embd", 1, 16384);
  mc.n_heads = integer("n_head", 1, 16384);
  // n_ctx is the older name of the same number.
  check(has("n_positions") || has("n_ctx"), name + ": no n_positions");
  mc.ctx = integer(has("n_positions") ? "n_positions" : "n_ctx", 1, 65536);
  if (has("n_inner")) {
    const int64_t inner = json_int(j["n_inner"], 1, std::numeric_limits<int64_t>::max(), name + ": n_inner");
    check(inner == 4 * int64_t(mc.d_model), name + ": n_inner " + std::to_string(inner) + " is not 4 x n_embd (" +
                                                std::to_string(4 * int64_t(mc.d_model)) +
                                                "), the only MLP width this model has");
  }
  // GPT2Config's default is gelu_new; gelu_pytorch_tanh is the same function, and gelu the exact form.
  const json act = has("activation_function") ? j["activation_function"] : json("gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    mc.gelu = "tanh";
  else if (act == "gelu")
    mc.gelu = "erf";
  else
    fail(name + ": activation_function " + shown(act) +
         " is not supported (gelu_new, GPT-2's tanh form, or gelu, the exact one)");
  if (has("layer_norm_epsilon")) {
    const json& e = j["layer_norm_epsilon"];
    check(e.is_number() && std::fabs(e.get<double>() - 1e-5) <= 1e-11,
          name + ": layer_norm_epsilon " + shown(e) + " is not 1e-5, the only value this model has");
  }
  const auto flag = [&](const char* key, bool fallback) {
    if (!has(key)) return fallback;
    check(j[key].is_boolean(), name + ": " + key + " must be true or false, got " + shown(j[key]));
    return j[key].get<bool>();
  };
  check(flag("tie_word_embeddings", true),
        name + ": tie_word_embeddings is false: this model's output layer is wte, transposed (no separate head)");
  check(flag("scale_attn_weights", true),
        name + ": scale_attn_weights is false: this model always scales attention scores by 1 / sqrt(head size)");
  check(!flag("scale_attn_by_inverse_layer_idx", false),
        name + ": scale_attn_by_inverse_layer_idx is true, which this model does not do");
  check(!flag("add_cross_attention", false), name + ": add_cross_attention is true, which this model does not have");
  try {
    mc.validate();
  } catch (const Error& e) {
    fail(name + ": " + e.what());
  }
  return mc;
}

std::string hf_gpt2_config_json(const ModelConfig& mc, int eos_id) {
  // What GPT2Config.save_pretrained writes, keys sorted as it sorts them. Dropout rates are 0:
  // the model has none unless a training run asks for it (docs/model.md, "Dropout").
  json j;
  j["activation_function"] = mc.gelu == "tanh" ? "gelu_new" : "gelu";
  j["architectures"] = json::array({"GPT2LMHeadModel"});
  j["attn_pdrop"] = 0.0;
  j["bos_token_id"] = eos_id >= 0 ? json(eos_id) : json(nullptr);
  j["embd_pdrop"] = 0.0;
  j["eos_token_id"] = eos_id >= 0 ? json(eos_id) : json(nullptr);
  j["initializer_range"] = 0.02;
  j["layer_norm_epsilon"] = 1e-5;
  j["model_type"] = "gpt2";
  j["n_ctx"] = mc.ctx;
  j["n_embd"] = mc.d_model;
  j["n_head"] = mc.n_heads;
  j["n_inner"] = nullptr;
  j["n_layer"] = mc.n_layers;
  j["n_positions"] = mc.ctx;
  j["reorder_and_upcast_attn"] = false;
  j["resid_pdrop"] = 0.0;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["scale_attn_weights"] = true;
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  j["vocab_size"] = mc.vocab_size;
  return j.dump(2) + "\n";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_parameters(const ModelConfig& mc) {
  const int64_t V = mc.vocab_size, T = mc.ctx, d = mc.d_model, F = 4 * d;
  std::vector<std::pair<std::string, std::vector<int64_t>>> list = {{"wte.weight", {V, d}}, {"wpe.weight", {T, d}}};
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (auto& entry : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln_1.weight", {d}},
             {"ln_1.bias", {d}},
             {"attn.c_attn.weight", {d, 3 * d}},
             {"attn.c_attn.bias", {3 * d}},
             {"attn.c_proj.weight", {d, d}},
             {"attn.c_proj.bias", {d}},
             {"ln_2.weight", {d}},
             {"ln_2.bias", {d}},
             {"mlp.c_fc.weight", {d, F}},
             {"mlp.c_fc.bias", {F}},
             {"mlp.c_proj.weight", {F, d}},
             {"mlp.c_proj.bias", {d}},
         })
      list.emplace_back(h + entry.first, std::move(entry.second));
  }
  list.push_back({"ln_f.weight", {d}});
  list.push_back({"ln_f.bias", {d}});
  return list;
}

SafeTensors spec_from_hf_gpt2(const std::map<std::string, StoredTensor>& hf, const ModelConfig& mc) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, shape] : hf_gpt2_parameters(mc)) shapes[name] = shape;
  const auto get = [&](const std::string& name) {
    const auto it = hf.find(name);
    check(it != hf.end() && it->second.dtype == DType::f32 && it->second.shape == shapes.at(name),
          "GPT-2 tensor '" + name + "' is missing or has the wrong shape or dtype");
    return it->second.f32();
  };
  const int64_t V = mc.vocab_size, T = mc.ctx, d = mc.d_model, F = 4 * d;
  SafeTensors out;
  const auto copy = [&](const std::string& to, const std::string& from, std::vector<int64_t> shape,
                        int64_t offset = 0) { out.add(to, DType::f32, std::move(shape), get(from) + offset); };
  // Conv1D [in, out_total], columns col0 .. col0 + n -> the spec's [n, in].
  const auto transposed = [&](const std::string& to, const std::string& from, int64_t in, int64_t out_total,
                              int64_t col0, int64_t n) {
    out.add(to, DType::f32, {n, in}, take_columns(get(from), in, out_total, col0, n).data());
  };
  copy("tok_emb.weight", "wte.weight", {V, d});
  copy("pos_emb.weight", "wpe.weight", {T, d});
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    copy(b + "ln1.weight", h + "ln_1.weight", {d});
    copy(b + "ln1.bias", h + "ln_1.bias", {d});
    const char* qkv[] = {"q_proj", "k_proj", "v_proj"};  // c_attn's output columns, in this order
    for (int64_t j = 0; j < 3; ++j) {
      transposed(b + "attn." + qkv[j] + ".weight", h + "attn.c_attn.weight", d, 3 * d, j * d, d);
      copy(b + "attn." + qkv[j] + ".bias", h + "attn.c_attn.bias", {d}, j * d);
    }
    transposed(b + "attn.o_proj.weight", h + "attn.c_proj.weight", d, d, 0, d);
    copy(b + "attn.o_proj.bias", h + "attn.c_proj.bias", {d});
    copy(b + "ln2.weight", h + "ln_2.weight", {d});
    copy(b + "ln2.bias", h + "ln_2.bias", {d});
    transposed(b + "mlp.fc_in.weight", h + "mlp.c_fc.weight", d, F, 0, F);
    copy(b + "mlp.fc_in.bias", h + "mlp.c_fc.bias", {F});
    transposed(b + "mlp.fc_out.weight", h + "mlp.c_proj.weight", F, d, 0, d);
    copy(b + "mlp.fc_out.bias", h + "mlp.c_proj.bias", {d});
  }
  copy("ln_f.weight", "ln_f.weight", {d});
  copy("ln_f.bias", "ln_f.bias", {d});
  return out;
}

SafeTensors hf_gpt2_from_spec(const SafeTensors& spec, const ModelConfig& mc) {
  std::map<std::string, const StoredTensor*> by_name;
  for (const auto& t : spec.tensors) by_name[t.name] = &t;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : parameter_list(mc)) shapes[t.name] = t.shape;
  const auto get = [&](const std::string& name) {
    const auto it = by_name.find(name);
    check(it != by_name.end() && it->second->dtype == DType::f32 && it->second->shape == shapes.at(name),
          "parameter '" + name + "' is missing or has the wrong shape or dtype");
    return it->second->f32();
  };
  const int64_t d = mc.d_model, F = 4 * d;
  SafeTensors out;
  out.metadata["format"] = "pt";            // transformers refuses safetensors files without it
  std::map<std::string, std::string> from;  // GPT-2 name -> spec name, for the plain copies
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    for (const char* p : {"weight", "bias"}) {
      from[h + "ln_1." + p] = b + "ln1." + p;
      from[h + "ln_2." + p] = b + "ln2." + p;
    }
    from[h + "attn.c_proj.bias"] = b + "attn.o_proj.bias";
    from[h + "mlp.c_fc.bias"] = b + "mlp.fc_in.bias";
    from[h + "mlp.c_proj.bias"] = b + "mlp.fc_out.bias";
  }
  from["wte.weight"] = "tok_emb.weight";
  from["wpe.weight"] = "pos_emb.weight";
  from["ln_f.weight"] = "ln_f.weight";
  from["ln_f.bias"] = "ln_f.bias";
  std::vector<float> buf;
  for (const auto& [name, shape] : hf_gpt2_parameters(mc)) {
    const std::string out_name = kPrefix + name;
    if (auto it = from.find(name); it != from.end()) {
      out.add(out_name, DType::f32, shape, get(it->second));
      continue;
    }
    std::string rest;
    const std::string b = "blocks." + std::to_string(layer_of(name, &rest)) + ".";
    buf.assign(size_t(shape[0] * (shape.size() > 1 ? shape[1] : 1)), 0.0f);
    if (rest == ".attn.c_attn.weight") {
      const char* qkv[] = {"q_proj", "k_proj", "v_proj"};
      for (int64_t j = 0; j < 3; ++j)
        put_columns(buf.data(), d, 3 * d, j * d, get(b + "attn." + qkv[j] + ".weight"), d);
    } else if (rest == ".attn.c_attn.bias") {
      const char* qkv[] = {"q_proj", "k_proj", "v_proj"};
      for (int64_t j = 0; j < 3; ++j) {
        const float* bias = get(b + "attn." + qkv[j] + ".bias");
        std::copy(bias, bias + d, buf.begin() + j * d);
      }
    } else if (rest == ".attn.c_proj.weight") {
      put_columns(buf.data(), d, d, 0, get(b + "attn.o_proj.weight"), d);
    } else if (rest == ".mlp.c_fc.weight") {
      put_columns(buf.data(), d, F, 0, get(b + "mlp.fc_in.weight"), F);
    } else if (rest == ".mlp.c_proj.weight") {
      put_columns(buf.data(), F, d, 0, get(b + "mlp.fc_out.weight"), d);
    } else {
      fail("no spec parameter for GPT-2 tensor '" + name + "'");
    }
    out.add(out_name, DType::f32, shape, buf.data());
  }
  return out;
}

HfGpt2Folder read_hf_gpt2(const std::string& dir_arg) {
  const fs::path dir(dir_arg);
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  check(st.type() != fs::file_type::not_found, "no such folder: " + dir_arg);
  check(fs::is_directory(st), dir_arg +
                                  " is not a folder (a Hugging Face GPT-2 model is a folder: config.json, "
                                  "model.safetensors and the tokenizer files)");
  return read_hf_gpt2(FolderFiles::on_disk(dir_arg));
}

HfGpt2Folder read_hf_gpt2(const FolderFiles& folder) {
  const auto has = [&](const std::string& file) { return folder.has(file); };
  const auto path_of = [&](const std::string& file) { return folder.path(file); };
  const std::string where = folder.label.empty() ? "the folder" : folder.label;
  const std::string config_path = path_of("config.json");
  check(has("config.json"), config_path + ": no such file (a Hugging Face model folder has config.json)");
  HfGpt2Folder out;
  out.config = hf_gpt2_config(text_of(folder.read("config.json")), config_path);
  const ModelConfig& mc = out.config;

  // The weight files: model.safetensors, or the shards an index lists (tensor name -> file).
  std::vector<std::string> files;
  std::map<std::string, std::string> index;
  std::string source;  // the file that names the whole set of weights, for "missing" messages
  if (has("model.safetensors")) {
    files = {"model.safetensors"};
    source = path_of("model.safetensors");
  } else if (has("model.safetensors.index.json")) {
    source = path_of("model.safetensors.index.json");
    const json j = parse_json(text_of(folder.read("model.safetensors.index.json")), source);
    check(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
          source + ": no weight_map object (an index maps each tensor to its shard file)");
    for (const auto& [name, file] : j["weight_map"].items()) {
      check(file.is_string(), source + ": weight_map entry '" + name + "' is " + shown(file) + ", not a file name");
      const std::string f = file.get<std::string>();
      // A shard is a file of this folder, nothing else.
      check(
          !f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." && f != "..",
          source + ": weight_map names shard " + shown(file) + ", which is not a file name in this folder");
      index[name] = f;
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
    check(!index.empty(), source + ": weight_map lists no tensors");
    std::sort(files.begin(), files.end());  // model-00001-of-000NN first
    for (const auto& f : files) check(has(f), source + ": names shard " + f + ", which is not in the folder");
  } else {
    fail(where + ": no model.safetensors or model.safetensors.index.json" +
         (has("pytorch_model.bin")
              ? std::string(" (pytorch_model.bin, a pickle, is not read: convert it to safetensors first)")
              : std::string()));
  }

  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& [name, shape] : hf_gpt2_parameters(mc)) expected[name] = shape;
  std::map<std::string, StoredTensor> found;  // name without the prefix -> tensor
  std::map<std::string, std::string> found_in;
  std::optional<StoredTensor> lm_head;
  std::string lm_head_file;
  std::set<std::string> encodings;
  for (const std::string& file : files) {
    const std::string path = path_of(file);
    std::vector<std::string> buffers;
    SafeTensors shard;
    {
      const std::vector<uint8_t> bytes = folder.read(file);
      shard = decode_safetensors(bytes.data(), bytes.size(), path, [&](const std::string& name) {
        if (!is_mask_buffer(strip_prefix(name))) return false;
        buffers.push_back(name);
        return true;
      });
    }
    std::set<std::string> held(buffers.begin(), buffers.end());
    for (const auto& t : shard.tensors) held.insert(t.name);
    if (!index.empty()) {
      for (const auto& name : held) {
        const auto it = index.find(name);
        check(it != index.end(), path + ": holds tensor '" + name + "', which " + source + " does not list");
        check(it->second == file, path + ": holds tensor '" + name + "', which " + source + " places in " + it->second);
      }
      for (const auto& [name, f] : index)
        check(f != file || held.count(name),
              source + ": lists tensor '" + name + "' in " + file + ", which does not hold it");
    }
    for (const auto& name : buffers) {
      std::string rest;
      const int i = layer_of(strip_prefix(name), &rest);
      check(i < mc.n_layers, path + ": unexpected tensor '" + name + "'" + why_unexpected(strip_prefix(name), mc));
    }
    for (StoredTensor& t : shard.tensors) {
      const std::string key = strip_prefix(t.name);
      check(t.dtype == DType::f32,
            path + ": tensor '" + t.name + "' has dtype I32; GPT-2's weights are F32, F16 or BF16");
      if (key == "lm_head.weight") {
        check(!lm_head, path + ": lm_head.weight appears twice (also in " + lm_head_file + ")");
        lm_head = std::move(t);
        lm_head_file = path;
        continue;
      }
      const auto e = expected.find(key);
      if (e == expected.end()) fail(path + ": unexpected tensor '" + t.name + "'" + why_unexpected(key, mc));
      if (const auto other = found_in.find(key); other != found_in.end())
        fail(path + ": tensor '" + key + "' appears twice (with and without the 'transformer.' prefix" +
             (other->second == path ? "" : ", also in " + other->second) + ")");
      if (t.shape != e->second) {
        const bool conv1d = e->second.size() == 2 && key.starts_with("h.");
        const bool swapped = conv1d && t.shape.size() == 2 && t.shape[0] == e->second[1] && t.shape[1] == e->second[0];
        fail(path + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + " but config.json needs " +
             shape_str(e->second) +
             (swapped  ? " (it looks transposed: GPT-2's Conv1D weights are stored [in, out])"
              : conv1d ? " (Conv1D weights are stored [in, out])"
                       : ""));
      }
      encodings.insert(encoding_name(t));
      found_in[key] = path;
      found.emplace(key, std::move(t));
    }
  }
  for (const auto& [name, shape] : hf_gpt2_parameters(mc))
    check(found.count(name), source + ": missing tensor '" + name + "' (GPT-2 with n_layer " +
                                 std::to_string(mc.n_layers) + " has it; looked for with and without the '" + kPrefix +
                                 "' prefix)");
  if (lm_head) {
    const StoredTensor& wte = found.at("wte.weight");
    check(lm_head->shape == wte.shape && lm_head->data == wte.data,
          lm_head_file +
              ": lm_head.weight is not a copy of wte.weight: an untied output head is not this model (its output "
              "layer is wte, transposed)");
  }
  out.weights = spec_from_hf_gpt2(found, mc);
  found.clear();
  std::string dtypes;
  for (const auto& e : encodings) dtypes += (dtypes.empty() ? "" : " and ") + e;
  out.weights_from = (index.empty() ? std::string("model.safetensors")
                                    : std::to_string(files.size()) + " shard" + (files.size() == 1 ? "" : "s")) +
                     ", " + dtypes;

  // The tokenizer: read (every file checked by the engine's reader) and held against vocab_size.
  if (has("tokenizer.json") || has("vocab.json") || has("merges.txt")) {
    out.tokenizer = tokenizer_from_folder(folder);
    out.tokenizer_from = has("tokenizer.json") ? "tokenizer.json" : "vocab.json + merges.txt";
    const std::string first = path_of(has("tokenizer.json") ? "tokenizer.json" : "vocab.json");
    check(out.tokenizer->vocab_size() <= mc.vocab_size,
          first + ": the tokenizer has ids up to " + std::to_string(out.tokenizer->vocab_size() - 1) +
              " but config.json's vocab_size is " + std::to_string(mc.vocab_size));
  }
  return out;
}

HfGpt2Import import_hf_gpt2(HfGpt2Folder folder, const std::string& what) {
  const ModelConfig mc = folder.config;
  // The tokenizer recorded must name every id the model can produce.
  std::optional<ModelTokenizer> stored;
  if (folder.tokenizer && folder.tokenizer->vocab_size() == mc.vocab_size)
    stored = ModelTokenizer::of(*folder.tokenizer);
  std::vector<uint8_t> bytes =
      encode_safetensors(with_checkpoint_metadata(std::move(folder.weights), mc, stored ? &*stored : nullptr));
  HfGpt2Import out;
  out.trainer = Trainer::from_checkpoint(bytes, what);  // the same checks as any checkpoint load
  bytes.clear();
  bytes.shrink_to_fit();
  out.checkpoint = out.trainer->save_checkpoint(false);
  out.trainer->set_base_sha256(sha256_hex(out.checkpoint));
  out.tokenizer_stored = stored.has_value();
  std::string tok = "no tokenizer files";
  if (folder.tokenizer)
    tok = "tokenizer " + folder.tokenizer_from + ", " + std::to_string(folder.tokenizer->vocab_size()) + " ids, " +
          (!stored              ? "checked but not stored (fewer ids than the model's vocabulary)"
           : stored->is_bytes() ? "byte-level, stored"
                                : "byte-level BPE, stored");
  out.summary = "GPT-2 with " + std::to_string(mc.n_layers) + " layers, d " + std::to_string(mc.d_model) + ", " +
                std::to_string(mc.n_heads) + " heads, ctx " + std::to_string(mc.ctx) + ", vocab " +
                std::to_string(mc.vocab_size) + ", gelu " + mc.gelu + ", " + std::to_string(mc.param_count()) +
                " parameters (" + folder.weights_from + "; " + tok + ")";
  return out;
}

NamedFiles hf_gpt2_files(const ModelConfig& mc, const SafeTensors& spec, const Tokenizer* tokenizer) {
  NamedFiles files;
  files.emplace_back("model.safetensors", encode_safetensors(hf_gpt2_from_spec(spec, mc)));
  const std::string config = hf_gpt2_config_json(mc, tokenizer ? tokenizer->special_id(kEndOfText) : -1);
  files.emplace_back("config.json", std::vector<uint8_t>(config.begin(), config.end()));
  if (tokenizer) {
    const std::string t = tokenizer->to_json();
    files.emplace_back("tokenizer.json", std::vector<uint8_t>(t.begin(), t.end()));
  }
  return files;
}

HfGpt2Export hf_gpt2_export(const SafeTensors& f, const std::string& what) {
  const CheckpointContents c = inspect_checkpoint(f, what);  // every parameter there, with its shape
  // The tokenizer the checkpoint records (bytes for a byte-level model); none for a model of ids.
  std::optional<Tokenizer> tok;
  if (c.tokenizer.reads_text()) tok.emplace(c.tokenizer.text());
  HfGpt2Export out;
  out.files = hf_gpt2_files(c.model, f, tok ? &*tok : nullptr);
  out.summary = std::string("config.json (activation ") + (c.model.gelu == "tanh" ? "gelu_new" : "gelu") +
                "), model.safetensors (F32, " + std::to_string(c.model.param_count()) + " parameters)" +
                (!tok              ? " (no tokenizer: this checkpoint records none)"
                 : tok->is_bytes() ? ", tokenizer.json (byte-level)"
                                   : ", tokenizer.json (byte-level BPE)");
  return out;
}

void write_hf_gpt2(const std::string& dir, const NamedFiles& files) {
  write_folder_atomic(dir, files, {std::begin(kWrittenFiles), std::end(kWrittenFiles)}, "export-hf");
}

void write_hf_gpt2(const std::string& dir, const ModelConfig& mc, const SafeTensors& spec, const Tokenizer* tokenizer) {
  write_hf_gpt2(dir, hf_gpt2_files(mc, spec, tokenizer));
}

}  // namespace ptl

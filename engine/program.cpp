#include "engine/program.h"

#include <algorithm>
#include <set>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/program_check.h"

namespace ptl {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

namespace {
constexpr const char* kOpNames[] = {
    "embedding",
    "embedding_backward",
    "layernorm",
    "layernorm_backward",
    "linear",
    "linear_backward",
    "attention",
    "attention_backward",
    "kv_cache_write",
    "attention_cached",
    "attention_probs",
    "slice_rows",
    "gelu",
    "gelu_backward",
    "add",
    "add_backward",
    "dropout",
    "dropout_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "cross_entropy_tied",
    "cross_entropy_tied_backward",
    "grad_norm",
    "adamw",
};
// One name per OpKind, in its order.
static_assert(std::size(kOpNames) == static_cast<size_t>(OpKind::adamw) + 1);
constexpr const char* kKindNames[] = {"parameter", "gradient", "optim_state", "activation", "input", "state"};
}  // namespace

const char* to_string(DType d) { return d == DType::f32 ? "f32" : "i32"; }
const char* to_string(TensorKind k) { return kKindNames[static_cast<int>(k)]; }
const char* to_string(OpKind k) { return kOpNames[static_cast<int>(k)]; }

OpKind op_kind_from_string(const std::string& s) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (s == kOpNames[i]) return static_cast<OpKind>(i);
  fail("unknown op '" + s + "'");
}

static TensorKind kind_from_string(const std::string& s) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (s == kKindNames[i]) return static_cast<TensorKind>(i);
  fail("unknown tensor kind '" + s + "'");
}

int Program::add_tensor(TensorInfo info) {
  int existing = find(info.name);
  if (existing >= 0) {
    const auto& t = tensors[existing];
    check(t.shape == info.shape && t.kind == info.kind && t.dtype == info.dtype,
          "program '" + name + "': tensor '" + info.name + "' declared twice with different shapes or kinds");
    return existing;
  }
  tensors.push_back(std::move(info));
  return static_cast<int>(tensors.size()) - 1;
}

int Program::find(const std::string& tensor_name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  return -1;
}

int Program::id(const std::string& tensor_name) const {
  int i = find(tensor_name);
  check(i >= 0, "program '" + name + "' has no tensor '" + tensor_name + "'");
  return i;
}

void Program::add_op(OpKind kind, std::vector<int> inputs, std::vector<int> outputs,
                     std::map<std::string, double> attrs) {
  ops.push_back(Op{kind, std::move(inputs), std::move(outputs), std::move(attrs)});
}

std::vector<LiveRange> Program::live_ranges() const {
  const size_t n = tensors.size();
  const int end = int(ops.size());
  std::vector<LiveRange> r(n, LiveRange{end + 1, -1});
  std::vector<bool> read(n, false);
  for (int i = 0; i < end; i++) {
    const Op& op = ops[size_t(i)];
    for (const auto* ids : {&op.inputs, &op.outputs})
      for (int id : *ids)
        if (id >= 0) {
          r[size_t(id)].first = std::min(r[size_t(id)].first, i);
          r[size_t(id)].last = std::max(r[size_t(id)].last, i);
        }
    for (int id : op.inputs)
      if (id >= 0) read[size_t(id)] = true;
  }
  auto whole_run = [&](size_t i) {
    const TensorInfo& t = tensors[i];
    if (t.persistent() || !read[i] || t.kind == TensorKind::input || r[i].last < 0) return true;
    if (t.name == "loss" || t.name == "grad_norm" || t.name == "logits") return true;
    if (t.kind == TensorKind::gradient && t.name.starts_with("grad.")) {
      const int src = find(t.name.substr(5));
      if (src >= 0 && tensors[size_t(src)].kind == TensorKind::parameter) return true;
    }
    return false;
  };
  for (size_t i = 0; i < n; i++)
    if (whole_run(i)) r[i] = LiveRange{-1, end};
  return r;
}

nlohmann::json Program::to_json() const {
  nlohmann::json j;
  j["format"] = "ptl-program";
  j["version"] = 1;
  j["name"] = name;
  auto& ts = j["tensors"] = nlohmann::json::array();
  const std::vector<LiveRange> live = live_ranges();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    ts.push_back({{"name", t.name},
                  {"kind", to_string(t.kind)},
                  {"dtype", to_string(t.dtype)},
                  {"shape", t.shape},
                  {"trainable", t.trainable}});
    if (!t.persistent()) ts.back()["live"] = {live[i].first, live[i].last};
  }
  auto& os = j["ops"] = nlohmann::json::array();
  for (const auto& op : ops)
    os.push_back({{"op", to_string(op.kind)}, {"inputs", op.inputs}, {"outputs", op.outputs}, {"attrs", op.attrs}});
  return j;
}

Program Program::from_json(const nlohmann::json& j) {
  check(j.is_object() && j.contains("format") && j["format"] == "ptl-program",
        "not a serialised program (format is not 'ptl-program')");
  check(j.contains("version") && j["version"] == 1, "unsupported program version");
  Program p;
  // A program read from a file is data: every size is bounded before anything is computed from
  // it, and a field of the wrong type is a ptl::Error like any other bad file.
  constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;
  try {
    p.name = j.value("name", "");
    std::set<std::string> names;
    for (const auto& t : j.at("tensors")) {
      TensorInfo info;
      info.name = t.at("name").get<std::string>();
      check(names.insert(info.name).second, "program: tensor '" + info.name + "' declared twice");
      info.kind = kind_from_string(t.at("kind").get<std::string>());
      const std::string dtype = t.at("dtype").get<std::string>();
      check(dtype == "f32" || dtype == "i32",
            "program: tensor '" + info.name + "' has dtype '" + dtype + "' (f32 or i32)");
      info.dtype = dtype == "i32" ? DType::i32 : DType::f32;
      const std::string what = "program: tensor '" + info.name + "' shape";
      int64_t bytes = 4;
      for (const auto& d : t.at("shape")) {
        info.shape.push_back(json_int(d, 0, kMaxTensorBytes, what));
        bytes = info.shape.back() == 0 || bytes == 0 ? 0 : bytes;
        check(bytes == 0 || info.shape.back() <= kMaxTensorBytes / bytes,
              what + " holds more than " + std::to_string(kMaxTensorBytes) + " bytes");
        bytes *= info.shape.back();
      }
      info.trainable = t.value("trainable", false);
      p.tensors.push_back(info);
    }
    for (const auto& o : j.at("ops")) {
      // Tensor ids: kNoTensor (-1) or an index into the tensors above.
      auto ids = [&](const char* key) {
        std::vector<int> out;
        for (const auto& id : o.at(key))
          out.push_back(int(json_int(id, kNoTensor, int64_t(p.tensors.size()) - 1,
                                     std::string("program: op ") + (key[0] == 'i' ? "input" : "output"))));
        return out;
      };
      Op op{op_kind_from_string(o.at("op").get<std::string>()), ids("inputs"), ids("outputs"),
            o.at("attrs").get<std::map<std::string, double>>()};
      p.ops.push_back(std::move(op));
    }
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (why.starts_with("[json.exception.")) why.erase(0, why.find("] ") == std::string::npos ? 0 : why.find("] ") + 2);
    fail("program: " + why);
  }
  check_program(p);
  return p;
}

}  // namespace ptl

// check_program (engine/program_check.h): every program the engine builds passes it, and a
// program from a file whose shapes, dtypes or attributes would send a kernel past a buffer is
// refused by Program::from_json with a message naming the op and the tensor. What only values
// can tell (token ids, positions) is refused when the program runs.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/program.h"
#include "engine/program_check.h"
#include "engine/program_run.h"
#include "test_util.h"

using namespace ptl;
using nlohmann::json;
using ptl::test::error_of;

namespace {

ModelConfig small_model(const std::string& gelu = "erf") {
  ModelConfig m;
  m.vocab_size = 37;
  m.n_layers = 2;
  m.d_model = 12;
  m.n_heads = 3;
  m.ctx = 8;
  m.gelu = gelu;
  return m;
}

// The tiny model's train program as a file holds it, edited, then read back.
std::string refused(const std::function<void(Program&)>& edit) {
  TrainConfig tc;
  tc.dropout = 0.1;
  BuildOptions opt;
  opt.batch = 2;
  Program p = build_train_program(small_model(), opt, tc);
  edit(p);
  return error_of([&] { Program::from_json(p.to_json()); });
}

Op& first(Program& p, OpKind kind) {
  for (Op& op : p.ops)
    if (op.kind == kind) return op;
  throw std::runtime_error("no such op");
}

}  // namespace

TEST(ProgramCheck, EveryProgramTheEngineBuildsPasses) {
  for (const std::string gelu : {"erf", "tanh"}) {
    const ModelConfig m = small_model(gelu);
    for (const bool mask : {false, true})
      for (const int lora : {0, 1, 2}) {
        BuildOptions opt;
        opt.batch = 2;
        opt.seq = 5;
        opt.loss_mask = mask;
        if (lora == 1) opt.lora = LoraConfig{.rank = 2, .alpha = 4.0, .dropout = 0.1};
        if (lora == 2) opt.lora = LoraConfig{.rank = 2, .alpha = 4.0, .targets = {"qkv", "o", "fc_out"}};
        TrainConfig tc;
        tc.dropout = mask ? 0.0 : 0.2;
        for (const Program& p :
             {build_forward_program(m, opt), build_eval_program(m, opt), build_train_program(m, opt, tc),
              build_generate_program(m, opt.lora), build_inspect_program(m, 5, opt.lora)}) {
          SCOPED_TRACE(p.name + " gelu " + gelu + " mask " + std::to_string(mask) + " lora " + std::to_string(lora));
          EXPECT_EQ(error_of([&] { check_program(p); }), "(no error)");
          EXPECT_EQ(error_of([&] { Program::from_json(p.to_json()); }), "(no error)");
        }
      }
  }
}

TEST(ProgramCheck, TheJsonCarriesEachTemporaryTensorsLiveRange) {
  // What the WebGPU executor plans its buffers by (web/webgpu/src/memory.ts): the ranges of
  // Program::live_ranges, which the CPU arena uses; the host's tensors live for the whole run.
  const ModelConfig m = small_model("erf");
  BuildOptions opt;
  opt.batch = 2;
  opt.seq = 5;
  const Program p = build_train_program(m, opt, TrainConfig{});
  const auto live = p.live_ranges();
  const nlohmann::json j = p.to_json();
  const int end = int(p.ops.size());
  int shorter = 0;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorInfo& t = p.tensors[i];
    SCOPED_TRACE(t.name);
    const auto& jt = j["tensors"][i];
    if (t.persistent()) {
      EXPECT_FALSE(jt.contains("live"));
      continue;
    }
    ASSERT_TRUE(jt.contains("live"));
    EXPECT_EQ(jt["live"], nlohmann::json({live[i].first, live[i].last}));
    const bool host = t.kind == TensorKind::input || t.name == "loss" || t.name == "grad_norm" ||
                      (t.name.starts_with("grad.") && p.tensor(p.id(t.name.substr(5))).kind == TensorKind::parameter);
    if (host) {
      EXPECT_EQ(jt["live"], nlohmann::json({-1, end}));
    }
    for (size_t k = 0; k < p.ops.size(); ++k)
      for (const auto* ids : {&p.ops[k].inputs, &p.ops[k].outputs})
        for (int id : *ids)
          if (id == int(i)) {
            EXPECT_TRUE(live[i].first <= int(k) && int(k) <= live[i].last) << "op " << k;
          }
    shorter += live[i].first >= 0;
  }
  EXPECT_GT(shorter, 10) << "the activations live for part of the run";
  // Read back, the program writes the same JSON (the ranges follow from the ops).
  EXPECT_EQ(Program::from_json(j).to_json(), j);
}

TEST(ProgramCheck, ShapesThatDisagreeAreRefused) {
  // A linear op whose weight does not match its input's width (its kernel would read K floats
  // per row of W from a narrower tensor).
  EXPECT_EQ(refused([](Program& p) {
              const int w = first(p, OpKind::linear).inputs[1];
              p.tensors[size_t(w)].shape = {36, 11};
            }),
            "program: op 3 (linear): W 'blocks.0.attn.q_proj.weight' [36, 11] must be [N, 12] for x "
            "'blocks.0.ln1.out' [2, 8, 12]");
  EXPECT_EQ(refused([](Program& p) { first(p, OpKind::attention).attrs["heads"] = 5; }),
            "program: op 6 (attention): attribute 'heads' is 5, which does not divide the width 12");
  EXPECT_EQ(refused([](Program& p) { first(p, OpKind::attention).attrs["heads"] = 1e300; }),
            "program: op 6 (attention): attribute 'heads' is 1e+300 (between 1 and 12)");
  EXPECT_EQ(refused([](Program& p) {
              const int lse = first(p, OpKind::attention).outputs[1];
              p.tensors[size_t(lse)].shape = {2, 3, 7};
            }),
            "program: op 6 (attention): lse 'blocks.0.attn.lse' [2, 3, 7] holds 42 elements; for [B, H, T] it must "
            "hold 48");
  EXPECT_EQ(refused([](Program& p) { first(p, OpKind::layernorm).inputs[2] = kNoTensor; }),
            "program: op 2 (layernorm): input 2 (b) is missing");
  EXPECT_EQ(refused([](Program& p) { p.tensors[size_t(p.id("tokens"))].dtype = DType::f32; }),
            "program: op 0 (embedding): tokens 'tokens' is f32; the op reads i32");
  EXPECT_EQ(refused([](Program& p) {
              p.tensors[size_t(p.id("targets"))].shape = {2, 7};
            }),
            "program: op 31 (cross_entropy_tied): targets 'targets' [2, 7] holds 14 elements; one per row of x: it "
            "must hold 16");
  EXPECT_EQ(refused([](Program& p) { first(p, OpKind::dropout).attrs["threshold"] = -1; }),
            "program: op 1 (dropout): attribute 'threshold' is -1 (between 0 and 1.67772e+07)");
  EXPECT_EQ(refused([](Program& p) { p.tensors[size_t(p.id("dropout.seed"))].shape = {1}; }),
            "program: op 1 (dropout): the dropout seed 'dropout.seed' must hold 2 integers (key, step)");
  EXPECT_EQ(refused([](Program& p) { p.tensors[size_t(p.id("optim.hparams"))].shape = {1}; }),
            "program: op 65 (adamw): the hyperparameters must hold 2 numbers (lr, step)");
  // A zero last dimension: the executor divides element counts by it.
  EXPECT_EQ(refused([](Program& p) {
              p.tensors[size_t(p.id("tok_emb.weight"))].shape = {37, 0};
            }),
            "program: op 0 (embedding): token embedding 'tok_emb.weight' [37, 0] needs a last dimension of at least 1");
}

TEST(ProgramCheck, ValuesAreCheckedWhenTheProgramRuns) {
  // embedding_backward alone: nothing before it checked the token ids it scatters by.
  Program p;
  p.name = "kernel";
  const int dx = p.add_tensor({"dx", TensorKind::input, DType::f32, {1, 2, 4}});
  const int tokens = p.add_tensor({"tokens", TensorKind::input, DType::i32, {1, 2}});
  const int dwte = p.add_tensor({"dwte", TensorKind::gradient, DType::f32, {5, 4}});
  const int dwpe = p.add_tensor({"dwpe", TensorKind::gradient, DType::f32, {3, 4}});
  p.add_op(OpKind::embedding_backward, {dx, tokens, kNoTensor}, {dwte, dwpe});
  SafeTensors in;
  const int32_t ids[2] = {1, 5};
  in.add("tokens", DType::i32, {1, 2}, ids);
  EXPECT_EQ(error_of([&] { run_program_once(p, in); }), "token id 5 is outside the vocabulary");
  const int32_t fine[2] = {1, 4};
  SafeTensors ok;
  ok.add("tokens", DType::i32, {1, 2}, fine);
  EXPECT_EQ(error_of([&] { run_program_once(p, ok); }), "(no error)");

  // attention_cached reads cache rows up to pos0 + n: past the cache's 4 rows here.
  Program g;
  g.name = "kernel";
  const int q = g.add_tensor({"q", TensorKind::input, DType::f32, {2, 6}});
  const int kc = g.add_tensor({"kc", TensorKind::state, DType::f32, {4, 6}});
  const int vc = g.add_tensor({"vc", TensorKind::state, DType::f32, {4, 6}});
  const int pos0 = g.add_tensor({"pos0", TensorKind::input, DType::i32, {1}});
  const int y = g.add_tensor({"y", TensorKind::activation, DType::f32, {2, 6}});
  g.add_op(OpKind::attention_cached, {q, kc, vc, pos0}, {y}, {{"heads", 2}});
  SafeTensors at3;
  const int32_t three = 3;
  at3.add("pos0", DType::i32, {1}, &three);
  EXPECT_EQ(error_of([&] { run_program_once(g, at3); }), "attention reads past the KV cache");
  SafeTensors at2;
  const int32_t two = 2;
  at2.add("pos0", DType::i32, {1}, &two);
  EXPECT_EQ(error_of([&] { run_program_once(g, at2); }), "(no error)");
}

TEST(ProgramCheck, APromptsGenerateProgramKeepsTheLastPositionOnly) {
  // Over a prompt of 5 tokens, one slice_rows op hands the last position to the final LayerNorm,
  // so the logits are [1, V]; one token at a time needs none. Bad slices are refused at load.
  const ModelConfig m = small_model();
  const Program p = build_generate_program(m, {}, 5);
  size_t at = 0, count = 0;
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].kind == OpKind::slice_rows) at = i, ++count;
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(p.ops[at].attr("first"), 4.0);
  EXPECT_EQ(p.tensor(p.id("logits")).shape, (std::vector<int64_t>{1, m.vocab_size}));
  for (const Op& op : build_generate_program(m).ops) EXPECT_NE(op.kind, OpKind::slice_rows);

  auto refused_slice = [&](const std::function<void(Program&)>& edit) {
    Program q = p;
    edit(q);
    return error_of([&] { Program::from_json(q.to_json()); });
  };
  const std::string op = "program: op " + std::to_string(at) + " (slice_rows): ";
  EXPECT_EQ(refused_slice([&](Program& q) { q.ops[at].attrs["first"] = 5; }),
            op + "attribute 'first' is 5 (between 0 and 4)");
  EXPECT_EQ(refused_slice([&](Program& q) { q.ops[at].attrs["first"] = 1.5; }),
            op + "attribute 'first' is not a whole number");
  EXPECT_EQ(refused_slice([&](Program& q) {
              q.tensors[size_t(q.ops[at].outputs[0])].shape = {1, 6, 12};
            }),
            op + "y 'last.out' [1, 6, 12] must be 1 to 5 rows of x's width 12");
  EXPECT_EQ(refused_slice([&](Program& q) {
              q.tensors[size_t(q.ops[at].outputs[0])].shape = {1, 1, 11};
            }),
            op + "y 'last.out' [1, 1, 11] must be 1 to 5 rows of x's width 12");
}

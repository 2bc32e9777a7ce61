// Weight averaging as a user meets it: `ptl train --snapshot-every` keeps the weights of chosen
// steps, `ptl average` writes their element-wise mean as a checkpoint every command loads, and
// files of different models are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

SafeTensors weights_of(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  const auto weights = Trainer::from_checkpoint(bytes, path)->save_checkpoint(false);
  return decode_safetensors(weights.data(), weights.size(), path);
}

const char* kRun = "train --preset tiny --sample-every 0 --data t.txt --steps 40 --eval-every 20 --threads 1 ";

}  // namespace

TEST(CliAverage, SnapshotsAreTheRunsWeightsAtTheirSteps) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  CliRun r = ptl_cli(std::string(kRun) + "--snapshot-every 10 --snapshot-from 20 --out run", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto snaps = std::filesystem::path(d.file("run/snapshots"));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(snaps)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-000020.tinygpt", "step-000030.tinygpt", "step-000040.tinygpt"}));

  // The last snapshot holds the final weights; the one at step 20 those of a run stopped there.
  const SafeTensors last = weights_of(d.file("run/snapshots/step-000040.tinygpt"));
  const SafeTensors final_model = weights_of(d.file("run/model.tinygpt"));
  ASSERT_EQ(last.tensors.size(), final_model.tensors.size());
  for (size_t i = 0; i < last.tensors.size(); ++i) EXPECT_EQ(last.tensors[i].data, final_model.tensors[i].data);
  ASSERT_EQ(ptl_cli(std::string(kRun) + "--until 20 --out stopped", d).code, 0);
  const SafeTensors at20 = weights_of(d.file("run/snapshots/step-000020.tinygpt"));
  const SafeTensors stopped = weights_of(d.file("stopped/model.tinygpt"));
  for (size_t i = 0; i < at20.tensors.size(); ++i) EXPECT_EQ(at20.tensors[i].data, stopped.tensors[i].data);
  EXPECT_NE(at20.tensors[0].data, last.tensors[0].data);

  // A resumed run keeps snapshotting where it left off, with the same weights.
  r = ptl_cli("train --resume stopped/model.tinygpt --snapshot-every 10 --snapshot-from 20", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const SafeTensors resumed = weights_of(d.file("stopped/snapshots/step-000040.tinygpt"));
  for (size_t i = 0; i < last.tensors.size(); ++i) EXPECT_EQ(resumed.tensors[i].data, last.tensors[i].data);
}

TEST(CliAverage, WritesTheMeanOfTheWeights) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  ASSERT_EQ(ptl_cli(std::string(kRun) + "--snapshot-every 10 --snapshot-from 20 --out run", d).code, 0);
  const std::vector<std::string> files = {"run/snapshots/step-000020.tinygpt", "run/snapshots/step-000030.tinygpt",
                                          "run/snapshots/step-000040.tinygpt"};
  CliRun r = ptl_cli("average " + files[0] + " " + files[1] + " " + files[2] + " --out avg.tinygpt", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("the mean of 3 checkpoints"), std::string::npos) << r.out;

  std::vector<SafeTensors> in;
  for (const auto& f : files) in.push_back(weights_of(d.file(f)));
  const auto avg_bytes = read_file_bytes(d.file("avg.tinygpt"));
  const SafeTensors avg = decode_safetensors(avg_bytes.data(), avg_bytes.size());
  ASSERT_EQ(avg.tensors.size(), in[0].tensors.size());
  for (size_t t = 0; t < avg.tensors.size(); ++t) {
    ASSERT_EQ(avg.tensors[t].name, in[0].tensors[t].name);
    for (int64_t j = 0; j < avg.tensors[t].numel(); ++j) {
      const double sum = double(in[0].tensors[t].f32()[j]) + in[1].tensors[t].f32()[j] + in[2].tensors[t].f32()[j];
      ASSERT_EQ(avg.tensors[t].f32()[j], float(sum / 3)) << avg.tensors[t].name << "[" << j << "]";
    }
  }
  // The metadata: the latest step's, and where the mean came from.
  const auto trainer = Trainer::from_checkpoint(avg_bytes, "avg.tinygpt");
  EXPECT_EQ(trainer->state().step, 40);
  const auto from = nlohmann::json::parse(avg.metadata.at("averaged_from"));
  ASSERT_EQ(from.size(), 3u);
  EXPECT_EQ(from[0]["file"], "step-000020.tinygpt");
  EXPECT_EQ(from[2]["step"], 40);
  EXPECT_EQ(from[1]["sha256"], sha256_hex(read_file_bytes(d.file(files[1]))));
  r = ptl_cli("eval avg.tinygpt --data t.txt --json", d);
  EXPECT_EQ(r.code, 0) << r.err;

  // One file's mean is itself; --dtype f16 stores it in 16 bits.
  ASSERT_EQ(ptl_cli("average " + files[2] + " --out one.tinygpt --dtype f16", d).code, 0);
  const SafeTensors one = weights_of(d.file("one.tinygpt"));
  EXPECT_EQ(one.tensors[0].data.size(), in[2].tensors[0].data.size());  // widened back to F32 on load
  const auto one_raw = read_file_bytes(d.file("one.tinygpt"));
  EXPECT_LT(one_raw.size(), avg_bytes.size() * 6 / 10);
}

TEST(CliAverage, RefusesOtherModelsAndItsOwnInputs) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  ASSERT_EQ(ptl_cli(std::string(kRun) + "--out a", d).code, 0);
  ASSERT_EQ(ptl_cli(std::string(kRun) + "--ctx 16 --out b", d).code, 0);
  CliRun r = ptl_cli("average a/model.tinygpt b/model.tinygpt --out x.tinygpt", d);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("is another model than a/model.tinygpt"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("x.tinygpt")));

  r = ptl_cli("average a/model.tinygpt --out a/model.tinygpt", d);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("is one of the checkpoints averaged"), std::string::npos) << r.err;

  r = ptl_cli("average a/model.tinygpt t.txt --out x.tinygpt", d);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("t.txt"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("x.tinygpt")));
}

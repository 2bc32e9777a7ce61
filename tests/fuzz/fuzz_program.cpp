// The program JSON reader (Program::from_json): what `ptl_program_run` and the WebAssembly API's
// ptl_run_program load, and what another executor (web/webgpu) is handed. A rejected program is
// a ptl::Error; an accepted one has every tensor's size computable without overflow and every op
// naming tensors that exist, and serialises back to a program that reads the same.
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/program.h"
#include "tests/fuzz/fuzz_common.h"

using namespace ptl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;  // not JSON: the caller's parse error, before the reader
  }
  Program p;
  try {
    p = Program::from_json(j);
  } catch (const Error&) {
    return 0;
  }
  // What the executors compute from an accepted program before running anything.
  int64_t total = 0;
  for (const auto& t : p.tensors) {
    if (t.bytes() < 0) fuzz::fail_property("tensor '" + t.name + "' has a negative size");
    total += t.bytes();  // bounded by the reader: no overflow here either
  }
  (void)total;
  for (const auto& op : p.ops)
    for (const auto* ids : {&op.inputs, &op.outputs})
      for (int id : *ids)
        if (id < -1 || id >= int(p.tensors.size())) fuzz::fail_property("op names a tensor that does not exist");
  const nlohmann::json again = p.to_json();
  Program q;
  try {
    q = Program::from_json(again);
  } catch (const Error& e) {
    fuzz::fail_property(std::string("the reader refuses what to_json wrote: ") + e.what());
  }
  if (q.to_json() != again) fuzz::fail_property("from_json(to_json(p)) differs from p");
  return 0;
}

// libFuzzer target for a Hugging Face GPT-2 folder's config.json (engine/hf_gpt2.h, what
// `ptl import-hf` reads first): any bytes either give a model config or a ptl::Error, and a
// config that is accepted survives the config.json that `ptl export-hf` writes for it.
#include <string_view>

#include "engine/error.h"
#include "engine/hf_gpt2.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptl::ModelConfig mc;
  try {
    mc = ptl::hf_gpt2_config(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const ptl::Error&) {
    return 0;  // refused with a message: fine (any other exception escapes and is a finding)
  }
  if (!(ptl::hf_gpt2_config(ptl::hf_gpt2_config_json(mc), "written") == mc))
    ptl::fuzz::fail_property("config.json written for an accepted config reads back differently");
  return 0;
}

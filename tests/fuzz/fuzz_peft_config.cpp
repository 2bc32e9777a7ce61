// libFuzzer target for a PEFT LoRA adapter's adapter_config.json (engine/peft.h, what
// `ptl lora import-peft` reads first): any bytes either give a config or a ptl::Error, and a
// config that is accepted, when GPT-2 has its targets, survives the adapter_config.json that
// `ptl lora export-peft` writes for it.
#include <string_view>

#include "engine/error.h"
#include "engine/peft.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptl::PeftConfig c;
  try {
    c = ptl::peft_config_from_json(std::string_view(reinterpret_cast<const char*>(data), size), "adapter_config.json");
  } catch (const ptl::Error&) {
    return 0;  // refused with a message: fine (any other exception escapes and is a finding)
  }
  // Read targets are GPT-2's modules, so the config can always be written.
  const ptl::PeftConfig back = ptl::peft_config_from_json(ptl::peft_config_json(c), "written");
  if (back.lora.rank != c.lora.rank || back.lora.alpha != c.lora.alpha || back.lora.targets != c.lora.targets ||
      back.lora.dropout != c.lora.dropout || back.base_model != c.base_model)
    ptl::fuzz::fail_property("adapter_config.json written for an accepted config reads back differently");
  return 0;
}

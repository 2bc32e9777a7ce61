#include "engine/json_text.h"

#include "engine/error.h"

namespace ptl {

nlohmann::json parse_json(std::string_view text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] "; the rest reads well.
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    fail(name + ": not valid JSON: " + what);
  }
}

std::string shown(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

}  // namespace ptl

#include "engine/backends/cpu/buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/error.h"

namespace ptl::cpu {

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) fail("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  ptr_.reset(p);
}
void Buffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace ptl::cpu

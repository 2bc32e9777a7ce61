#pragma once
// 64-byte aligned, zero-initialised storage: the tensors of the CPU backend and what it derives
// from them (packed weights).
#include <cstddef>
#include <memory>

namespace ptl::cpu {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  void* data() { return ptr_.get(); }
  const void* data() const { return ptr_.get(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

}  // namespace ptl::cpu

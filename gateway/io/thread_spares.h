// ThreadSpares: a bounded stock of spare objects per thread, for objects
// that a connection holds only while it works (a relay chunk, an
// exchange's storage) and gives back when it goes idle: taking one from
// the stock and putting it back costs no allocation on a busy thread,
// while an idle connection holds none. Objects beyond kMax are freed.
// Thread-safety: each thread has its own stock; an object put back on
// another thread than the one that took it joins that thread's stock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace tollgate::gateway {

template <typename T, std::size_t kMax>
class ThreadSpares {
 public:
  // A spare, or null when the thread has none.
  static std::unique_ptr<T> Take() {
    auto& spares = Stock();
    if (spares.empty()) return nullptr;
    std::unique_ptr<T> spare = std::move(spares.back());
    spares.pop_back();
    return spare;
  }
  // Keeps `spare` for the next Take(), or frees it when the stock is full.
  static void Put(std::unique_ptr<T> spare) {
    auto& spares = Stock();
    if (spares.size() < kMax) spares.push_back(std::move(spare));
  }

 private:
  static std::vector<std::unique_ptr<T>>& Stock() {
    thread_local std::vector<std::unique_ptr<T>> spares;
    return spares;
  }
};

}  // namespace tollgate::gateway

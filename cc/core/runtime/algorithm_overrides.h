// Per-size-class allreduce algorithm overrides: "for an auto allreduce of
// this many bytes, run that algorithm instead of the cost model's pick".
// The autotuner (autotuner.h) sets them; the executor consults them in
// Resolve before the cost model. Kept apart from both so that another
// per-size choice (a self-correcting chooser) can use or replace the hook.
//
// A size class is a power-of-4 band of bytes: class c holds [4^c, 4^(c+1))
// (class 0 also holds 0 bytes). 16 classes cover everything below 4 GiB;
// larger sizes fall in the last. Each class holds one algorithm in 4 bits,
// so the whole table packs into one 64-bit word: it travels between ranks
// as that word and is swapped atomically in the executor.
#ifndef TFDIST_CORE_RUNTIME_ALGORITHM_OVERRIDES_H_
#define TFDIST_CORE_RUNTIME_ALGORITHM_OVERRIDES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/core/collectives/algorithm.h"

namespace tfdist {

class AlgorithmOverrides {
 public:
  static constexpr int kClasses = 16;

  static int SizeClass(size_t bytes);
  // The smallest size in class `size_class`.
  static size_t ClassFloor(int size_class);

  // kAuto where the class has no override.
  AllreduceAlgorithm For(size_t bytes) const;
  AllreduceAlgorithm ForClass(int size_class) const;
  // kAuto clears the override.
  void Set(int size_class, AllreduceAlgorithm algorithm);
  bool empty() const { return packed_ == 0; }

  uint64_t packed() const { return packed_; }
  static AlgorithmOverrides FromPacked(uint64_t packed) {
    AlgorithmOverrides o;
    o.packed_ = packed;
    return o;
  }
  // "none", or e.g. "1MiB:ring 4MiB:rabenseifner" (each class by its floor):
  // for logs, without commas or semicolons.
  std::string Describe() const;

  bool operator==(const AlgorithmOverrides& other) const { return packed_ == other.packed_; }
  bool operator!=(const AlgorithmOverrides& other) const { return packed_ != other.packed_; }

 private:
  uint64_t packed_ = 0;  // 4 bits per class, class 0 in the lowest
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_ALGORITHM_OVERRIDES_H_

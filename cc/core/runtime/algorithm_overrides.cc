#include "cc/core/runtime/algorithm_overrides.h"

namespace tfdist {

int AlgorithmOverrides::SizeClass(size_t bytes) {
  int bits = 0;  // bit width of bytes
  for (size_t b = bytes; b != 0; b >>= 1) ++bits;
  const int size_class = bits <= 1 ? 0 : (bits - 1) / 2;
  return size_class < kClasses ? size_class : kClasses - 1;
}

size_t AlgorithmOverrides::ClassFloor(int size_class) {
  return size_class <= 0 ? 0 : size_t{1} << (2 * size_class);
}

AllreduceAlgorithm AlgorithmOverrides::For(size_t bytes) const {
  return ForClass(SizeClass(bytes));
}

AllreduceAlgorithm AlgorithmOverrides::ForClass(int size_class) const {
  if (size_class < 0 || size_class >= kClasses) return AllreduceAlgorithm::kAuto;
  return static_cast<AllreduceAlgorithm>((packed_ >> (4 * size_class)) & 0xF);
}

void AlgorithmOverrides::Set(int size_class, AllreduceAlgorithm algorithm) {
  if (size_class < 0 || size_class >= kClasses) return;
  const int shift = 4 * size_class;
  packed_ = (packed_ & ~(uint64_t{0xF} << shift)) |
            ((static_cast<uint64_t>(algorithm) & 0xF) << shift);
}

namespace {

std::string SizeText(size_t bytes) {
  if (bytes >= (size_t{1} << 30)) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (size_t{1} << 10)) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace

std::string AlgorithmOverrides::Describe() const {
  if (empty()) return "none";
  std::string text;
  for (int c = 0; c < kClasses; ++c) {
    const AllreduceAlgorithm algorithm = ForClass(c);
    if (algorithm == AllreduceAlgorithm::kAuto) continue;
    if (!text.empty()) text += ' ';
    text += SizeText(ClassFloor(c)) + ":" + AllreduceAlgorithmName(algorithm);
  }
  return text;
}

}  // namespace tfdist

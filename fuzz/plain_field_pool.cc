// gateway/io/field_pool.cc for the fuzz targets: every block from operator new
// and back to operator delete, so that AddressSanitizer sees each field's
// lifetime (the real pool recycles blocks, hiding a use after free).
#include <new>

#include "gateway/io/field_pool.h"

namespace tollgate::gateway::field_pool {

void* Allocate(std::size_t bytes) { return ::operator new(bytes); }
void Deallocate(void* block, std::size_t) noexcept { ::operator delete(block); }
std::size_t FreeBlocks() { return 0; }

}  // namespace tollgate::gateway::field_pool

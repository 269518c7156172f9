// A core file that includes a header of a layer above it: the layer check
// (cmake/check_layers.cmake) must refuse it.
#include "gateway/serve/worker.h"

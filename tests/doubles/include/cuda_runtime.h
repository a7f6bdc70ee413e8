/* Test-double stand-in for the toolkit's cuda_runtime.h. */
#include "cuda_runtime_api.h"

// GTKWave's FST library (fstapi.c and its compressors) as Verilator ships it
// in include/gtkwave, compiled as C++ the way verilated_fst_c.cpp compiles it.
// Used by wave_files.cpp to write FST; single-threaded (no FST_WRITER_PARALLEL).
#define FST_CONFIG_INCLUDE "fst_config.h"
#include "gtkwave/fastlz.c"
#include "gtkwave/fstapi.c"
#include "gtkwave/lz4.c"

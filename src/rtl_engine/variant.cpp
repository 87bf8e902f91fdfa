// One Verilated build of tpu_core: TPU_RTL_VARIANT_NAME names its configuration
// and TPU_RTL_TOP its Verilated class (set by src/rtl_engine/CMakeLists.txt).
#include "rtl_engine/rtl_harness.h"

#define TPU_STR2(x) #x
#define TPU_STR(x) TPU_STR2(x)
#define TPU_CAT2(a, b) a##b
#define TPU_CAT(a, b) TPU_CAT2(a, b)

#include TPU_STR(TPU_RTL_TOP.h)
#include TPU_STR(TPU_CAT(TPU_RTL_TOP, ___024root.h))

namespace tpu::rtl {

model::RunLog TPU_CAT(run_, TPU_RTL_VARIANT_NAME)(const ArchConfig& cfg, const isa::Program& prog,
                                            model::Memories& mem, const model::RunOptions& opts) {
  return detail::run_on_rtl<TPU_RTL_TOP>(cfg, prog, mem, opts);
}

}  // namespace tpu::rtl

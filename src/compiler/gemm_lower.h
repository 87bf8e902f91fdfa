// The GEMM compiler's lowering pass (gemm_lower.cpp).
#pragma once

#include <cstdint>

#include "compiler/gemm.h"
#include "compiler/op_list.h"

namespace tpu::compiler {

// The ops of `plan`'s program (its layout and images decided: gemm.cpp), in
// program order, without the RWs and HLT that emit_in_order adds.
OpList lower_gemm(const GemmPlan& plan, const GemmSpec& spec, std::uint64_t n);

}  // namespace tpu::compiler

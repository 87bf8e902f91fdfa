// The sources of tpu_core in compile order (packages first), for every tool
// that reads the RTL: the Verilator builds (src/rtl_engine/CMakeLists.txt), lint
// (tests/cli/cli_test.sh, `verilator -F rtl/tpu_core.f`) and Yosys
// (tools/synth.sh). A configuration package, rtl/config/NAME/tpu_config_pkg.sv,
// comes before them on the command line. Other lines are Verilator options.

// Loops Verilator must unroll to schedule them: the reset of the scoreboard
// (2N + ActLatency + 8 + FifoDepth), the ACC banks' write ports and the array's
// accumulator ports (N), past the default limit of 64 from N = 32; and the
// weight FIFO's RWU write loop (N rows a cycle), whose body unrolled at N = 256
// passes the default limit of 30000 statements (Verilator then refuses it:
// BLKLOOPINIT, delayed assignments to an array in a loop it did not unroll).
--unroll-count 1024
--unroll-stmts 1000000

tpu_isa_pkg.sv
tpu_act_pkg.sv
tpu_codes_pkg.sv
tpu_core_pkg.sv
tpu_controller.sv
tpu_host_dma.sv
tpu_weight_dma.sv
tpu_pe.sv
tpu_systolic_row.sv
tpu_systolic_array.sv
tpu_activation_unit.sv
tpu_core.sv

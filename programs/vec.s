# Element-wise vector operations on chip (VEC, executed by the activation
# unit), N = 8: two 6-pixel maps of 8 channels A (zero point -5, scale 0.05)
# and B (zero point 3, scale 0.03), and a per-channel gate vector G (zero
# point 0):
#
#   R = ReLU(A + B), output scale 0.06, zero point -128             host rows 13..18
#   D = A - B, the same output scale, zero point 0                   host rows 19..24
#   T = tanh((A - za) * G / 64): G broadcast over every pixel        host rows 25..30
#   M = max(A, B) at the common scale, zero point 7                  host rows 31..36
#   N = ReLU(min(A, B)), written in place over B                     host rows 37..42
#
# ADD, SUB, MAX and MIN scale the operands to a common scale with int16
# factors (VSCL): s = max(s_a, s_b) / 2^14, da = 16384, db = round(0.03 / s)
# = 9830; then SETQ's M / 2^S ~ s / 0.06 = 873813 / 2^34 (docs/quantization.md,
# "Vector operations"). MUL multiplies the operands less their zero points.
# Data: programs/data/vec/ (tools/make_program_data.py).
.array 8

.equ P, 6
.equ A, 0                 # UB rows of A
.equ B, 10                # UB rows of B
.equ G, 20                # UB row of G

        RHM    0, A, P
        RHM    P, B, P
        RHM    2 * P, G, 1
        VSRC   B, -5, 3
        VSCL   16384, 9830, 0     # ADD
        SETQ   873813, 34, -128
        VEC.R  A, 30, P
        WHM    30, 13, P
        VSCL   16384, 9830, 1     # SUB
        SETQ   873813, 34, 0
        VEC    A, 40, P
        WHM    40, 19, P
        VSRC.B G, -5, 0
        VSCL   1, 1, 2            # MUL by the broadcast gate
        SETQ   1, 6, 0
        VEC.T  A, 50, P
        WHM    50, 25, P
        VSRC   B, -5, 3
        VSCL   16384, 9830, 3     # MAX
        SETQ   873813, 34, 7
        VEC    A, 60, P
        WHM    60, 31, P
        VSCL   16384, 9830, 4     # MIN, in place over B
        VEC.R  A, B, P
        WHM    B, 37, P
        HLT

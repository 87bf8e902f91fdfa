# Requantization and activation edge cases, N = 8. An identity weight tile
# copies every int8 value -128..127 into the accumulators (ACC = X), so the
# sigmoid and tanh tables are checked over their whole domain, and the
# requantization at its corners: ties (which round upward, also for negative
# values), a 64-bit product with M = +-2^31, saturation, S = 62, ReLU against
# a non-zero zero point. A random tile then gives accumulators up to about
# +-2^17 for the remaining cases.
#
# Host memory (rows of N int8):
#   0..31     A: the 256 int8 values in order (row r, column j: -128 + 8r + j)
#   32..63    X_B: random int8 rows
#   64..383   ten result blocks of 32 rows, in the order of the ACTs below
#             (block b at host row 64 + 32b)
# Weight memory: tile 0 = identity, tile 1 = random W_B.
# Unified buffer: the same layout as host memory. Accumulators: rows 0..31
# hold A (identity tile), rows 32..63 hold X_B . W_B.
.array 8

.equ R, 32                  ; rows per block
.equ ACC_A, 0
.equ ACC_B, R
.equ OUT, 2 * R             ; UB and host row of result block 0

        RHM    0, 0, 2 * R            # A and X_B -> UB rows 0..63
        RW     0
        RW     1
        MMC.SO 0, ACC_A, R            # ACC[0..31]  = A . I = A
        MMC.SO R, ACC_B, R            # ACC[32..63] = X_B . W_B

        SETQ   1, 0, 0                # reset values: q(a) = sat8(a)
        ACT.Q  ACC_A, OUT + 0 * R, R  # 0: the sigmoid table, y = -128..127
        ACT.T  ACC_A, OUT + 1 * R, R  # 1: the tanh table
        SETQ   1, 1, 0                # (a + 1) >> 1: every odd a is a tie
        ACT    ACC_A, OUT + 2 * R, R  # 2: -3 -> -1, -1 -> 0, 1 -> 1, 3 -> 2
        SETQ   2147483647, 31, 0      # (a * (2^31 - 1) + 2^30) >> 31 needs 64 bits
        ACT    ACC_A, OUT + 3 * R, R  # 3: a
        SETQ   -2147483648, 31, -1    # -a - 1; -(-128) - 1 = 127
        ACT.R  ACC_A, OUT + 4 * R, R  # 4: max(-a - 1, -1)
        SETQ   5, 1, 127              # (5a + 1) >> 1 + 127 saturates for a > 0
        ACT    ACC_A, OUT + 5 * R, R  # 5

        SETQ   93, 9, -3              # strong scale: most values saturate
        ACT.R  ACC_B, OUT + 6 * R, R  # 6
        SETQ   93, 17, -3
        ACT.T  ACC_B, OUT + 7 * R, R  # 7
        SETQ   1234567, 30, 10        # scale 1234567 / 2^30, about 1/870
        ACT.Q  ACC_B, OUT + 8 * R, R  # 8
        SETQ   -2147483648, 62, -128  # |a * M| <= 2^48 is far below r = 2^61,
        ACT    ACC_B, OUT + 9 * R, R  # 9: so the shift leaves 0: every value is Z

        WHM    OUT, OUT, 10 * R       # result blocks -> host rows 64..383
        HLT

# One weight tile: Y = ReLU(requantize(X . W)) for 8 rows of X.
#
# Host memory: rows 0..7 hold X (8 rows of N int8).
# Weight memory: tile 0 holds W (N x N int8, row k = input, column j = output).
# Result: host rows 16..23 hold Y (8 rows of N int8).
# No .array: the program works for any N (tests/cli runs it for N = 4, 8, 16
# with --array). Data for N = 8: programs/data/one_tile/.

.equ X_ROWS, 8
.equ X_HOST, 0
.equ Y_HOST, 16
.equ Y_UB, X_ROWS           ; Y lands in the UB right after X

        RHM    X_HOST, 0, X_ROWS      # X -> UB rows 0..7
        RW     0                      # W -> weight FIFO
        MMC.SO 0, 0, X_ROWS           # switch to W; ACC[0..7] = X . W
        SETQ   1, 0, 0                # identity requantization, saturating to int8
        ACT.R  0, Y_UB, X_ROWS        # UB[8..15] = ReLU(q(ACC[0..7]))
        WHM    Y_UB, Y_HOST, X_ROWS   # -> host rows 16..23
        HLT

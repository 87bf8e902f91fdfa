# K-accumulation over three weight tiles: ACC = sum_t X_t . W_t, where X_t is
# the t-th block of N input columns. Each RW is issued ahead of the MMC.S that
# consumes it, so weights load while the array computes.
#
# Host memory: rows t*ROWS .. t*ROWS+ROWS-1 hold X_t.
# Weight memory: tiles 0..2 hold W_0..W_2.
# Result: raw int32 accumulators written to host rows from OUT (4 host rows
# per accumulator row).
# Data for N = 8: programs/data/k_accumulate/ (host rows 0..11 X_0..X_2,
# 12..27 the 4 ACC rows as int32).
.array 8

.equ TILES, 3
.equ ROWS, 4
.equ OUT, TILES * ROWS

        RHM    0, 0, TILES * ROWS
        RW     0
        RW     1
        RW     2
first:  MMC.SO 0 * ROWS, 0, ROWS      # overwrite: ACC = X_0 . W_0
        MMC.S  1 * ROWS, 0, ROWS      # accumulate X_1 . W_1
        MMC.S  2 * ROWS, 0, ROWS      # accumulate X_2 . W_2
        WHM.A  0, OUT, ROWS
        HLT

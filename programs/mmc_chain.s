# A chain of back-to-back MMC.S with prefetched weights, N = 8:
#
#   ACC = X_0 . W_0 + X_1 . W_1 + ... + X_5 . W_5      (B = 17 rows of int32)
#
# i.e. a (17 x 48) . (48 x 8) product accumulated over six weight tiles. Every
# MMC.S switches to its own tile. With B >= 2N + 1 = 17 rows per MMC.S the next
# tile is loaded into the shadow weights while the current one is in use, so
# the array reads one UB row every cycle from the first row of the chain to
# the last (docs/microarchitecture.md, "Back-to-back MMC.S"): the MMC.S issue
# cycles are exactly B apart.
#
# The weight FIFO holds four tiles (a fifth can wait in the shadow weights),
# so four RW go ahead of the chain and the last two are issued inside it:
# each loads long before its MMC.S needs it.
#
# Host memory (rows of N int8):
#   0..101    X_0 .. X_5: X_t (17 rows) at rows 17t .. 17t+16
#   102..169  the result: 17 raw int32 accumulator rows, each filling 4 host
#             rows (element j in bytes 4j..4j+3, little-endian)
# Weight memory: tiles 0..5 hold W_0 .. W_5.
# Unified buffer: rows 0..101 hold X_0 .. X_5. Accumulators: rows 0..16.
.array 8

.equ B, 17                  ; rows per MMC.S (2N + 1)
.equ T, 6                   ; tiles in the chain
.equ OUT, T * B             ; host row of the result: 102

        RHM    0, 0, T * B            # X_0 .. X_5 -> UB rows 0..101
        RW     0                      # fill the weight FIFO
        RW     1
        RW     2
        RW     3
chain:  MMC.SO 0 * B, 0, B            # overwrite: ACC = X_0 . W_0
        RW     4
        MMC.S  1 * B, 0, B            # ACC += X_1 . W_1
        RW     5
        MMC.S  2 * B, 0, B            # ACC += X_2 . W_2
        MMC.S  3 * B, 0, B            # ACC += X_3 . W_3
        MMC.S  4 * B, 0, B            # ACC += X_4 . W_4
        MMC.S  5 * B, 0, B            # ACC += X_5 . W_5
        WHM.A  0, OUT, B              # 17 ACC rows -> host rows 102..169
        HLT

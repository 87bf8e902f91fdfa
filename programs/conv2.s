# Two convolution layers on chip (MMC.C), N = 8: the input map is read from
# the host once, the first layer's output stays in the unified buffer and the
# second layer convolves it where it lies.
#
#   Y1 = ReLU(q1(conv3x3(X, W1, stride 1, padding 1)))     6 x 5 x 8 -> 6 x 5 x 8
#   A2 = conv3x3(Y1, W2, stride 2, padding 1)              6 x 5 x 8 -> 3 x 3 x 8, int32
#
# X is one image of 6 x 5 pixels with 8 channels (one UB row per pixel, row
# y * 5 + x) whose zero point is -5: padding reads as -5 (CSTR's pad), as a
# zero-valued real input would. Each layer is nine passes, one per kernel
# offset (dy, dx): CTAP dy - 1, dx - 1 places input pixel (oy*s + dy - 1,
# ox*s + dx - 1) under output pixel (oy, ox), and the pass's MMC.C multiplies
# it by tile W[dy][dx], all passes adding into the same accumulator rows.
# Layer 2's MMC.C reads the whole map Y1, so it waits for the ACT writing it
# (a RAW hazard on UB rows 40..69).
#
# Host memory: rows 0..29 X. Weight memory: tiles 0..8 W1[dy][dx], 9..17
# W2[dy][dx] (row k input channel, column j output channel).
# Results: host rows 30..59 Y1 (int8), 60..95 A2 (9 ACC rows, 4 host rows each).
# Data: programs/data/conv2/ (tools/make_program_data.py).
.array 8

.equ H, 6
.equ W, 5
.equ P, H * W         # pixels of X and Y1
.equ Z, -5            # zero point of X
.equ Z1, -7           # zero point of Y1
.equ Y1, 40           # UB row of Y1
.equ A1, 100          # ACC rows of layer 1
.equ A2, 200          # ACC rows of layer 2

        RHM    0, 0, P
        RW     0
        RW     1
        RW     2
        RW     3
        CMAP   H, W, W            # layer 1: 6 x 5 in, 5 output columns
        CSTR   1, 1, Z
        CTAP   -1, -1
        MMC.SOC 0, A1, P          # (0, 0), overwriting
        RW     4
        CTAP   -1, 0
        MMC.SC 0, A1, P           # (0, 1)
        RW     5
        CTAP   -1, 1
        MMC.SC 0, A1, P           # (0, 2)
        RW     6
        CTAP   0, -1
        MMC.SC 0, A1, P           # (1, 0)
        RW     7
        CTAP   0, 0
        MMC.SC 0, A1, P           # (1, 1)
        RW     8
        CTAP   0, 1
        MMC.SC 0, A1, P           # (1, 2)
        RW     9
        CTAP   1, -1
        MMC.SC 0, A1, P           # (2, 0)
        RW     10
        CTAP   1, 0
        MMC.SC 0, A1, P           # (2, 1)
        RW     11
        CTAP   1, 1
        MMC.SC 0, A1, P           # (2, 2)
        RW     12
        SETQ   37, 12, Z1
        ACT.R  A1, Y1, P          # Y1 = ReLU(q1(A1))
        WHM    Y1, P, P
        CMAP   H, W, 3            # layer 2: 6 x 5 in, 3 output columns, stride 2
        CSTR   2, 2, Z1
        CTAP   -1, -1
        MMC.SOC Y1, A2, 9         # (0, 0)
        RW     13
        CTAP   -1, 0
        MMC.SC Y1, A2, 9
        RW     14
        CTAP   -1, 1
        MMC.SC Y1, A2, 9
        RW     15
        CTAP   0, -1
        MMC.SC Y1, A2, 9
        RW     16
        CTAP   0, 0
        MMC.SC Y1, A2, 9
        RW     17
        CTAP   0, 1
        MMC.SC Y1, A2, 9
        CTAP   1, -1
        MMC.SC Y1, A2, 9
        CTAP   1, 0
        MMC.SC Y1, A2, 9
        CTAP   1, 1
        MMC.SC Y1, A2, 9          # (2, 2)
        WHM.A  A2, 2 * P, 9
        HLT

# Pooling on chip (POOL, executed by the activation unit), N = 8, on one
# 6 x 5 map with 8 channels (one UB row per pixel, row y * 5 + x), whose zero
# point is -5:
#
#   M  = maxpool 2x2, stride 2, padding 0 (bottom/right) -> 3 x 2      host rows 30..35
#   A  = avgpool 3x3, stride 1, padding 1, padding counted (PyTorch's
#        count_include_pad) -> 6 x 5, requantized to zero point 3      host rows 36..65
#   G  = global average pool -> 1 x 1, requantized                      host row 66
#
# A POOL reads the map with the convolution registers (CMAP, CSTR, CTAP) and
# the window (CWIN): output pixel (oy, ox) covers input pixels
# (y0 + oy*stride_y + dy, x0 + ox*stride_x + dx) for dy < win_h, dx < win_w.
# Max pooling takes the largest value of the window's pixels inside the map;
# average pooling sums (x - pad) over the whole window (a pixel outside the
# map adds 0) and requantizes the sum with SETQ's M, S, Z, chosen here as
# about 1/9 and 1/30.
# Data: programs/data/pool/ (tools/make_program_data.py).
.array 8

.equ H, 6
.equ W, 5
.equ P, H * W
.equ Z, -5

        RHM    0, 0, P
        CMAP   H, W, 2            # max pool: 2 output columns
        CSTR   2, 2, Z
        CTAP   0, 0
        CWIN   2, 2
        POOL   0, 40, 6
        WHM    40, P, 6
        CMAP   H, W, W            # average pool 3x3, padding 1
        CSTR   1, 1, Z
        CTAP   -1, -1
        CWIN   3, 3
        SETQ   7282, 16, 3        # 7282 / 2^16 ~ 1/9
        POOL.A 0, 50, P
        WHM    50, P + 6, P
        CMAP   H, W, 1            # global average pool: one window of the whole map
        CTAP   0, 0
        CWIN   H, W
        SETQ   2185, 16, -1       # 2185 / 2^16 ~ 1/30
        POOL.A 0, 90, 1
        WHM    90, 2 * P + 6, 1
        HLT

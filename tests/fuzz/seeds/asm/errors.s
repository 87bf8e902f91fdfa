# One of each diagnostic (docs/isa.md, section 8).
    RHM IN, 0, 0
    MMC.SR 0, 0, 8
    ACT.R 0, OUT, 8
    SETQ 1, 63, 0
    WHM 16380, 0, 8
    FOO 1
    HLT 1
    RHM 1, 2
    MMC. 0, 0, 1
    NOP.X
    ACT.RQ 0, 0, 1
    MMC.SS 0, 0, 1
    SETQ 0x, 12a, 0b2
    SETQ 99999999999999999999, 0, 0
    RW 1 < 2
    RW @
    RW ( 1
    RW 1 / 0
    RW 1 << 64
    RW 9223372036854775807 + 1
    RW -9223372036854775807 - 1
    . equ X, 1
    .foo
    .equ 5, 1
    .equ Y 1
    .array 3
    .array 16
lbl: lbl: HLT
.equ LOOP, LOOP + 1
.equ P, Q
.equ Q, P
    RW 1 2

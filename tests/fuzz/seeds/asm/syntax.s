# Every construct of the assembly language (docs/isa.md, section 6).
.array 8
.equ BATCH, 16
.equ X_UB,  0              ; forward reference below
.equ Y_UB,  X_UB + BATCH
.EQU MASK, (1 << 6) - 1
start:  RHM   0x100, X_UB, BATCH
        rw    0b10
a: b:   mmc.so X_UB, 0, BATCH
        MMC.S.O 0, 0, 1
        MMC.OS 0, 0, 1
        MMC 0, 0, 1
        SETQ  -2147483648, 62, -128
        SETQ  3 * 4 / 2 - -1, 63 >> 1, -(4 << 2)
        ACT.R 0, Y_UB, BATCH
        ACT.Q 0, Y_UB, BATCH
	ACT.T	0,	Y_UB,	BATCH	# tabs
        ACT   end - start, Y_UB, BATCH + MASK - MASK
        WHM   Y_UB, 0x200, BATCH
        WHM.A 0, 4294967295 - 3, 1
        SYNC
        NOP
end:    HLT                ; end = 20

/* The toy engine's one "matmul kernel". Built with TOY_AMX, it starts with an AMX tile load (tileloadd, as
   ggml's AMX kernels do) on unconfigured tiles: an illegal instruction on a CPU without AMX, on one whose
   process has not asked for AMX state, and on one where the tile configuration is gone. */
int toy_kernel(void) {
#ifdef TOY_AMX
    char buf[64] = {0};
    long stride = 0;
    /* tileloadd (%rsi,%rdx,1), %tmm0: bytes, so that no assembler support for AMX is needed */
    __asm__ volatile(".byte 0xc4,0xe2,0x7b,0x4b,0x04,0x16" : : "S"(buf), "d"(stride) : "memory");
    return 2;
#else
    return 1;
#endif
}

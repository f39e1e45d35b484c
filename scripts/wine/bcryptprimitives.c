/* Wine 8 (Debian 12's) has no bcryptprimitives.dll, which every Windows since 10 has and
 * Rust's standard library imports for ProcessPrng (its random numbers). scripts/release
 * puts this stand-in into its own Wine prefix, never into a package: ProcessPrng through
 * RtlGenRandom (advapi32's SystemFunction036), which Wine has. Built with mingw-w64:
 *   x86_64-w64-mingw32-gcc -O2 -shared -s -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        length -= n;
    }
    return TRUE;
}

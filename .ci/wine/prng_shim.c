/*
 * Test harness only, never shipped: a stand-in for Windows' `bcryptprimitives.dll`, which Wine 8.0 lacks.
 *
 * Rust's standard library (1.78+) takes its random numbers from `ProcessPrng` in `bcryptprimitives.dll`; under a Wine
 * without that DLL every Rust program fails to start (`c0000135`). This DLL exports `ProcessPrng` and fills the
 * buffer from advapi32's `SystemFunction036` (`RtlGenRandom`), which Wine has. `.ci/windows` builds it with mingw and
 * puts it in the test Wine prefix's `system32`.
 */
#include <windows.h>

typedef BOOLEAN(WINAPI *rtl_gen_random_fn)(PVOID, ULONG);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    static rtl_gen_random_fn gen;
    if (!gen) {
        HMODULE advapi = LoadLibraryA("advapi32.dll");
        if (!advapi) {
            return FALSE;
        }
        gen = (rtl_gen_random_fn)GetProcAddress(advapi, "SystemFunction036");
        if (!gen) {
            return FALSE;
        }
    }
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!gen(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

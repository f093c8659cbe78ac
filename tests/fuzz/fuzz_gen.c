/*
** fuzz_gen.c -- libFuzzer harness for the kernel front end through
** generated kernels: the input bytes are the choices of the generator in
** tests/fuzz/driver.lua (fuzz_gen), which writes a kernel of typed locals,
** array stores, atomics, ifs, for and while loops, prints, a weft.func call
** and expressions over floats, ints, bools, vec3 and mat33 (one in 32
** asks for the wrong type on purpose). Every input is a syntactically
** valid kernel, so the fuzzer spends its time in typing, lowering, the
** passes, autodiff and the emitters rather than in Lua's parser. The rest
** (sandbox, stages, launch, invariants, WEFT_FUZZ_* variables) is
** fuzz_front's; this file is fuzz_front.c with another entry point.
** WEFT_FUZZ_SHOW=1 prints each generated kernel on stderr.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_gen
** Run:   build-fuzz/fuzz_gen -max_len=512 -timeout=30 -rss_limit_mb=4096 \
**          NEWDIR tests/fuzz/gen/corpus
**        (make fuzz runs it too; replay one input with build-fuzz/fuzz_gen FILE)
*/
#define FUZZ_ENTRY "fuzz_gen"
#define FUZZ_NAME "fuzz_gen"
#include "fuzz_front.c"

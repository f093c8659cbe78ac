-- fuzz_gen finding (open, src/ad): the adjoint of this kernel fails the IR
-- verifier (WEFT_VERIFY=1: 'autodiff: IR verification failed on input: in
-- @adj_kernel_1: ... operand 1 (%16) is not defined before this use'); without
-- the verifier the optimized adj_k stores 'undef' into the adjoint of x.
-- Replay: build-fuzz/fuzz_front tests/fuzz/front/open/ad_store_select_invalid_ir.lua
return weft.kernel{ x = weft.array(weft.float64), function(x)
  local i = weft.tid()
  x[i] = 32.0
  x[i] = (x[i] < 1.0) and weft.abs(x[i]) or 2.0
end }

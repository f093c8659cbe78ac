-- fuzz_gen finding, fixed in c115c17 (src/ad): the adjoint of this kernel
-- failed the IR verifier (a read forwarded inside a branch from the store
-- before it); without the verifier the adjoint stored undef into the adjoint
-- of x.
-- Replay: build-fuzz/fuzz_front tests/fuzz/front/crashes/ad_store_select_invalid_ir.lua
return weft.kernel{ x = weft.array(weft.float64), function(x)
  local i = weft.tid()
  x[i] = 32.0
  x[i] = (x[i] < 1.0) and weft.abs(x[i]) or 2.0
end }

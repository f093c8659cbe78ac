-- spec/helpers/cuda.lua -- the device cases' guard on a machine with no
-- CUDA device: `if cuda.missing() then return end` marks the running test
-- (or describe block) pending. scripts/cuda-emu gives an emulated device;
-- scripts/run-tests runs the specs that name it under the emulator.
local weft = require "weft"

local M = {}

function M.missing()
  if weft.is_cuda_available() then return false end
  -- busted's pending lives in the spec file's environment, not in ours
  getfenv(2).pending("no CUDA device: run under scripts/cuda-emu")
  return true
end

return M
